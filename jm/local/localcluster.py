"""Files and waiting for a local cluster on one machine: used by the tests, the
benchmarks (bench/), the chaos harness (chaos/) and the quick start."""
from __future__ import annotations

import os
import random
import socket
import time
from typing import Any, Callable

import yaml


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (all held open until all are chosen)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def ephemeral_range() -> tuple[int, int]:
    """The ports the OS hands out for a bind to port 0 (Linux's ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # (Linux's default)


def free_block(n: int, rng: random.Random = random.SystemRandom()) -> str:
    """A range of n consecutive free ports ("first-last") outside the OS's ephemeral range:
    each local peer's Spark Connect endpoint takes the first free one of it. A bind to
    port 0 (an engine, another peer's endpoint, a client's socket) never lands there, so
    it cannot take a port meant for a peer before the peer binds it."""
    low, high = ephemeral_range()
    spans = [(lo, hi) for lo, hi in ((10000, low), (high + 1, 65536)) if hi - lo > 20 * n]
    if not spans:
        raise RuntimeError(f"no room outside the ephemeral ports {low}-{high}")
    for _ in range(200):
        lo, hi = rng.choice(spans)
        base = rng.randrange(lo, hi - n)
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


def local_lines(n: int, host: str = "127.0.0.1") -> list[str]:
    """conf/masters lines for n peers on free ports."""
    ports = free_ports(2 * n)
    return [f"{host}:{ports[2 * i]}:{ports[2 * i + 1]}" for i in range(n)]


def write_conf(base: str, lines: list[str], settings: dict | None = None) -> str:
    """Write <base>/conf/masters and <base>/conf/config.yaml with every peer directory
    under <base> (data, log, run, ha); `settings` add to or override them. Returns the
    conf dir (use it as JM_CONF_DIR)."""
    conf_dir = os.path.join(base, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    with open(os.path.join(conf_dir, "masters"), "w") as f:
        f.write("\n".join(lines) + "\n")
    values = {"jobmanager.data-dir": os.path.join(base, "data"),
              "env.log.dir": os.path.join(base, "log"),
              "env.pid.dir": os.path.join(base, "run"),
              "high-availability.storageDir": os.path.join(base, "ha"),
              # several peers on one host: each its own Spark Connect endpoint port
              "spark.connect.endpoint.port": free_block(len(lines))}
    values.update(settings or {})
    with open(os.path.join(conf_dir, "config.yaml"), "w") as f:
        yaml.safe_dump(values, f)
    return conf_dir


def wait_until(fn: Callable[[], Any], timeout: float, what: str, interval: float = 0.1,
               errors: tuple = (Exception,)) -> Any:
    """Call fn until it returns a truthy value (errors of the given kinds count as "not
    yet"); raise TimeoutError naming `what` and the last outcome after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except errors as exc:
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r})")
