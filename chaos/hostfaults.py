"""Faults of `python -m chaos run --hosts` beyond kill, pause and partition: a membership
change (a live peer removed and a fresh one added back at its address), a full disk (the
peer's data dir is a small tmpfs; it is filled, and Raft entries are pushed until its
journal needs the room), each returning the fault record the checks read."""
from __future__ import annotations

import os
import subprocess
import time
from typing import Callable

from chaos.harness import ROOT, ChaosCluster, _wait, call

TMPFS_SIZE = "64m"
PAD = "x" * 200_000  # one job spec of ~200 kB: 25 of them outgrow the journal's 4 MB ahead


def mount_tmpfs(c: ChaosCluster) -> None:
    """Each peer's data dir on a tmpfs of its own (before the peers start); unmounted
    after they stopped."""
    mounted: list[str] = []

    def unmount() -> None:
        for d in mounted:
            subprocess.run(["umount", "-l", d], capture_output=True, timeout=30)
    c.after_stop.append(unmount)  # first: a mount that fails still unmounts the others
    for i in range(c.sc.peers):
        d = c.data_dir(i)
        os.makedirs(d, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", d],
                       check=True, capture_output=True, timeout=30)
        mounted.append(d)


def membership(c: ChaosCluster, i: int, log: Callable[[str], None]) -> tuple[float, float]:
    """Remove live peer i (drained, its jobs restart elsewhere after a 2 s deadline; it
    stops by itself), then add it back and start it: it joins with no Raft data."""
    node, line = c.nodes[i], c.lines[i]
    pid = c.pids[i]
    start = time.time()
    status, body = call("DELETE", c.alive_url(exclude=i) + f"/cluster/peers/{node}?deadline=2")
    if status != 202:
        raise RuntimeError(f"remove {node}: {status} {body}")
    _wait(lambda: not os.path.exists(f"/proc/{pid}") or
          open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[-1][:1] == "Z", 90,
          f"removed {node} to stop")
    del c.pids[i]
    _wait(lambda: node not in [m["id"] for m in call(
        "GET", c.alive_url() + "/cluster/peers")[1]["members"]], 60, f"{node} out of Raft")
    end = time.time()
    log(f"removed {node}; adding it back")
    status, body = call("POST", c.alive_url() + "/cluster/peers", {"peer": line}, timeout=10)
    if status != 201:
        raise RuntimeError(f"add {line}: {status} {body}")
    c.start_peer(i)
    _wait(lambda: call("GET", c.urls[i] + "/healthz")[1].get("ok"), 60, f"{node} back")
    log(f"{node} is a member again")
    return start, end


def disk_full(c: ChaosCluster, i: int, hold: float, log: Callable[[str], None]
              ) -> tuple[float, float]:
    """Fill peer i's disk, push Raft entries until its journal needs room, keep it full
    for `hold` seconds, then free it; the peer says so in /healthz meanwhile."""
    filler = os.path.join(c.data_dir(i), "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(bytes(1 << 20))
                f.flush()
        except OSError:
            pass  # full
    url = c.alive_url(exclude=i)
    pushed = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if call("GET", c.urls[i] + "/healthz", timeout=1)[1].get("disk-problem"):
                break
        except OSError:
            pass
        status, _ = call("POST", url + "/jobs", {
            "name": f"disk-{pushed}", "entry": "probe:once",
            "pyfiles": [os.path.join(ROOT, "chaos") + "/"], "args": {"pad": PAD}}, timeout=10)
        pushed += status == 202
    start = time.time()  # its Raft waits for the disk from here
    log(f"disk of {c.nodes[i]} full ({pushed} big entries pushed)")
    time.sleep(hold)  # fault schedule: the disk stays full this long
    os.unlink(filler)
    end = time.time()
    _wait(lambda: call("GET", c.urls[i] + "/healthz")[1].get("ok"), 90,
          f"{c.nodes[i]} to recover from the full disk")
    log(f"disk of {c.nodes[i]} has room again; it recovered")
    return start, end
