"""Files and waiting for a local cluster on one machine: used by the tests, the
benchmarks (bench/), the chaos harness (chaos/) and the quick start."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

import yaml

from jm.runtime.ports import free_block, free_ports


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
