"""What a job process may use (pure): resource limits, the user it runs as, its cgroup.

Decisions only: which `setrlimit` calls to make, what a job's cgroup gets, whether a
cgroup v2 mount can be used. No I/O, no clock; `jm/runtime/confine.py` does the work in
the forked job process (and the zygote), with what these functions decide.

The keys (`jm/config.py`):

* `jobmanager.executor.limits.nproc` -- processes and threads one job may have. With a
  cgroup it is the job's `pids.max` (exact: only the job's own tasks count). Without one
  it becomes `RLIMIT_NPROC`, which Linux counts per *user* (every process and thread of
  the job's uid, other jobs and the peer included when they share the uid), so the limit
  set is the user's count at the job's start plus this many. Linux does not apply
  `RLIMIT_NPROC` to root: a job running as root is limited only by a cgroup.
* `.address-space` -- `RLIMIT_AS`. Off by default: a JVM reserves many GB of address space
  it never uses (heap, code cache, compressed class space), so a cap that fits a Python
  client kills the driver JVM of a classic job. Use `.memory` (a cgroup) instead.
* `.memory` -- the job's cgroup `memory.max` (all its processes together).
* `.open-files` -- `RLIMIT_NOFILE` (never above the hard limit unless the peer is root and
  may raise it: in a container root often may not; the job then gets the hard limit,
  silently, and the zygote warns once in the peer's log, `above_hard` / `clamp_warning`).
* `.file-size` -- `RLIMIT_FSIZE`: a longer write fails with EFBIG (Python ignores
  SIGXFSZ, and so does a JVM it starts), the job fails with "File too large".
* `.oom-score-adj` -- the job's `/proc/<pid>/oom_score_adj`: when the host runs out of
  memory the kernel's OOM killer takes a job before the peer.
"""
from __future__ import annotations

import resource
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

from jm.config import ConfigError

UNLIMITED = resource.RLIM_INFINITY

PREFIX = "jobmanager.executor.limits."
USER_KEY = "jobmanager.executor.user"


@dataclass(frozen=True)
class JobLimits:
    nproc: int = 0           # 0: no limit
    address_space: int = 0   # bytes; 0: no limit
    memory: int = 0          # bytes (cgroup memory.max); 0: no limit
    open_files: int = 0      # 0: inherit the peer's
    file_size: int = 0       # bytes; 0: no limit
    oom_score_adj: int = 0   # 0: inherit the peer's
    user: Optional[str] = None  # None: the peer's user

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobLimits":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


class LimitError(ConfigError):
    """A limit setting that cannot work; str() names the key."""


def from_conf(conf: Any) -> JobLimits:
    """The limits from a Config (anything with `conf[key]`)."""
    adj = conf[PREFIX + "oom-score-adj"]
    if not -1000 <= adj <= 1000:
        raise LimitError(f"{PREFIX}oom-score-adj: must be between -1000 and 1000, got {adj}")
    return JobLimits(nproc=conf[PREFIX + "nproc"], address_space=conf[PREFIX + "address-space"],
                     memory=conf[PREFIX + "memory"], open_files=conf[PREFIX + "open-files"],
                     file_size=conf[PREFIX + "file-size"], oom_score_adj=adj,
                     user=conf[USER_KEY] or None)


def check_user(user: Optional[str], peer_uid: int, target_uid: Optional[int]) -> Optional[str]:
    """Why jobs cannot run as `user` (a start-up error naming the key), or None.
    `target_uid` is the user's uid, None when the system has no such user."""
    if user is None:
        return None
    if target_uid is None:
        return f"{USER_KEY}: no user {user!r} on this host"
    if target_uid != peer_uid and peer_uid != 0:
        return (f"{USER_KEY}: running jobs as {user!r} needs a peer running as root "
                f"(it runs as uid {peer_uid}); unset the key to run jobs as the peer's user")
    return None


def switch_user(limits: JobLimits, peer_uid: int, target_uid: Optional[int]) -> bool:
    """Whether the job process changes its user (setgid/setuid) before user code."""
    return limits.user is not None and target_uid is not None and target_uid != peer_uid


def nproc_limit(limits: JobLimits, job_uid: int, user_tasks: int, cgroup: bool) -> Optional[int]:
    """RLIMIT_NPROC for a job (None: leave it). Linux counts it over the whole uid and
    ignores it for root, so: none for root, none when a cgroup's pids.max does the job,
    else the uid's tasks at the start plus the job's allowance."""
    if limits.nproc <= 0 or job_uid == 0 or cgroup:
        return None
    return user_tasks + limits.nproc


KEYS = {resource.RLIMIT_AS: "address-space", resource.RLIMIT_FSIZE: "file-size",
        resource.RLIMIT_NOFILE: "open-files", resource.RLIMIT_NPROC: "nproc"}


def _wanted(limits: JobLimits) -> dict[int, int]:
    return {res: value for res, value in ((resource.RLIMIT_AS, limits.address_space),
                                          (resource.RLIMIT_FSIZE, limits.file_size),
                                          (resource.RLIMIT_NOFILE, limits.open_files))
            if value > 0}


