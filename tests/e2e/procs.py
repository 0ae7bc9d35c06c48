"""Real peer processes started with bin/jobmanager.sh for end-to-end tests: the shared
process harness (chaos/peers.py) with the tests' requests and waits."""
import contextlib
import signal

from chaos.peers import PeerProcesses, running, send
from tests.helpers import FAST_JVM, consistent_session, end_session, http, make_conf, poll

_running = running  # (the tests' name for it)


class ProcessCluster(PeerProcesses):
    def __init__(self, base: str, n: int, settings: dict) -> None:
        conf_dir, lines = make_conf(base, n, settings)
        super().__init__(base, lines, conf_dir)
        self.env.setdefault("SPARK_SUBMIT_OPTS", FAST_JVM)  # (the peers pass it on)
        # the tests' requests read what any peer acknowledged (X-JM-Min-Index), as the
        # jm CLI and the web UI do
        consistent_session(self.urls)

    def call(self, method, url, body=None, timeout=10.0):
        return http(method, url, body, timeout=timeout)

    def wait(self, fn, timeout, what, interval=0.05):
        return poll(fn, timeout, interval, what)

    def pids(self) -> list[int]:
        """The pids of the run folder's pid files."""
        return self.pid_file_pids()

    def start(self, only: list[int] | None = None) -> None:
        if only is None:
            self.start_cluster()
        else:  # some peers of conf/masters only (the others join later)
            for i in only:
                self.start_peer(i)
        for i in (range(len(self.urls)) if only is None else only):
            self.wait_healthy(i, 60, interval=0.05)

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
            send(pids, signal.SIGKILL)  # never leave a peer behind, also when stop failed


@contextlib.contextmanager
def started(c: ProcessCluster, spark: bool = False):
    """c started (and every peer's Spark ready with `spark`); at the end stopped, every
    peer it ever started (the pid files and those it noted) gone."""
    try:
        c.start()
        if spark:
            c.wait_spark()
        yield c
    finally:
        pids = c.pids() + list(c.all_pids)  # known before the stop (it removes the files)
        c.stop()
        assert_gone(pids, "peers")


def assert_gone(pids: list[int], what: str, timeout: float = 30.0) -> None:
    """Every process of `pids` has ended (a SIGKILL is delivered asynchronously)."""
    poll(lambda: not [p for p in pids if running(p)], timeout,
         what=f"{what} {[p for p in pids if running(p)]} gone")


def node_id(line: str) -> str:
    """"host:rest-port:raft-port" -> the node id "host:raft-port"."""
    host, _, raft = line.split(":")
    return f"{host}:{raft}"


def job(url: str, jid: str) -> dict:
    return http("GET", url + f"/jobs/{jid}")[1]


def submit(url: str, spec: dict, timeout: float = 15.0) -> str:
    s, b = http("POST", url + "/jobs", spec, timeout=timeout)
    assert s == 202, b
    return b["jobid"]
