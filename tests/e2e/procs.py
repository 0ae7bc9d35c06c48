"""Real peer processes started with bin/jobmanager.sh for end-to-end tests."""
import os
import signal
import subprocess

from tests.helpers import ROOT, consistent_session, end_session, http, make_conf, poll


class ProcessCluster:
    def __init__(self, base: str, n: int, settings: dict) -> None:
        self.base = base
        self.conf_dir, self.lines = make_conf(base, n, settings)
        self.env = dict(os.environ, JM_CONF_DIR=self.conf_dir)
        self.urls = ["http://127.0.0.1:" + line.split(":")[1] for line in self.lines]
        # the tests' requests read what any peer acknowledged (X-JM-Min-Index), as the
        # jm CLI and the web UI do
        consistent_session(self.urls)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(ROOT, "bin", args[0]), *args[1:]], env=self.env,
                              capture_output=True, text=True, timeout=120)

    def pids(self) -> list[int]:
        out = []
        run_dir = os.path.join(self.base, "run")
        for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
            if name.endswith(".pid"):
                try:
                    out.append(int(open(os.path.join(run_dir, name)).read().strip()))
                except ValueError:
                    pass
        return out

    def start(self, only: list[int] | None = None) -> None:
        if only is None:
            r = self.run("start-cluster.sh")
            assert r.returncode == 0, r.stderr
        else:  # some peers of conf/masters only (the others join later)
            for i in only:
                self.start_peer(i)
        for i in (range(len(self.urls)) if only is None else only):
            self.wait_healthy(i)

    def wait_healthy(self, i: int) -> None:
        url = self.urls[i]
        poll(lambda: http("GET", url + "/healthz")[1].get("ok"), 60, what=f"{url} healthy")

    def wait_spark(self, only: list[int] | None = None) -> None:
        """Until each peer's Spark is up, and the cluster knows it (placement prefers ready
        peers)."""
        urls = self.urls if only is None else [self.urls[i] for i in only]
        ports = {int(u.rsplit(":", 1)[1]) for u in urls}
        poll(lambda: sum(1 for n in http("GET", urls[0] + "/nodes")[1]["nodes"]
                         if n["rest-port"] in ports and n["ready"]) == len(ports), 240,
             interval=0.5, what="every peer's Spark ready in the replicated state")
        for url in urls:
            poll(lambda u=url: http("GET", u + "/healthz")[1].get("spark-ready"), 240,
                 interval=0.5, what=f"{url} Spark ready")

    def stop(self) -> None:
        pids = self.pids()
        try:
            self.run("stop-cluster.sh")
        finally:
            end_session(self.urls)
            for pid in pids:  # never leave a peer behind, also when stop failed or hung
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def peer_pid(self, i: int) -> int:
        host, rest, _ = self.lines[i].split(":")
        run = os.path.join(self.base, "run")
        name = next(n for n in os.listdir(run) if n.endswith(f"-{host}_{rest}.pid"))
        return int(open(os.path.join(run, name)).read())

    def start_peer(self, i: int) -> None:
        r = self.run("jobmanager.sh", "start", self.lines[i])
        assert r.returncode == 0, r.stderr


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[-1][:1] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def assert_gone(pids: list[int], what: str, timeout: float = 30.0) -> None:
    """Every process of `pids` has ended (a SIGKILL is delivered asynchronously)."""
    poll(lambda: not [p for p in pids if _running(p)], timeout,
         what=f"{what} {[p for p in pids if _running(p)]} gone")


def node_id(line: str) -> str:
    """"host:rest-port:raft-port" -> the node id "host:raft-port"."""
    host, _, raft = line.split(":")
    return f"{host}:{raft}"


def job(url: str, jid: str) -> dict:
    return http("GET", url + f"/jobs/{jid}")[1]


def submit(url: str, spec: dict) -> str:
    s, b = http("POST", url + "/jobs", spec)
    assert s == 202, b
    return b["jobid"]
