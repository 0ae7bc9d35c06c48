{{/* The StatefulSet's name, and the prefix of every object of the release. */}}
{{- define "jm.name" -}}
{{- .Values.nameOverride | default .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "jm.labels" -}}
app.kubernetes.io/name: jobmanager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jm.allLabels" -}}
{{ include "jm.labels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The peer's config.yaml: .Values.config, the drain deadline, rest.allowed-hosts. */}}
{{- define "jm.config" -}}
{{- $conf := merge (dict "jobmanager.stop.drain-deadline" (printf "%d s" (int .Values.drainDeadlineSeconds))) .Values.config -}}
{{- $conf = merge $conf (dict "rest.allowed-hosts" (printf "%s-rest" (include "jm.name" .))) -}}
{{- toYaml $conf -}}
{{- end -}}
