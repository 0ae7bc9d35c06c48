"""Faults of `python -m chaos run --hosts` beyond kill, pause and partition: a membership
change (a live peer removed and a fresh one added back at its address), a full disk (the
peer's data dir is a small tmpfs; it is filled, and Raft entries are pushed until its
journal needs the room), a power cut of every host (the data dirs are lazyfs mounts
that drop what was not fsynced), and a clock fault of one host (chaos/clock.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from chaos.harness import ROOT, ChaosCluster, poll_for, call
from chaos.peers import request, send
from chaos.peers import running as _running

TMPFS_SIZE = "64m"
PAD = "x" * 200_000  # one job spec of ~200 kB: 25 of them outgrow the journal's 4 MB ahead
# at most this many (8 MB): every member's journal takes them, and the hosts' disks are
# small (a CI run pushed until its deadline: another member's disk filled and it stopped)
MAX_PUSHED = 40


def prepare_disks(c: ChaosCluster, tmpfs: bool, lazy: bool) -> None:
    """Before the peers start (and before the hosts' sshds copy the mount table): each
    peer's data dir on a small tmpfs of its own (disk-full), and/or a lazyfs that keeps
    unsynced writes in memory until a power cut drops them (power-loss), over a backing
    dir (the tmpfs, if both). Unmounted after the peers stopped, the last mounted first."""
    c.lazy = []
    for i in range(c.sc.peers):
        data = c.data_dir(i)
        disk = os.path.join(c.base, "disks", os.path.basename(data)) if lazy else data
        os.makedirs(disk, exist_ok=True)
        if tmpfs:
            c.after_stop.append(lambda d=disk: subprocess.run(
                ["umount", "-l", d], capture_output=True, timeout=30))
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", disk],
                           check=True, capture_output=True, timeout=30)
        if lazy:
            from chaos.lazyfs import LazyMount
            fs = LazyMount(data, disk, os.path.join(c.base, f"lazyfs-{i}.log"))
            c.after_stop.append(fs.stop)
            fs.start()
            c.lazy.append(fs)


def power_loss(c: ChaosCluster, log: Callable[[str], None]) -> tuple[float, float]:
    """Power cut to every host at once: every process on them dies (SIGKILL) and every
    write not yet fsynced is lost; then power comes back and every peer starts again."""
    victims = c.hostbed.leftovers()  # peers, zygotes, job processes: all but the sshds
    start = time.time()
    send(victims, signal.SIGKILL)
    dropped = sum(fs.cut()["dropped-bytes"] for fs in c.lazy)
    poll_for(lambda: not [p for p in victims if _running(p)], 30, "every process on the hosts gone")
    c.pids.clear()
    for fs in c.lazy:
        fs.power_on()
    log(f"power cut: {len(victims)} processes killed, {dropped} unsynced bytes dropped")
    time.sleep(1.5)  # fault schedule: the reboot (FUSE's attribute caches expire meanwhile)
    end = time.time()
    c.start_cluster()
    for i in range(len(c.urls)):
        c.wait_healthy(i, 90)
    log("power back: every peer up again")
    return start, end


def clock(c: ChaosCluster, i: int, rnd, hold: float, log: Callable[[str], None]
          ) -> tuple[float, float, str]:
    """Peer i's clock stepped by +-30 s (wall clock only, as NTP does) or running fast or
    slow (both clocks, as a bad oscillator; within the rates at which leases stay safe,
    chaos.clock.safe_rate_range) for `hold` seconds, then right again."""
    from chaos.clock import safe_rate_range
    fault = c.clocks[i]
    lease = float(c.settings_value("jobmanager.lease-timeout"))
    timeout = float(c.settings_value("heartbeat.timeout"))
    low, high = safe_rate_range(lease, timeout)
    what = rnd.choice(["+30 s", "-30 s", "slow", "fast"])
    start = time.time()
    if what.endswith(" s"):
        step = float(what.split()[0])
        fault.jump(step)
        # the peer's own wall clock (its HTTP Date header) shows the step: the fault
        # reached the processes on that host (through ssh's SetEnv), it is no no-op
        poll_for(lambda: abs(_peer_clock(c.urls[i]) - time.time() - step) < 3, 15,
                 f"the clock step on {c.nodes[i]}")
    else:  # well inside the safe range: x0.8 / x1.25 with the defaults
        rate = max(0.8, low + 0.05) if what == "slow" else min(1.25, high - 0.05)
        fault.set_rate(rate, lease, timeout)
        what = f"x{rate:g}"
    log(f"clock of {c.nodes[i]}: {what}")
    time.sleep(hold)  # fault schedule
    fault.jump(0.0)
    fault.set_rate(1.0, lease, timeout)
    end = time.time()
    log(f"clock of {c.nodes[i]} right again")
    return start, end, what


def _peer_clock(url: str) -> float:
    import email.utils
    _, _, headers = request("GET", url + "/healthz", timeout=3)
    return email.utils.parsedate_to_datetime(headers["Date"]).timestamp()


def membership(c: ChaosCluster, i: int, log: Callable[[str], None]) -> tuple[float, float]:
    """Remove live peer i (drained, its jobs restart elsewhere after a 2 s deadline; it
    stops by itself), then add it back and start it: it joins with no Raft data, as a
    non-voter. The fault lasts until the voting core has as many voters as before (the
    leader promotes a peer once it has caught up): until then the cluster has less than
    its tolerance, and a second fault would be a double one."""
    node, line = c.nodes[i], c.lines[i]
    pid = c.pids[i]
    core = len(c.voters())
    start = time.time()
    status, body = call("DELETE", c.alive_url(exclude=i) + f"/cluster/peers/{node}?deadline=2")
    if status != 202:
        raise RuntimeError(f"remove {node}: {status} {body}")
    poll_for(lambda: not _running(pid), 90, f"removed {node} to stop")
    del c.pids[i]
    poll_for(lambda: node not in [m["id"] for m in call(
        "GET", c.alive_url() + "/cluster/peers")[1]["members"]], 60, f"{node} out of Raft")
    end = time.time()
    log(f"removed {node}; adding it back")
    status, body = call("POST", c.alive_url() + "/cluster/peers", {"peer": line}, timeout=10)
    if status != 201:
        raise RuntimeError(f"add {line}: {status} {body}")
    c.start_peer(i)
    c.wait_healthy(i, 60)
    log(f"{node} is a member again")
    poll_for(lambda: len(c.voters()) >= core, 60, f"a voting core of {core} again")
    log(f"the voting core has {core} voters again")
    return start, end


def disk_full(c: ChaosCluster, i: int, hold: float, log: Callable[[str], None]
              ) -> tuple[float, float]:
    """Fill peer i's disk, push Raft entries until its journal needs room, keep it full
    for `hold` seconds, then free it; the peer says so in /healthz meanwhile."""
    filler = os.path.join(c.data_dir(i), "filler")
    pid = c.pids[i]
    with open(filler, "wb") as f:
        try:
            while True:  # synced as it goes: under a lazyfs, room is taken at the fsync
                f.write(bytes(1 << 20))
                f.flush()
                os.fsync(f.fileno())
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
        if pushed >= MAX_PUSHED:  # enough: the other peers' disks must not fill too
            time.sleep(0.2)  # a poll's pause (the loop asks its /healthz again)
            continue
        try:
            status, _ = call("POST", url + "/jobs", {
                "name": f"disk-{pushed}", "entry": "probe:once",
                "pyfiles": [os.path.join(ROOT, "chaos") + "/"], "args": {"pad": PAD}},
                timeout=10)
        except OSError:  # (a peer the faults left without an answer: asked again)
            continue
        pushed += status == 202
    start = time.time()  # its Raft waits for the disk from here
    log(f"disk of {c.nodes[i]} full ({pushed} big entries pushed)")
    time.sleep(hold)  # fault schedule: the disk stays full this long
    os.unlink(filler)
    end = time.time()
    if not _running(pid):
        # under the lazyfs a full disk may show first at the journal's fdatasync, not at
        # its write: the member then fail-stops (raft/syncer.py), as it must when a sync
        # fails, and recovers from its disk when it is started again
        log(f"{c.nodes[i]} fail-stopped on the full disk; starting it again")
        c.start_peer(i)
    poll_for(lambda: call("GET", c.urls[i] + "/healthz")[1].get("ok"), 90,
             f"{c.nodes[i]} to recover from the full disk")
    log(f"disk of {c.nodes[i]} has room again; it recovered")
    return start, end
