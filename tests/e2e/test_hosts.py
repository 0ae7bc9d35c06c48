"""Peers on separate hosts, started over ssh as a user's would be: one network namespace per
host (chaos.hosts), each with its own address and Debian's sshd; conf/masters lists the
three addresses; bin/start-cluster.sh reaches them with `env.ssh.opts` and passes JM_HOME,
JM_CONF_DIR (both with a space in their paths) and a -D whose value has a space. An
artifact uploaded to host 0 runs on another host; a host's peer killed over ssh loses only
its jobs, which move; bin/stop-cluster.sh stops the rest over ssh and nothing is left."""
import os
import signal
import subprocess

import psutil
import pytest

from chaos.hosts import Hosts, available
from chaos.peers import PeerProcesses, send
from jm.local.localcluster import write_conf
from tests.e2e.procs import submit
from tests.helpers import consistent_session, end_session, http, multipart, poll

REASON = available()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

N = 3
REST, RAFT = 8081, 6123  # the same ports on every host: each has its own address
TOKEN = "hosts-test-token"

JOB_MODULE = b'''"""Test job shipped as an artifact: no Spark."""
import os


def where(ctx):
    return {"node": ctx.node, "netns": os.readlink("/proc/self/ns/net"), "args": ctx.args}


def hold(ctx):
    while not ctx.stop_requested.wait(0.05):
        pass
    return "stopped"
'''


@pytest.fixture
def hosts(tmp_path):
    h = Hosts(N, base=str(tmp_path / "ssh"))
    h.start()
    try:
        yield h
    finally:
        h.stop()


class SshCluster(PeerProcesses):
    """The peers of conf/masters on the test hosts, driven by bin/ scripts: the shared
    process harness (chaos/peers.py), with JM_HOME and its run folder."""

    script_timeout = 180.0

    def __init__(self, hosts: Hosts, base: str) -> None:
        self.hosts = hosts
        self.home = os.path.join(base, "jm home")  # relative config paths resolve here
        lines = [f"{a}:{REST}:{RAFT}" for a in hosts.addresses]
        # a conf dir outside JM_HOME: its parent is not where the relative paths go
        conf_dir = write_conf(os.path.join(base, "etc jm"), lines, {
            "jobmanager.data-dir": "data", "env.log.dir": "log", "env.pid.dir": "run",
            "high-availability.storageDir": "ha",  # shared: every host sees this disk
            "spark.connect.embedded": False, "jobmanager.executor.preload": "none",
            "restart-strategy.type": "none", "env.ssh.opts": hosts.ssh_opts,
            # peers on shared addresses: safe by default wants both (README: Security)
            "rest.auth.token": TOKEN, "cluster.secret": "hosts-test-secret"})
        os.makedirs(self.home)
        super().__init__(base, lines, conf_dir, env={"JM_HOME": self.home},
                         run_dir=os.path.join(self.home, "run"))
        self.seen: set[int] = set()  # every peer and job process seen, killed at the end
        consistent_session(self.urls, token=TOKEN)

    def call(self, method, url, body=None, timeout=10.0):
        return http(method, url, body, timeout=timeout)

    def wait(self, fn, timeout, what, interval=0.05):
        return poll(fn, timeout, interval, what)

    def pid(self, i: int) -> int:
        return self.peer_pid(i)

    def tree(self, i: int) -> list[int]:
        """Peer i's pid and its descendants (zygote, job processes), remembered."""
        try:
            p = psutil.Process(self.pid(i))
            pids = [p.pid] + [c.pid for c in p.children(recursive=True)]
        except (OSError, ValueError, psutil.NoSuchProcess):
            return []
        self.seen.update(pids)
        return pids

    def print_logs(self) -> None:
        """The tail of each peer's log and each sshd's (pytest shows it when a test fails)."""
        for i, a in enumerate(self.hosts.addresses):
            path = os.path.join(self.home, "log", f"jm-root-{a}_{REST}.log")
            try:
                with open(path, errors="replace") as f:
                    tail = f.read()[-6000:]
            except OSError as exc:
                tail = f"({exc})"
            print(f"----- peer {self.lines[i]}: {path}\n{tail}")
            print(f"----- sshd on {a}\n{self.hosts.sshd_log(i)}")

    def kill_all(self) -> None:
        for i in range(N):
            self.tree(i)
        send(self.seen, signal.SIGKILL)


