"""A stopping leader's hand-off (issue 46, raft/leaving.py): real pysyncobj members on
loopback (fsync on), the followers writing a heartbeat every 50 ms as peers do; the
leader leaves elections and hands off, then stops, and starts again from its data, round
after round. Per round: the hand-off's time (until another member leads) and the longest
time any follower went without an acknowledged write (target < 0.5 s; a peer's lease is
2 s). Medians and maxima over --rounds.

    .venv/bin/python bench/handoff.py                      # 20 rounds, 3 members
    .venv/bin/python bench/handoff.py --members 5 --out /tmp/handoff.json
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import median, report  # noqa: E402
from raft.commands import Barrier  # noqa: E402
from raft.node import RaftHost, RaftSettings, RaftUnavailable  # noqa: E402


def _ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Heartbeat:
    """A member's write every 50 ms; `gap`: the longest time between two acknowledged
    ones since `reset`."""

    def __init__(self, host: RaftHost) -> None:
        self.host, self.gap, self.last = host, 0.0, time.monotonic()
        self.task = asyncio.ensure_future(self._run())

    def reset(self) -> None:
        self.gap, self.last = 0.0, time.monotonic()

    async def _run(self) -> None:
        while True:
            try:
                ok = (await self.host.submit(Barrier(), 10.0)).ok
            except RaftUnavailable:
                ok = False
            if ok:
                now = time.monotonic()
                self.gap, self.last = max(self.gap, now - self.last), now
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def _leader(hosts: list, timeout: float = 30.0) -> RaftHost:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = {h.leader() for h in hosts}
        if len(leaders) == 1 and None not in leaders:
            found = [h for h in hosts if h.is_leader()]
            if found:
                return found[0]
        await asyncio.sleep(0.02)
    raise RuntimeError("no leader")


async def run(members: int, rounds: int) -> dict:
    base = tempfile.mkdtemp(prefix="jm-bench-handoff-")
    loop = asyncio.get_running_loop()
    addrs = [f"127.0.0.1:{p}" for p in _ports(members)]
    names = {a: f"p{i}" for i, a in enumerate(addrs)}

    def host(a: str) -> RaftHost:
        return RaftHost(a, [b for b in addrs if b != a], os.path.join(base, names[a]),
                        RaftSettings(fsync=True), loop, names)
    hosts = [host(a) for a in addrs]
    handoffs, gaps = [], []
    try:
        for n in range(rounds):
            leader = await _leader(hosts)
            beats = [Heartbeat(h) for h in hosts if h is not leader]
            await asyncio.sleep(1.0)  # (steady writes)
            for b in beats:
                b.reset()
            leader.membership.leave_elections()
            started = time.monotonic()
            new = await leader.membership.hand_off(10.0)
            handoffs.append(time.monotonic() - started if new else float("inf"))
            await asyncio.sleep(1.0)  # (the writes after it)
            gaps.append(max(b.gap for b in beats))
            for b in beats:
                await b.stop()
            await asyncio.to_thread(leader.destroy)
            hosts = [h for h in hosts if h is not leader]
            if n + 1 < rounds:  # started again from its data for the next round
                hosts.append(host(leader.self_addr))
    finally:
        for h in hosts:
            await asyncio.to_thread(h.destroy)
    return {"members": members, "rounds": rounds,
            "handoff_s": {"median": median(handoffs), "max": max(handoffs)},
            "longest_gap_s": {"median": median(gaps), "max": max(gaps)},
            "gaps_s": [round(g, 3) for g in gaps]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--out")
    a = p.parse_args()
    out = asyncio.run(run(a.members, a.rounds))
    report(out, a.out)


if __name__ == "__main__":
    main()
