"""A cgroup of its own for one engine (a Spark Connect JVM and the Python UDF workers it
starts) or one job process (and what it starts: a classic job's driver JVM): its
tenant's memory limit and CPU weight, on a cgroup v2 mount or on cgroup v1's `memory` and
`cpu` hierarchies. `files` (pure) says what is written; `EngineCgroup` does it, moves the
process in, tells whether the kernel killed something in it for going over its limit,
and removes it. Engines' cgroups are under `jm-engines/`, job processes' under
`jm-jobs/` (where the zygote's per-job cgroups of cgroup v2 are not to be had)."""
from __future__ import annotations

import errno
import os
from typing import Optional

MOUNT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "cpu")
ENGINES, JOBS = "jm-engines", "jm-jobs"  # the groups' parent directories
SWAP_FILES = ("memory.swap.max", "memory.memsw.limit_in_bytes")


def files(version: str, memory: int, cpu: int) -> dict[str, dict[str, str]]:
    """What each hierarchy's directory of the engine gets written (pure): {controller
    dir ("" on v2): {file: value}}. `cpu` is a weight (100: the default share)."""
    if version == "v2":
        out = {}
        if memory:
            out["memory.max"] = str(memory)
            out["memory.swap.max"] = "0"  # over the limit means the OOM killer, not swap
        if cpu:
            out["cpu.weight"] = str(cpu)
        return {"": out} if out else {}
    out2: dict[str, dict[str, str]] = {}
    if memory:  # (memsw after the limit: it may not be below it; no swap beyond it)
        out2["memory"] = {"memory.limit_in_bytes": str(memory),
                          "memory.memsw.limit_in_bytes": str(memory)}
    if cpu:  # v1 shares: 1024 is the default, as weight 100 is on v2
        out2["cpu"] = {"cpu.shares": str(max(2, cpu * 1024 // 100))}
    return out2


def layout(mount: str = MOUNT) -> Optional[str]:
    """"v2", "v1" (memory and cpu hierarchies mounted) or None."""
    if os.path.exists(os.path.join(mount, "cgroup.controllers")):
        return "v2"
    if all(os.path.isdir(os.path.join(mount, c)) for c in V1_CONTROLLERS):
        return "v1"
    return None


def heap(memory: int, driver_memory: int) -> int:
    """The JVM heap of an engine whose cgroup allows `memory` bytes (pure): the configured
    one, but at most 3/4 of the limit (the rest: the JVM's own, and the UDF workers)."""
    return min(driver_memory, memory * 3 // 4) if memory else driver_memory


class EngineCgroup:
    def __init__(self, name: str, memory: int, cpu: int, mount: str = MOUNT,
                 group: str = ENGINES) -> None:
        self.name = name      # unique on the host: the peer's pid and the engine's name
        self.group = group
        self.memory, self.cpu = memory, cpu
        self.mount = mount
        self.version = layout(mount)
        self.dirs: list[str] = []
        self.error: Optional[str] = None  # why it could not be made (the JVM runs without)

    def create(self) -> bool:
        """Make its directories and write its limits (False: `error` says why)."""
        if self.version is None:
            self.error = f"no cgroup v2 mount and no v1 memory and cpu hierarchies at {self.mount}"
            return False
        try:
            for sub, values in files(self.version, self.memory, self.cpu).items():
                path = self._dir(sub)
                if self.version == "v2":
                    parent = os.path.dirname(path)
                    os.makedirs(parent, exist_ok=True)
                    _write(os.path.join(parent, "cgroup.subtree_control"), " ".join(
                        "+" + c for c in ("memory", "cpu") if any(
                            k.startswith(c + ".") for k in values)))
                os.makedirs(path, exist_ok=True)
                self.dirs.append(path)
                for name, value in values.items():
                    try:
                        _write(os.path.join(path, name), value)
                    except FileNotFoundError:
                        if name not in SWAP_FILES:  # no swap accounting: nothing to cap
                            raise
        except OSError as exc:
            self.error = f"cannot make its cgroup {self._dir('')}: {exc.strerror or exc}"
            self.remove()
            return False
        return True

    def _dir(self, sub: str) -> str:
        return os.path.join(self.mount, sub, self.group, self.name)

    def add(self, pid: int) -> None:
        for path in self.dirs:
            _write(os.path.join(path, "cgroup.procs"), str(pid))

    def oom_kills(self) -> int:
        """How often the kernel killed a process of it for going over its memory limit."""
        for path in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    with open(os.path.join(path, name)) as f:
                        for line in f:
                            key, _, value = line.partition(" ")
                            if key == "oom_kill":
                                return int(value)
                except (OSError, ValueError):
                    continue
        return 0

    def remove(self) -> None:
        for path in self.dirs:
            try:
                os.rmdir(path)
            except OSError:
                pass
        self.dirs = []


def tenant_cgroup_name(zygote_pid: int, job_pid: int) -> str:
    """The name of a job process's cgroup of its tenant's limits (unique on the host)."""
    return f"{zygote_pid}-job-{job_pid}"


def remove_job_cgroup(name: str, mount: str = MOUNT) -> bool:
    """Remove the job cgroup `name` (under JOBS, v2 or v1) once its processes are gone;
    False while one is still busy."""
    busy = False
    for sub in ("", *V1_CONTROLLERS):
        try:
            os.rmdir(os.path.join(mount, sub, JOBS, name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            busy = busy or exc.errno == errno.EBUSY  # tasks left (being killed)
    return not busy


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