@pytest.fixture
def cluster(hosts, tmp_path):
    c = SshCluster(hosts, str(tmp_path))
    try:
        yield c
    finally:
        end_session(c.urls)
        c.kill_all()  # by pid, also when the test failed before stop-cluster.sh
        c.print_logs()


def get(url: str) -> dict:
    s, b = http("GET", url, timeout=5)
    assert s == 200, (url, s, b)
    return b


def finished(url: str, jid: str) -> dict:
    def done():
        j = get(f"{url}/jobs/{jid}")
        assert j["state"] not in ("FAILED", "CANCELED"), (jid, j["state"], j.get("attempts"))
        return j if j["state"] == "FINISHED" else None
    return poll(done, 60, interval=0.1, what=f"job {jid} FINISHED")


def running_peers(c: SshCluster) -> set[int]:
    """Pids of this test's peer processes that are running (any jm.peer whose
    working files are under this test's JM_HOME)."""
    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "jm.peer" in cmd and c.conf_dir in cmd:
            out.add(p.info["pid"])
    return out


def test_peers_on_hosts_started_and_stopped_over_ssh(hosts, cluster):
    c = cluster
    r = c.run("start-cluster.sh", "-D", "rest.write-timeout=5 s")
    assert r.returncode == 0, f"start-cluster.sh: {r.stdout}\n{r.stderr}"
    for i, url in enumerate(c.urls):
        poll(lambda u=url: get(u + "/healthz").get("ok"), 60, interval=0.1,
             what=f"peer on {c.hosts.addresses[i]} healthy")

    # each peer runs inside its own host's namespace, with its files under JM_HOME
    pids = [c.pid(i) for i in range(N)]
    for i, pid in enumerate(pids):
        assert hosts.host_of(pid) == i, f"peer {c.lines[i]} (pid {pid}) runs outside its host"
        cmd = psutil.Process(pid).cmdline()
        assert "rest.write-timeout=5 s" in cmd, f"-D lost its quoting over ssh: {cmd}"
        node_dir = c.nodes[i].replace(":", "_")
        assert os.path.isdir(os.path.join(c.home, "data", node_dir, "raft")), \
            f"data dir of {c.nodes[i]} not under JM_HOME"
        assert os.path.isdir(os.path.join(c.home, "log", node_dir))
    assert len({os.stat(f"/proc/{p}/ns/net").st_ino for p in pids}) == N

    # one leader; /nodes lists the three peers with their hosts
    leader = poll(lambda: get(c.urls[0] + "/overview")["leader"], 30, interval=0.1,
                  what="a leader")
    assert leader in c.nodes
    view = poll(lambda: (lambda ns: ns if len(ns) == N and all(
        n["state"] == "ALIVE" for n in ns) else None)(get(c.urls[1] + "/nodes")["nodes"]),
        30, interval=0.1, what="three ALIVE peers in /nodes")
    assert sorted(n["host"] for n in view) == sorted(hosts.addresses)
    assert sorted(n["id"] for n in view) == sorted(c.nodes)

    # an artifact uploaded to host 0 runs on another host (its job process fetched it)
    raw, ctype = multipart("hostjob.py", JOB_MODULE)
    s, art = http("POST", c.urls[0] + "/artifacts", raw=raw, headers={"Content-Type": ctype})
    assert s == 201, art
    remote = None
    for k in range(12):  # spread placement breaks ties by a hash of the job id
        jid = submit(c.urls[0], {"entry": "hostjob:where", "pyfiles": [art["pyfile"]],
                                 "args": {"k": k}})
        res = finished(c.urls[0], jid)["result"]
        if res["node"] != c.nodes[0]:
            remote = res
            break
    assert remote is not None, "twelve jobs in a row were placed on host 0"
    j = c.nodes.index(remote["node"])
    assert remote["netns"] == f"net:[{hosts.netns_inode(j)}]", \
        "the job process did not run in its peer's host"
    assert os.path.isdir(os.path.join(c.home, "data", c.nodes[j].replace(":", "_"),
                                      "blobs")), "the artifact was not fetched to its host"

    # long jobs, one per peer; then a host's peer is killed over ssh
    held = [submit(c.urls[0], {"entry": "hostjob:hold", "pyfiles": [art["pyfile"]]})
            for _ in range(N)]
    rows = poll(lambda: (lambda rs: rs if all(r["state"] == "RUNNING" for r in rs) else None)(
        [get(f"{c.urls[0]}/jobs/{h}") for h in held]), 60, interval=0.1,
        what="the long jobs RUNNING")
    on = {c.nodes.index(r["node"]) for r in rows}
    assert on - {0}, f"every long job is on host 0: {rows}"
    victim = max(on - {0})  # a peer with jobs, not host 0 (whose REST the test reads)
    victim_jobs = [r["jid"] for r in rows if r["node"] == c.nodes[victim]]
    victim_tree = c.tree(victim)
    assert len(victim_tree) > 1, "the victim's job processes are not its descendants"
    k = hosts.ssh(victim, f"kill -KILL {pids[victim]}")
    assert k.returncode == 0, f"kill over ssh: {k.stderr}"
    poll(lambda: not [p for p in victim_tree if psutil.pid_exists(p) and
                      psutil.Process(p).status() != psutil.STATUS_ZOMBIE], 30, interval=0.1,
         what="the killed peer's job processes gone (they die with their peer)")
    survivors = [u for i, u in enumerate(c.urls) if i != victim]
    poll(lambda: any(n["id"] == c.nodes[victim] and n["state"] == "DEAD"
                     for n in get(survivors[0] + "/nodes")["nodes"]), 30, interval=0.1,
         what=f"{c.nodes[victim]} declared DEAD")

    def moved():
        js = [get(f"{survivors[1]}/jobs/{h}") for h in victim_jobs]
        return all(x["state"] == "RUNNING" and x["node"] != c.nodes[victim]
                   and x["attempt"] == 2 for x in js)
    poll(moved, 30, interval=0.1, what="the dead peer's jobs RUNNING elsewhere")
    for h in held:
        if h not in victim_jobs:  # the other peers' jobs did not move
            assert get(f"{c.urls[0]}/jobs/{h}")["attempt"] == 1
    jid = submit(survivors[1], {"entry": "hostjob:where", "pyfiles": [art["pyfile"]]})
    assert finished(survivors[0], jid)["result"]["node"] != c.nodes[victim]

    # stop-cluster.sh stops every peer over ssh (the dead host's pid file is stale)
    for i in range(N):
        c.tree(i)
    r = c.run("stop-cluster.sh")
    assert r.returncode == 0, f"stop-cluster.sh: {r.stdout}\n{r.stderr}"
    assert "No jobmanager" in r.stdout, r.stdout  # the killed one
    poll(lambda: not hosts.leftovers(), 60, interval=0.1,
         what=f"no process left on the hosts (left: {hosts.leftovers()})")
    poll(lambda: not [p for p in c.seen if psutil.pid_exists(p) and
                      psutil.Process(p).status() != psutil.STATUS_ZOMBIE], 30, interval=0.1,
         what="every peer and job process gone")
    assert not running_peers(c)
    assert not [n for n in os.listdir(os.path.join(c.home, "run")) if n.endswith(".pid")]

    # the hosts go away: sshd stopped, namespaces deleted
    sshd = [p.pid for p in hosts.sshd]
    hosts.stop()
    assert not [p for p in sshd if psutil.pid_exists(p)], "an sshd outlived the hosts"
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in hosts.net.namespaces if ns in names.split()], names
