"""Ports for servers that bind them a moment later: a local peer's REST and Raft, the
Spark Connect server a JVM binds seconds after, a peer's Connect endpoint, a test's
object store. They come from outside the kernel's ephemeral range: a port that bind(0)
handed out is handed out again to the next bind(0) or outgoing connection of any process
(another peer's Raft client, a Spark driver's block manager), which then holds it while
the server it was meant for cannot bind (seen: a peer's Spark never became ready, a
peer's REST port taken by another's endpoint)."""
from __future__ import annotations

import random
import socket
from typing import Optional

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST_PORT = 10000  # below: the usual fixed ports (REST 8081, Raft 6123, Spark's 7077...)
HIGHEST_PORT = 65535


def parse_range(text: str) -> tuple[int, int]:
    """The kernel's ephemeral range as it writes it ("lo\thi")."""
    low, high = (int(x) for x in text.split()[:2])
    return low, high


def ephemeral_range() -> tuple[int, int]:
    """The ports the OS hands out for a bind to port 0 (Linux's ip_local_port_range)."""
    try:
        with open(EPHEMERAL_RANGE) as f:
            return parse_range(f.read())
    except (OSError, ValueError):
        return 32768, 60999  # (Linux's default)


def spans(low: int, high: int, room: int) -> list[tuple[int, int]]:
    """The runs of ports [lo, hi) outside the ephemeral range [low, high] with more than
    `room` ports (pure)."""
    return [(lo, hi) for lo, hi in ((LOWEST_PORT, low), (high + 1, HIGHEST_PORT + 1))
            if hi - lo > room]


def _draw(runs: list[tuple[int, int]], rnd: random.Random, width: int = 1) -> int:
    """A first port of `width` consecutive ones, uniform over the runs' ports."""
    sizes = [hi - lo - width + 1 for lo, hi in runs]
    k = rnd.randrange(sum(sizes))
    for (lo, _), size in zip(runs, sizes):
        if k < size:
            return lo + k
        k -= size
    raise AssertionError("unreachable")


def free_ports(n: int, host: str = "127.0.0.1",
               rnd: Optional[random.Random] = None) -> list[int]:
    """n distinct ports free now (all held until all are chosen), outside the ephemeral
    range; where there is no room outside it, the kernel's choice."""
    rnd = rnd or random.SystemRandom()
    runs = spans(*ephemeral_range(), room=20 * n)
    socks: list[socket.socket] = []
    try:
        for _ in range(64 * n if runs else 0):
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind((host, _draw(runs, rnd)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < n:
            s = socket.socket()
            socks.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1", rnd: Optional[random.Random] = None) -> int:
    """One port free now, outside the ephemeral range (free_ports)."""
    return free_ports(1, host, rnd)[0]


def free_block(n: int, rnd: Optional[random.Random] = None) -> str:
    """A range of n consecutive free ports ("first-last") outside the ephemeral range:
    each local peer's Spark Connect endpoint takes the first free one of it."""
    rnd = rnd or random.SystemRandom()
    low, high = ephemeral_range()
    runs = spans(low, high, room=20 * n)
    if not runs:
        raise RuntimeError(f"no room outside the ephemeral ports {low}-{high}")
    for _ in range(200):
        base = _draw(runs, rnd, width=n)
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return f"{base}-{base + n - 1}"
    raise RuntimeError(f"no {n} consecutive free ports outside {low}-{high}")
