"""deploy/: the image, the Kubernetes manifests, the entry point and the systemd unit refer to
real files, real configuration keys and real endpoints."""
import configparser
import os
import re
import shutil
import subprocess

import yaml

from jm import config as C
from tests.helpers import ROOT

DEPLOY = os.path.join(ROOT, "deploy")


def _docs():
    with open(os.path.join(DEPLOY, "kubernetes", "jobmanager.yaml")) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _env_keys(names):
    keys = {C.env_name(k): k for k in C.KEYS}
    for name in names:
        if name.startswith(C.ENV_PREFIX) and name not in C.ENV_RESERVED:
            assert name in keys, f"{name} is no configuration key"


def test_kubernetes_manifests_fit_together():
    docs = _docs()
    kinds = {d["kind"]: d for d in docs if d["kind"] != "Service"}
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    sts = kinds["StatefulSet"]
    headless = services[sts["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"] == labels
    for svc in services.values():
        assert svc["spec"]["selector"] == labels
    c = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["JM_SERVICE"]["value"] == headless["metadata"]["name"]
    assert int(env["JM_REPLICAS"]["value"]) == sts["spec"]["replicas"]
    _env_keys(env)
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"rest": 8081, "raft": 6123}
    # safe by default: both credentials are needed, as files of the Secret (0400)
    assert not [e for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    mount = next(m for m in c["volumeMounts"] if m["name"] == "credentials")
    secret = vols["credentials"]["secret"]
    assert secret["defaultMode"] == 0o400
    for key, name in (("rest.auth.token-file", "rest-token"),
                      ("cluster.secret-file", "cluster-secret")):
        assert env[C.env_name(key)]["value"] == f"{mount['mountPath']}/{name}"
    # the ConfigMap's config.yaml is a valid configuration
    cm = kinds["ConfigMap"]
    conf = yaml.safe_load(cm["data"]["config.yaml"])
    for key in conf:
        assert key in C.KEYS, key


def test_the_config_map_and_env_load(tmp_path):
    cm = next(d for d in _docs() if d["kind"] == "ConfigMap")
    os.makedirs(tmp_path / "conf")
    (tmp_path / "conf" / "config.yaml").write_text(cm["data"]["config.yaml"])
    sts = next(d for d in _docs() if d["kind"] == "StatefulSet")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    env = {}
    for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]:
        if e["name"].startswith("JM_CONF_") and "value" in e:
            if e["name"].endswith("_FILE"):  # the Secret's file, here (0400)
                f = secrets / os.path.basename(e["value"])
                f.write_text(f"{f.name}-value\n")
                f.chmod(0o400)
                env[e["name"]] = str(f)
            else:
                env[e["name"]] = e["value"]
    c = C.load_config(str(tmp_path / "conf"), environ=env)
    assert c["rest.auth.token"] == "rest-token-value" and c["jobmanager.slots"] == 8
    assert c["cluster.secret"] == "cluster-secret-value"