def rlimits(limits: JobLimits, current: Mapping[int, tuple[int, int]], privileged: bool,
            nproc: Optional[int] = None) -> list[tuple[int, int, int]]:
    """The setrlimit calls (resource, soft, hard) for a job process, given the current
    (soft, hard) of each resource. A limit lowers soft and hard alike (user code cannot
    raise it back); an unprivileged process never asks for more than its hard limit."""
    wanted = _wanted(limits)
    if nproc:
        wanted[resource.RLIMIT_NPROC] = nproc
    out = []
    for res, value in wanted.items():
        soft, hard = current.get(res, (UNLIMITED, UNLIMITED))
        if not privileged and hard != UNLIMITED:
            value = min(value, hard)
        if (soft, hard) != (value, value):
            out.append((res, value, value))
    return out


def clamped(call: tuple[int, int, int], current: tuple[int, int]
            ) -> Optional[tuple[int, int, int]]:
    """The setrlimit call to make instead of a refused `call` (resource, soft, hard): the
    limit at the hard limit the process has, when `call` asked for more (a root peer
    that may not raise it, in a container). None: `call` asked no more than the hard
    limit, so its refusal is a real error."""
    res, _, value = call
    hard = current[1]
    if hard == UNLIMITED or value <= hard:
        return None
    return (res, hard, hard)


@dataclass(frozen=True)
class OverHard:
    """A configured limit above the hard limit the peer has."""
    resource: int
    wanted: int
    hard: int

    @property
    def key(self) -> str:
        return PREFIX + KEYS.get(self.resource, str(self.resource))


def above_hard(limits: JobLimits, current: Mapping[int, tuple[int, int]]) -> list[OverHard]:
    """The configured limits (not nproc: a job's own count) above the current hard limit."""
    out = []
    for res, value in _wanted(limits).items():
        hard = current.get(res, (UNLIMITED, UNLIMITED))[1]
        if hard != UNLIMITED and value > hard:
            out.append(OverHard(res, value, hard))
    return out


def clamp_warning(over: list[OverHard]) -> str:
    """'' or the one warning for the peer's log: the limits its jobs get instead (the
    limits the peer could not raise to what is configured)."""
    if not over:
        return ""
    parts = [f"{o.key} is {o.wanted}, above the hard limit {o.hard} the peer has and "
             f"cannot raise: jobs get {o.hard}" for o in over]
    return ("; ".join(parts) + " (raise the hard limit the peer starts with, e.g. "
            "`ulimit -H` or a container's --ulimit, or lower the key)")


def oom_score_adj(limits: JobLimits, current: int, privileged: bool) -> Optional[int]:
    """The job's oom_score_adj (None: leave it). Lowering it needs privileges."""
    if limits.oom_score_adj == 0 or limits.oom_score_adj == current:
        return None
    if limits.oom_score_adj < current and not privileged:
        return None
    return limits.oom_score_adj


def cgroup_files(limits: JobLimits) -> dict[str, str]:
    """What a job's cgroup directory gets written, in order."""
    files = {}
    if limits.memory > 0:
        files["memory.max"] = str(limits.memory)
        files["memory.swap.max"] = "0"  # over memory.max means the OOM killer, not swap
    if limits.nproc > 0:
        files["pids.max"] = str(limits.nproc)
    return files


def controllers_needed(limits: JobLimits) -> list[str]:
    return [c for c, on in (("memory", limits.memory > 0), ("pids", limits.nproc > 0)) if on]


def cgroup_unusable(fs_type: str, writable: bool, available: set[str],
                    needed: list[str]) -> Optional[str]:
    """Why per-job cgroups cannot be used here (a log line), or None when they can."""
    if not needed:
        return "no limit needs a cgroup"
    if fs_type != "cgroup2fs":
        return f"/sys/fs/cgroup is not a cgroup v2 mount ({fs_type or 'missing'})"
    if not writable:
        return "the cgroup v2 mount is not writable by the peer's user"
    missing = [c for c in needed if c not in available]
    if missing:
        return f"the cgroup v2 mount lacks the {', '.join(missing)} controller(s)"
    return None


def cgroup_name(zygote_pid: int) -> str:
    """The zygote's cgroup directory (its jobs' cgroups are inside it)."""
    return f"jobmanager-zygote-{zygote_pid}"


def job_cgroup_name(job_pid: int) -> str:
    return f"job-{job_pid}"


STOPPED_STATES = ("T", "t")  # stopped (SIGSTOP/SIGTSTP), stopped by a tracer


def proc_state(stat_text: str) -> str:
    """The state letter of a /proc/<pid>/stat line (the command name may hold spaces
    and parentheses: the state follows the last ')')."""
    rest = stat_text.rsplit(")", 1)[-1].split()
    return rest[0] if rest else ""


def job_may_run(fence_states: list[str]) -> bool:
    """A job process runs only while every process that fences it (its zygote, which
    kills it when the lease runs out, and the peer) runs: a stopped fence cannot fence."""
    return not any(s in STOPPED_STATES for s in fence_states)
