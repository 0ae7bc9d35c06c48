"""What a peer writes is its user's alone (it runs with umask 077): its journal, snapshots,
identity, audit log, blobs and logs. A tenant's job run as the tenant's OS user gets the
artifacts it names as copies in its run folder, and reads none of the peer's files."""
import os
import pwd
import stat

import pytest

from tests.e2e.procs import ProcessCluster
from tests.helpers import ROOT as REPO, http, multipart, poll

TOKEN = "root-token"
JOBS = os.path.join(REPO, "tests", "integration", "isolation_jobs.py")


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def _peer_entries(top: str):
    """(path, lstat) of everything under `top` the peer's user owns."""
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode):
                yield path, st


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a tenant's work as its user")
def test_the_peer_s_files_are_its_own_and_a_tenant_user_s_job_gets_its_artifacts(tmp_path):
    from tests.integration.test_job_isolation import _open_up
    _open_up(tmp_path)
    c = ProcessCluster(str(tmp_path), 2, {"rest.auth.token": TOKEN,
                                          "jobmanager.executor.preload": "none"})
    try:
        c.start()
        url = c.urls[0]
        s, b = http("POST", url + "/tokens", {"name": "a", "role": "submit", "tenant": "a"},
                    headers=_bearer(TOKEN))
        assert s == 201, b
        sub = _bearer(b["token"])
        s, b = http("PUT", url + "/tenants/a", {"os-user": "nobody"}, headers=_bearer(TOKEN))
        assert s == 200 and b["os-user"] == "nobody", b
        with open(JOBS, "rb") as f:
            raw, ctype = multipart("isolation_jobs.py", f.read())
        s, art = http("POST", url + "/artifacts", raw=raw,
                      headers={"Content-Type": ctype, **sub})
        assert s == 201, art
        data, log = str(tmp_path / "data"), str(tmp_path / "log")
        secret = [p for top in (data, log) for p, st in _peer_entries(top)
                  if stat.S_ISREG(st.st_mode) and "spark-conf" not in p]
        assert any("/raft/" in p for p in secret) and any("/blobs/" in p for p in secret)
        assert any(p.endswith("audit.log") for p in secret), secret
        spec = {"entry": "isolation_jobs:peer_files", "pyfiles": [f"artifact:{art['id']}"],
                "args": {"paths": secret}, "restart-strategy": {"type": "none"}}
        s, b = http("POST", url + "/jobs", spec, headers=sub)
        assert s == 202, b
        jid = b["jobid"]

        def ended():
            s, j = http("GET", url + f"/jobs/{jid}", headers=sub)
            return j if s == 200 and j["state"] in ("FINISHED", "FAILED") else None
        job = poll(ended, 60, what="the job ended")
        assert job["state"] == "FINISHED", job
        # it imported its artifact (a copy its user owns) and could read none of the peer's
        assert job["result"] == {p: "PermissionError" for p in secret}, job["result"]
        nobody = pwd.getpwnam("nobody").pw_uid
        assert any(st.st_uid == nobody for top in (data,) for _, st in _walk_all(top))
        # owner-only, every file and folder of the peer's: others may pass through the
        # folders on the way to a job's or an engine's folder, never list or read them
        for top in (data, log, str(tmp_path / "ha")):
            for path, st in _peer_entries(top):
                mode = stat.S_IMODE(st.st_mode)
                if "spark-conf" in path:  # Spark's log configuration, read by their JVMs
                    continue
                if stat.S_ISDIR(st.st_mode):
                    assert mode & 0o066 == 0, f"{path} is {mode:04o}"
                else:
                    assert mode & 0o077 == 0, f"{path} is {mode:04o}"
    finally:
        c.stop()


def _walk_all(top: str):
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            yield os.path.join(root, name), os.lstat(os.path.join(root, name))
