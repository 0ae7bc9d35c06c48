"""A peer (a real process) that runs out of file descriptors keeps its listeners: its
REST and Raft ports accept connections again once descriptors are free (pysyncobj closed
its Raft listener for good on the first EMFILE: the member never accepted a Raft
connection again), and the cluster goes on committing through it."""
import os
import resource
import socket

import pytest

from tests.e2e.procs import ProcessCluster
from tests.helpers import http, poll

pytestmark = pytest.mark.slow


def _log_of(c: ProcessCluster, i: int) -> str:
    rest = c.lines[i].split(":")[1]
    folder = os.path.join(c.base, "log")
    name = next(n for n in os.listdir(folder) if n.endswith(f"_{rest}.log"))
    with open(os.path.join(folder, name), errors="replace") as f:
        return f.read()


def _connect(port: int, timeout: float = 2.0):
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return None


def _accepted_and_served(port: int) -> bool:
    """A new connection to the Raft port is accepted and then closed by the peer (it
    never says which member it is): a listener that is gone refuses the connect."""
    s = _connect(port)
    if s is None:
        return False
    try:
        s.settimeout(15)
        return s.recv(1) == b""  # closed by the peer after its connection timeout
    except OSError:
        return True  # reset by the peer: accepted and closed
    finally:
        s.close()


def _closes(sock) -> bool:
    if sock is not None:
        sock.close()
    return sock is not None


def _starved(url: str) -> bool:
    try:
        return http("GET", url + "/healthz", timeout=3)[0] != 200
    except OSError:  # closed, reset or no answer: the peer had no descriptor for it
        return True


def test_a_peer_out_of_descriptors_keeps_its_listeners(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {"jobmanager.executor.preload": "none"})
    flood: list = []
    try:
        c.start()
        i = 1
        pid = c.peer_pid(i)
        host, rest, raft = c.lines[i].split(":")
        rest, raft = int(rest), int(raft)
        url = c.urls[i]
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        used = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + 3, hard))
        try:
            # connections queue in the listeners' backlogs; accepting them runs the peer
            # out of descriptors (EMFILE) on both ports
            for _ in range(30):
                for port in (raft, rest):
                    s = _connect(port, 1.0)
                    if s is not None:
                        flood.append(s)
            # (REST: the peer runs on uvloop, whose libuv meets EMFILE by closing the
            # connections it cannot take, with a descriptor kept in reserve; asyncio's own
            # loop pauses its listener for a second: neither closes it)
            poll(lambda: _starved(url), 30, what="the peer out of descriptors")
            # and the Raft accept() has met EMFILE: it says so (pysyncobj's listener
            # closed instead: connections are refused)
            poll(lambda: "Raft listener: accept() failed" in _log_of(c, i)
                 or not _closes(_connect(raft, 1.0)), 30, what="the Raft accept to fail")
        finally:
            for s in flood:
                s.close()
            flood.clear()
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        # descriptors are free again: both ports accept connections
        poll(lambda: http("GET", url + "/healthz", timeout=5)[0] == 200, 60,
             what="REST answering again")
        assert _accepted_and_served(raft), "the Raft listener is gone"
        assert "Raft listener: accept() failed ([Errno 24]" in _log_of(c, i)
        # and the cluster commits through this peer (a write waits for Raft)
        fixture = os.path.join(os.path.dirname(os.path.dirname(__file__)), "integration")
        spec = {"entry": "jobs_fixture:quick", "pyfiles": [fixture + "/"]}
        status, body = poll(lambda: (lambda r: r if r[0] == 202 else None)(
            http("POST", url + "/jobs", spec, timeout=10)), 60, what="a write through it")
        assert body["jobid"]
        health = http("GET", url + "/healthz")[1]
        assert health.get("ok"), health
        assert os.path.exists(f"/proc/{pid}")  # the same process all along
    finally:
        for s in flood:
            s.close()
        c.stop()
