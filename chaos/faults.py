"""The faults of a chaos scenario, one at a time (python -m chaos run: chaos/__main__.py):
a kill, graceful stop, pause, partition or host fault of one peer, a partition of a
minority, a power cut of every host; each returns its fault records for the checks
(chaos/checks.py)."""
from __future__ import annotations

import random
import signal
import time
from typing import Callable, Optional

from chaos import hostfaults
from chaos.harness import ChaosCluster
from chaos.peers import send, wait_gone

# stop-leader: SIGTERM to the Raft leader (bin/jobmanager.sh stop), started again once it
# is gone: it hands leadership over and drains, so no other peer may fence its jobs
FAULTS = ("kill", "kill-leader", "kill-owner", "stop-leader", "pause", "partition")
STOP_WAIT = 120.0  # s: a graceful stop's bound here (drain deadline + Peer.stop + margin)
# partition-minority: a minority of the voters with a third of the non-voting members, each
# cut off (on request: --faults; with 3 peers and 3 voters it is a plain partition)
GROUP_FAULTS = ("partition-minority",)
HOST_FAULTS = ("membership", "disk-full", "power-loss", "clock")  # --hosts only


def inject(c: ChaosCluster, kind: str, rnd: random.Random, hold: float, log,
           owner: Optional[Callable[[], Optional[int]]] = None) -> list[dict]:
    """One fault against one peer (a power cut: against all); returns the fault records
    (start/end filled in). kill-owner kills the peer running the (first) streaming job."""
    if kind == "power-loss":
        jobs = {i: c.jobs_of(i) for i in sorted(c.pids)}
        log(f"power-loss of every host ({sum(map(len, jobs.values()))} jobs)")
        start, end = hostfaults.power_loss(c, log)
        return [{"kind": kind, "node": c.nodes[i], "start": start, "end": end, "jobs": j}
                for i, j in jobs.items()]
    if kind == "clock":
        # not a failure: nothing may move, so the record explains no change of attempt
        # on that peer (node "clock <id>") and asks no job to run elsewhere (no jobs)
        i = rnd.choice(sorted(c.pids))
        start, end, what = hostfaults.clock(c, i, rnd, hold, log)
        return [{"kind": f"clock {what}", "node": f"clock {c.nodes[i]}", "start": start,
                 "end": end, "jobs": []}]
    if kind == "partition-minority":
        return partition_minority(c, rnd, hold, log)
    i = None
    if kind in HOST_FAULTS:  # a follower: the leader's own cases are in the e2e tests
        leader = c.leader_index()
        i = rnd.choice([k for k in sorted(c.pids) if k != leader] or sorted(c.pids))
    if kind in ("kill-leader", "stop-leader"):
        i = c.leader_index()
    elif kind == "kill-owner" and owner is not None:
        i = owner()
    if i is None or i not in c.pids:
        i = rnd.choice(sorted(c.pids))
    node = c.nodes[i]
    jobs = c.jobs_of(i)
    pid = c.pids[i]
    start = time.time()
    log(f"{kind} {node} (pid {pid}, {len(jobs)} jobs)")
    if kind.startswith("kill"):
        c.kill(i)  # SIGKILL by pid; no longer among the live peers
        time.sleep(hold)  # the peer stays down for `hold` seconds (fault schedule)
        end = time.time()
        c.start_peer(i)
        log(f"restarted {node}")
    elif kind == "stop-leader":
        graceful_stop(c, i, log)
        end = time.time()
        c.start_peer(i)  # at once, as an operator restarting it
        log(f"started {node} again")
    elif kind == "pause":
        c.freeze(i)  # SIGSTOP
        time.sleep(hold)  # fault schedule
        c.thaw(i)  # SIGCONT
        end = time.time()
        log(f"resumed {node}")
    elif kind == "membership":
        start, end = hostfaults.membership(c, i, log)
    elif kind == "disk-full":
        start, end = hostfaults.disk_full(c, i, hold, log)
    else:
        c.net.partition(i)
        time.sleep(hold)  # fault schedule
        c.net.heal(i)
        end = time.time()
        log(f"healed {node}")
    return [{"kind": "kill" if kind.startswith("kill") else kind, "node": node, "start": start,
            "end": end, "jobs": jobs}]


def graceful_stop(c: ChaosCluster, i: int, log) -> None:
    """SIGTERM to peer i (what bin/jobmanager.sh stop sends) and its end awaited: it
    hands leadership over, drains (jobmanager.stop.drain-deadline) and stops."""
    t = time.time()
    pid = c.kill(i, signal.SIGTERM)
    left = wait_gone([pid], STOP_WAIT)
    if left:
        send(left, signal.SIGKILL)
        raise RuntimeError(f"{c.nodes[i]} (pid {pid}) still ran {STOP_WAIT:g} s after SIGTERM")
    log(f"{c.nodes[i]} stopped in {time.time() - t:.1f} s")


def partition_minority(c: ChaosCluster, rnd: random.Random, hold: float, log) -> list[dict]:
    """Cut off a minority of the voters (the leader among them or not) together with a
    third of the non-voting members: every one of them must fence its jobs (no quorum
    reaches them), the others keep theirs; one fault record per peer cut off."""
    voters = [i for i in c.voters() if i in c.pids]
    readers = [i for i in sorted(c.pids) if i not in voters]
    group = rnd.sample(voters, max(1, (len(voters) - 1) // 2)) + \
        rnd.sample(readers, len(readers) // 3)
    jobs = {i: c.jobs_of(i) for i in group}
    start = time.time()
    log(f"partition-minority {', '.join(c.nodes[i] for i in group)} (voters "
        f"{', '.join(c.nodes[i] for i in voters)}; {sum(map(len, jobs.values()))} jobs)")
    for i in group:
        c.net.partition(i)
    time.sleep(hold)  # fault schedule
    for i in group:
        c.net.heal(i)
    end = time.time()
    log("healed " + ", ".join(c.nodes[i] for i in group))
    return [{"kind": "partition", "node": c.nodes[i], "start": start, "end": end,
             "jobs": jobs[i]} for i in group]
