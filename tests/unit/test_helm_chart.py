"""deploy/helm/jobmanager: the chart renders (tests/helmrender.py, the subset of Helm's
templates it uses; `helm lint` and `helm template` too where a helm binary is installed)
into manifests that fit together: every value a template uses exists, the peer's config
loads, a pod's end drains its peer within its grace period, the PodDisruptionBudget, the
RBAC the preStop hook needs, and the same pod as deploy/kubernetes/jobmanager.yaml."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from jm import config as C
from jm.policy.members.stopdrain import stop_grace, wait_budget
from tests.helmrender import render_chart
from tests.helpers import ROOT

CHART = os.path.join(ROOT, "deploy", "helm", "jobmanager")


def _values():
    with open(os.path.join(CHART, "values.yaml")) as f:
        return yaml.safe_load(f)


def _by_kind(docs):
    out = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def _pod(docs):
    return _by_kind(docs)["StatefulSet"][0]["spec"]["template"]


def _conf(docs, tmp_path):
    cm = _by_kind(docs)["ConfigMap"][0]
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    return C.load_config(str(tmp_path), environ={})


def test_the_chart_is_a_chart():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    assert chart["apiVersion"] == "v2" and chart["name"] == "jobmanager"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


def test_every_value_a_template_uses_exists():
    values = _values()
    used = set()
    for name in os.listdir(os.path.join(CHART, "templates")):
        with open(os.path.join(CHART, "templates", name)) as f:
            used |= set(re.findall(r"\.Values((?:\.[A-Za-z_]\w*)+)", f.read()))
    assert used
    for path in sorted(used):
        v = values
        for part in path.strip(".").split("."):
            assert isinstance(v, dict) and part in v, f".Values{path} is not in values.yaml"
            v = v[part]


def test_the_config_values_are_configuration_keys(tmp_path):
    values = _values()
    for key in values["config"]:
        assert key in C.KEYS, f"values.yaml config: {key} is no configuration key"
    # the drain deadline has one place: drainDeadlineSeconds (the grace period follows it)
    assert "jobmanager.stop.drain-deadline" not in values["config"]
    conf = _conf(render_chart(CHART), tmp_path)
    assert conf["jobmanager.stop.drain-deadline"] == values["drainDeadlineSeconds"]
    assert list(conf["rest.allowed-hosts"]) == ["jm-rest"]
    assert conf["jobmanager.slots"] == values["config"]["jobmanager.slots"]


def test_the_rendered_objects_fit_together():
    docs = render_chart(CHART)
    kinds = _by_kind(docs)
    assert sorted(kinds) == ["ConfigMap", "PersistentVolumeClaim", "PodDisruptionBudget",
                             "Role", "RoleBinding", "Service", "ServiceAccount",
                             "StatefulSet"]
    sts = kinds["StatefulSet"][0]
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"] == labels
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}
    headless = services[sts["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    for svc in services.values():
        assert svc["spec"]["selector"] == labels
    c = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["JM_SERVICE"]["value"] == headless["metadata"]["name"]
    assert env["JM_STATEFULSET"]["value"] == sts["metadata"]["name"]
    assert int(env["JM_REPLICAS"]["value"]) == _values()["seeds"] == sts["spec"]["replicas"]
    keys = {C.env_name(k) for k in C.KEYS}
    for name in env:
        if name.startswith(C.ENV_PREFIX) and name not in C.ENV_RESERVED:
            assert name in keys, name
    config = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
    assert config["configMap"]["name"] == kinds["ConfigMap"][0]["metadata"]["name"]
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == "shared")
    assert claim["persistentVolumeClaim"]["claimName"] == \
        kinds["PersistentVolumeClaim"][0]["metadata"]["name"]


def test_a_pods_end_drains_its_peer_within_the_grace_period(tmp_path):
    for deadline in (60, 0, 600):
        docs = render_chart(CHART, {"drainDeadlineSeconds": deadline})
        conf = _conf(docs, tmp_path)
        assert conf["jobmanager.stop.drain-deadline"] == deadline
        pod = _pod(docs)
        c = pod["spec"]["containers"][0]
        assert c["lifecycle"]["preStop"]["exec"]["command"] == [
            "/opt/jm/deploy/entrypoint.sh", "prestop"]
        # the preStop of a scale-down waits for the removal, then SIGTERM drains
        cancel = conf["jobmanager.cancel-timeout"]
        need = wait_budget(deadline, cancel) + stop_grace(deadline, cancel)
        assert pod["spec"]["terminationGracePeriodSeconds"] >= need, deadline
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_pdb_and_the_rbac_of_the_prestop_hook():
    docs = render_chart(CHART, release="pipelines", namespace="data")
    kinds = _by_kind(docs)
    sts = kinds["StatefulSet"][0]
    pod = sts["spec"]["template"]
    pdb = kinds["PodDisruptionBudget"][0]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    sa = kinds["ServiceAccount"][0]["metadata"]["name"]
    assert pod["spec"]["serviceAccountName"] == sa
    role = kinds["Role"][0]
    rule, = role["rules"]
    assert rule["apiGroups"] == ["apps"] and rule["resources"] == ["statefulsets"]
    assert rule["verbs"] == ["get"] and rule["resourceNames"] == [sts["metadata"]["name"]]
    binding = kinds["RoleBinding"][0]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa,
                                    "namespace": "data"}]
    assert sts["metadata"]["name"] == "pipelines"


def test_values_change_what_is_rendered():
    docs = render_chart(CHART, {"replicas": 5, "storage": dict(
        _values()["storage"], shared={"existingClaim": "nfs-ha", "size": "1Gi",
                                      "storageClassName": ""})})
    kinds = _by_kind(docs)
    assert "PersistentVolumeClaim" not in kinds
    pod = _pod(docs)
    assert kinds["StatefulSet"][0]["spec"]["replicas"] == 5
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == "shared")
    assert claim["persistentVolumeClaim"]["claimName"] == "nfs-ha"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["JM_REPLICAS"] == "3"  # the seeds stay what the cluster was created with


def test_the_chart_runs_the_pod_of_the_plain_manifests():
    with open(os.path.join(ROOT, "deploy", "kubernetes", "jobmanager.yaml")) as f:
        plain = _by_kind([d for d in yaml.safe_load_all(f) if d])
    chart = _by_kind(render_chart(CHART))
    p = plain["StatefulSet"][0]["spec"]["template"]["spec"]
    h = chart["StatefulSet"][0]["spec"]["template"]["spec"]
    pc, hc = p["containers"][0], h["containers"][0]
    for key in ("ports", "lifecycle", "readinessProbe", "livenessProbe", "volumeMounts"):
        assert pc[key] == hc[key], key
    assert {e["name"] for e in pc["env"]} <= {e["name"] for e in hc["env"]}
    assert p["securityContext"] == h["securityContext"]
    assert p["terminationGracePeriodSeconds"] <= h["terminationGracePeriodSeconds"]
    assert plain["PodDisruptionBudget"][0]["spec"]["maxUnavailable"] == \
        chart["PodDisruptionBudget"][0]["spec"]["maxUnavailable"]
    assert plain["Role"][0]["rules"][0]["verbs"] == chart["Role"][0]["rules"][0]["verbs"]


@pytest.mark.skipif(not shutil.which("helm"), reason="no helm binary (not packaged for "
                    "Debian or PyPI on Linux): tests/helmrender.py renders the chart instead")
def test_helm_lint_and_template(tmp_path):
    r = subprocess.run(["helm", "lint", CHART], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["helm", "template", "jm", CHART], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    ours = sorted((d["kind"], d["metadata"]["name"]) for d in render_chart(CHART))
    helms = sorted((d["kind"], d["metadata"]["name"])
                   for d in yaml.safe_load_all(r.stdout) if d)
    assert helms == ours