def test_the_entry_point_writes_masters_from_the_pod_names(tmp_path):
    env = dict(os.environ, JM_SERVICE="jm-peers", JM_REPLICAS="3", POD_NAME="jm-1",
               POD_NAMESPACE="data", JM_MASTERS_DIR=str(tmp_path), JM_DRY_RUN="1",
               JM_HOME=ROOT, JM_CONF_DIR=os.path.join(ROOT, "conf"), JM_REJOIN="1")
    r = subprocess.run(["sh", os.path.join(DEPLOY, "entrypoint.sh")], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    peer, flag = r.stdout.split()
    assert flag == "--rejoin"
    masters = C.read_masters(str(tmp_path / "masters"))
    assert [m.host for m in masters] == [f"jm-{i}.jm-peers.data.svc.cluster.local"
                                         for i in range(3)]
    assert peer == "jm-1.jm-peers.data.svc.cluster.local:8081:6123"
    assert C.choose_self(masters, peer).host.startswith("jm-1.")


def test_the_image_copies_what_exists_and_runs_as_a_user():
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    for src in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for path in src.split():
            assert os.path.exists(os.path.join(ROOT, path)), path
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert "openjdk-17" in text  # Spark needs Java
    _env_keys(re.findall(r"\b(JM_CONF_[A-Z0-9_]+)=", text))
    entry = re.search(r"^ENTRYPOINT (.+)$", text, re.M).group(1)
    assert "deploy/entrypoint.sh" in entry


def test_the_systemd_unit_runs_a_peer_in_the_foreground():
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read(os.path.join(DEPLOY, "systemd", "jobmanager@.service"))
    svc = unit["Service"]
    assert svc["ExecStart"].split()[-2:] == ["start-foreground", "%i"]
    assert svc["ExecStart"].split()[0].endswith("/bin/jobmanager.sh")
    assert svc["Type"] == "simple" and svc["User"] != "root"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    if shutil.which("systemd-analyze") and os.path.isdir("/run/systemd/system"):
        r = subprocess.run(["systemd-analyze", "verify",
                            os.path.join(DEPLOY, "systemd", "jobmanager@.service")],
                           capture_output=True, text=True, timeout=60)
        assert "error" not in r.stderr.lower(), r.stderr


def test_a_pods_end_drains_its_peer_and_a_scale_down_leaves(tmp_path):
    """The StatefulSet's pods: a preStop hook (a scale-down's removal, jm/local/kube.py),
    a grace period that covers it and the SIGTERM drain (jm/policy/members/stopdrain.py), one
    voluntary disruption at a time, and the RBAC the hook needs to read the replicas."""
    from jm.policy.members.stopdrain import stop_grace, wait_budget
    docs = _docs()
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    sts = kinds["StatefulSet"][0]
    pod = sts["spec"]["template"]
    c = pod["spec"]["containers"][0]
    hook = c["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == ["/opt/jm/deploy/entrypoint.sh", "prestop"]
    assert "deploy/entrypoint.sh" in open(os.path.join(DEPLOY, "Dockerfile")).read()
    (tmp_path / "config.yaml").write_text(kinds["ConfigMap"][0]["data"]["config.yaml"])
    conf = C.load_config(str(tmp_path), environ={})
    deadline, cancel = conf["jobmanager.stop.drain-deadline"], conf["jobmanager.cancel-timeout"]
    assert deadline > 0  # the pods drain on SIGTERM
    need = wait_budget(deadline, cancel) + stop_grace(deadline, cancel)
    assert pod["spec"]["terminationGracePeriodSeconds"] >= need
    pdb = kinds["PodDisruptionBudget"][0]
    assert pdb["apiVersion"] == "policy/v1" and pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    sa = pod["spec"]["serviceAccountName"]
    assert [s["metadata"]["name"] for s in kinds["ServiceAccount"]] == [sa]
    rule, = kinds["Role"][0]["rules"]
    assert rule == {"apiGroups": ["apps"], "resources": ["statefulsets"],
                    "resourceNames": [sts["metadata"]["name"]], "verbs": ["get"]}
    binding = kinds["RoleBinding"][0]
    assert binding["roleRef"]["name"] == kinds["Role"][0]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa}]


def test_the_entry_points_prestop_runs_the_kube_helper(tmp_path):
    env = dict(os.environ, JM_SERVICE="jm-peers", JM_REPLICAS="3", POD_NAME="jm-4",
               POD_NAMESPACE="data", JM_MASTERS_DIR=str(tmp_path), JM_DRY_RUN="1",
               JM_HOME=ROOT, JM_CONF_DIR=os.path.join(ROOT, "conf"))
    r = subprocess.run(["sh", os.path.join(DEPLOY, "entrypoint.sh"), "prestop"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["prestop", "jm-4.jm-peers.data.svc.cluster.local:8081:6123"]
    # a pod past the seeds is no line of conf/masters: it joins through them
    masters = C.read_masters(str(tmp_path / "masters"))
    assert len(masters) == 3 and not any(m.host.startswith("jm-4.") for m in masters)
    # outside a StatefulSet the hook does nothing (SIGTERM drains the peer)
    env.pop("JM_SERVICE")
    r = subprocess.run(["sh", os.path.join(DEPLOY, "entrypoint.sh"), "prestop"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_the_systemd_units_stop_waits_for_the_drain():
    from jm.policy.members.stopdrain import stop_grace
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read(os.path.join(DEPLOY, "systemd", "jobmanager@.service"))
    svc = unit["Service"]
    defaults = C.load_config(os.path.join(ROOT, "conf"), environ={})
    grace = stop_grace(C.KEYS["jobmanager.stop.drain-deadline"][0](
        C.KEYS["jobmanager.stop.drain-deadline"][1]), defaults["jobmanager.cancel-timeout"])
    assert float(svc["TimeoutStopSec"]) >= grace
    assert svc["KillMode"] == "mixed"  # SIGTERM to the peer alone: it stops its children
    text = open(os.path.join(DEPLOY, "systemd", "jobmanager@.service")).read()
    assert "jobmanager.stop.drain-deadline" in text  # the comment says what it is sized to
