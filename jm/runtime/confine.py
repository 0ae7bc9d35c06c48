"""Confining job processes: the I/O side of `jm/runtime/limits.py`.

Used by the zygote (its per-job cgroups) and in each forked job process before user code
runs: cgroup, resource limits, oom_score_adj, then the job's user (setgid/setuid). Linux
clears the parent-death signal when a process changes its credentials, so the caller arms
it again after `drop_user`.
"""
from __future__ import annotations

import errno
import json
import os
import pwd
import resource
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from typing import Optional

from jm.runtime import limits as L

CGROUP_MOUNT = "/sys/fs/cgroup"
PEER_UMASK = 0o077  # the peer's: its journal, snapshots, audit, blobs, logs are its alone
USER_UMASK = 0o022  # what runs users' code (jobs, engines, SQL and Livy): Spark's usual
HANDED = "files-"   # where a job's peer-held files are handed to its user (its run folder)


def log(msg: str) -> None:
    print(f"[zygote] {msg}", file=sys.stderr, flush=True)


def user_gid(name: str) -> int:
    """The primary group of an existing user `name` (a name or a uid)."""
    pw = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    return pw.pw_gid


def user_uid(name: Optional[str]) -> Optional[int]:
    if name is None:
        return None
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        if name.isdigit():
            return int(name)
        return None


# ---- cgroups (zygote side) ----------------------------------------------------------------
def _fs_type(path: str) -> str:
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return ""
    kinds = [m[2] for m in mounts if len(m) >= 3 and m[1] == path]
    kind = kinds[-1] if kinds else ""  # the last mount on a path is the one in use
    return {"cgroup2": "cgroup2fs"}.get(kind, kind)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def setup_cgroups(limits: L.JobLimits, zygote_pid: int, mount: str = CGROUP_MOUNT,
                  fs_type: Optional[str] = None) -> tuple[Optional[str], str]:
    """Make the zygote's cgroup directory, under which each job gets its own.
    Returns (directory or None, a line for the log)."""
    needed = L.controllers_needed(limits)
    kind = fs_type if fs_type is not None else _fs_type(mount)
    available = set(_read(os.path.join(mount, "cgroup.controllers")).split())
    why = L.cgroup_unusable(kind, os.access(mount, os.W_OK), available, needed)
    if why:
        return None, f"no per-job cgroups: {why}"
    base = os.path.join(mount, L.cgroup_name(zygote_pid))
    try:
        enabled = set(_read(os.path.join(mount, "cgroup.subtree_control")).split())
        missing = [c for c in needed if c not in enabled]
        if missing:  # may fail in a container whose root cgroup holds processes
            _write(os.path.join(mount, "cgroup.subtree_control"),
                   " ".join("+" + c for c in missing))
        os.makedirs(base, exist_ok=True)
        _write(os.path.join(base, "cgroup.subtree_control"), " ".join("+" + c for c in needed))
    except OSError as exc:
        remove_cgroup(base)
        return None, f"no per-job cgroups: cannot set up {base}: {exc.strerror or exc}"
    return base, f"per-job cgroups under {base} ({', '.join(needed)})"


def remove_cgroup(path: str) -> bool:
    """Kill what is left in a job's cgroup and remove it; False while it is still busy."""
    if not os.path.isdir(path):
        return True
    kill = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill):
        try:
            _write(kill, "1")
        except OSError:
            pass
    try:
        os.rmdir(path)
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # processes still in it (being killed)
            return False
        if exc.errno != errno.ENOTEMPTY:
            return True  # gone, or not ours to keep trying (permissions)
    # ENOTEMPTY: a plain directory standing in for a cgroup (tests): its files go first
    for name in os.listdir(path):
        try:
            os.unlink(os.path.join(path, name))
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass
    return True


# ---- in the forked job process ------------------------------------------------------------
def tenant_cgroup(cgroup: Optional[str], memory: int, cpu: int, name: str) -> Optional[str]:
    """Bound this job process (and all it starts) by its tenant's memory and CPU weight:
    in its per-job cgroup `cgroup` (v2) where it has one (the lower memory wins), else in
    a cgroup of its own (v2 or v1, jm/runtime/cgroups.py). A note for the job's log when
    it cannot be."""
    from jm.runtime.cgroups import JOBS, EngineCgroup
    if cgroup is not None:
        for fname, value in (("memory.max", memory), ("cpu.weight", cpu)):
            path = os.path.join(cgroup, fname)
            if not value or not os.path.exists(path):
                continue
            now = _read(path)
            if fname == "memory.max" and now.isdigit() and int(now) <= value:
                continue
            try:
                _write(path, str(value))
            except OSError as exc:
                return f"its tenant's {fname} not set: {exc.strerror or exc}"
        return None
    own = EngineCgroup(name, memory, cpu, group=JOBS)
    if not own.create():
        return f"not bounded by its tenant's memory and CPU: {own.error}"
    try:
        own.add(os.getpid())
    except OSError as exc:
        own.remove()
        return f"not bounded by its tenant's memory and CPU: {exc.strerror or exc}"
    return None


def join_cgroup(base: str, limits: L.JobLimits) -> Optional[str]:
    """Put this process into a new cgroup of its own under `base`."""
    path = os.path.join(base, L.job_cgroup_name(os.getpid()))
    try:
        os.makedirs(path, exist_ok=True)
        for name, value in L.cgroup_files(limits).items():
            try:
                _write(os.path.join(path, name), value)
            except FileNotFoundError:
                if name != "memory.swap.max":  # no swap accounting: nothing to cap
                    raise
        _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
        return path
    except OSError as exc:
        print(f"[jobmanager] job runs without its cgroup: {path}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)
        return None


def count_tasks(uid: int) -> int:
    """Processes and threads of `uid` on this host (what RLIMIT_NPROC counts)."""
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                uid_line = threads = None
                for line in f:
                    if line.startswith("Uid:"):
                        uid_line = line
                    elif line.startswith("Threads:"):
                        threads = line
                        break
        except OSError:
            continue
        if uid_line and int(uid_line.split()[1]) == uid:
            n += int(threads.split()[1]) if threads else 1
    return n


def apply_limits(limits: L.JobLimits, job_uid: int, cgroup: bool) -> None:
    """Resource limits and oom_score_adj of this process (inherited by what it starts)."""
    privileged = os.geteuid() == 0
    try:
        with open("/proc/self/oom_score_adj") as f:
            current_adj = int(f.read().strip() or 0)
        adj = L.oom_score_adj(limits, current_adj, privileged)
        if adj is not None:
            _write("/proc/self/oom_score_adj", str(adj))
    except (OSError, ValueError):
        pass
    nproc = L.nproc_limit(limits, job_uid, count_tasks(job_uid) if limits.nproc > 0
                          and job_uid != 0 and not cgroup else 0, cgroup)
    current = current_limits()
    for call in L.rlimits(limits, current, privileged, nproc):
        try:
            resource.setrlimit(call[0], call[1:])
            continue
        except (OSError, ValueError) as exc:
            error = exc
        # above the hard limit a root peer may not raise (a container): the hard limit,
        # silently (the zygote warned once in the peer's log: `limits_note`)
        retry = L.clamped(call, current[call[0]])
        try:
            if retry is not None:
                resource.setrlimit(retry[0], retry[1:])
                continue
        except (OSError, ValueError) as exc:
            error = exc
        print(f"[jobmanager] could not set resource limit "
              f"{L.KEYS.get(call[0], call[0])}: {error}", file=sys.stderr, flush=True)


CONFINE_ENV = "JM_CONFINE"  # a child's JobLimits (JSON), for confine_self
# ... and its tenant's memory (bytes) and CPU weight, keys of the same JSON object
TENANT_MEMORY, TENANT_CPU = "tenant-memory", "tenant-cpu"


def own_cgroup_name(pid: int) -> str:
    """The cgroup (under jm-jobs) of a process confine_self bounded by its tenant's."""
    return f"confined-{pid}"


def confine_self(environ) -> None:
    """In a process the peer started for users' code other than a job (a Livy session's
    Python process), before any of that code runs: the job processes' confinement, from
    $JM_CONFINE (JobLimits as JSON): rlimits, oom_score_adj, and the user (another user
    clears the parent-death signal: it is armed again)."""
    text = environ.pop(CONFINE_ENV, "")
    if not text:
        return
    payload = json.loads(text)
    limits = L.JobLimits.from_dict(payload)
    memory, cpu = int(payload.get(TENANT_MEMORY, 0)), int(payload.get(TENANT_CPU, 0))
    if memory or cpu:  # its tenant's, in a cgroup of its own (the peer removes it)
        note = tenant_cgroup(None, memory, cpu, own_cgroup_name(os.getpid()))
        if note:
            print(f"[jm] {note}", file=sys.stderr, flush=True)
    target = user_uid(limits.user)
    if limits.user is not None and target is None:  # never as the peer's user instead
        raise SystemExit(f"UserNotFound: the OS user {limits.user!r} this process runs as "
                         "does not exist on this peer's host")
    switch = L.switch_user(limits, os.getuid(), target)
    apply_limits(limits, target if switch else os.getuid(), False)
    if switch:
        from jm.runtime.zygote import die_with_parent  # (zygote imports this module)
        parent = os.getppid()
        drop_user(limits.user, [])
        if not die_with_parent(parent):
            os._exit(1)


def current_limits() -> dict[int, tuple[int, int]]:
    return {res: resource.getrlimit(res) for res in L.KEYS}


def can_raise(res: int, value: int) -> bool:
    """Whether this process may raise its hard limit of `res` to `value` (root without
    CAP_SYS_RESOURCE, in a container, may not): tried, then put back."""
    soft, hard = resource.getrlimit(res)
    try:
        resource.setrlimit(res, (soft, value))
    except (OSError, ValueError):
        return False
    try:
        resource.setrlimit(res, (soft, hard))
    except (OSError, ValueError):
        pass
    return True


def limits_note(limits: L.JobLimits) -> str:
    """'' or the zygote's one warning about the configured limits its jobs cannot get."""
    privileged = os.geteuid() == 0
    over = [o for o in L.above_hard(limits, current_limits())
            if not (privileged and can_raise(o.resource, o.wanted))]
    return L.clamp_warning(over)


def probe_user(name: str) -> str:
    """'' or a warning: what the job user cannot read of this Python and JobManager (a
    job importing a module the zygote did not load, or starting Python, would fail)."""
    import jm
    paths = [(sys.executable, os.X_OK), (os.path.dirname(os.__file__), os.R_OK | os.X_OK),
             (os.path.dirname(os.path.dirname(os.path.abspath(jm.__file__))),
              os.R_OK | os.X_OK)]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the zygote is single-threaded here
        try:
            os.close(r)
            pw = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            os.write(w, "\n".join(p for p, mode in paths if not os.access(p, mode)).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        bad = f.read().decode(errors="replace").split("\n")
    os.waitpid(pid, 0)
    bad = [b for b in bad if b]
    if not bad:
        return ""
    return (f"jobmanager.executor.user: user {name!r} cannot read {', '.join(bad)}: jobs "
            "that import a module the zygote did not load, or start Python, will fail; "
            "make them readable (o+rx) by that user")


def drop_user(name: str, own: list[str], private: tuple = ()) -> None:
    """Become `name` (its groups, gid, uid): after this the job cannot signal the peer.
    `own`: paths the job must write (its run directory), given to the user first;
    `private`: trees given to it whole and closed to every other user (its checkpoints:
    what a savepoint's restore or an attempt of another user left there becomes its)."""
    pw = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    for path in own:
        try:
            os.makedirs(path, exist_ok=True)
            os.chown(path, pw.pw_uid, pw.pw_gid)
        except OSError:
            pass
    for path in private:
        give_tree(path, pw.pw_uid, pw.pw_gid)
    for path in list(own) + list(private):  # the way to them through the peer's folders
        parent = os.path.dirname(os.path.abspath(path))  # (<jobs>/<job>, <storage>/<job>)
        passable(parent)
        passable(os.path.dirname(parent))
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    home = pw.pw_dir if os.path.isdir(pw.pw_dir) and os.access(pw.pw_dir, os.W_OK) else None
    os.environ.update(USER=pw.pw_name, LOGNAME=pw.pw_name)
    os.environ["HOME"] = home or (own[0] if own else "/tmp")


def passable(path: str) -> None:
    """Let other users pass through directory `path` (x, never r: they cannot list it),
    so that a job's user reaches its own folder below; only a directory this process
    owns is changed."""
    try:
        st = os.stat(path)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o011 != 0o011:
            os.chmod(path, stat.S_IMODE(st.st_mode) | 0o011)
    except OSError:
        pass


def hand_over(paths: tuple, folder: str, uid: int, gid: int) -> dict[str, str]:
    """Copies of the peer's own files `paths` (its blob store: the peer's user's alone)
    in `folder` (the job's run folder), each under its own name, given to the job's
    user once all are written: {path: copy}. Written into a folder made new here (0700,
    the peer's user's until then), so that nothing a user left can redirect a write."""
    top = tempfile.mkdtemp(prefix=HANDED, dir=folder)
    out: dict[str, str] = {}
    for i, path in enumerate(paths):
        target_dir = os.path.join(top, str(i))
        os.mkdir(target_dir)
        target = os.path.join(target_dir, os.path.basename(path.rstrip("/")))
        if os.path.isdir(path):
            shutil.copytree(path, target, symlinks=True)
        else:
            shutil.copyfile(path, target)
        out[path] = target
    give_tree(top, uid, gid)
    return out


def give_tree(path: str, uid: int, gid: int) -> None:
    """Make `path` (made if missing) and everything under it `uid`'s, the top mode 0700;
    entries already its are not touched (a warm checkpoint costs a walk, not a write)."""
    try:
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError:
        return
    for root, dirs, files in os.walk(path):
        for entry in [root] + [os.path.join(root, n) for n in dirs + files]:
            try:
                st = os.lstat(entry)
                if st.st_uid != uid or st.st_gid != gid:
                    os.lchown(entry, uid, gid)
            except OSError:
                pass


# ---- the fence watch ----------------------------------------------------------------------
class StatFile:
    """/proc/<pid>/stat kept open: the process's state letter at each `state()` ('' once
    it is gone)."""

    def __init__(self, pid: int) -> None:
        try:
            self.fd: Optional[int] = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = None

    def state(self) -> str:
        if self.fd is None:
            return ""
        try:
            return L.proc_state(os.pread(self.fd, 1024, 0).decode(errors="replace"))
        except OSError:  # (the process is gone: ESRCH)
            return ""


def state_of(pid: int) -> str:
    """The process's state letter (R, S, T, ...), or '' if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return L.proc_state(f.read())
    except OSError:
        return ""


def watch_fence(pids: list[int], interval: float) -> threading.Thread:
    """A thread in the job process that stops the job's whole process group (its driver
    JVM too) while one of `pids` (the zygote that enforces the lease, the peer) is stopped.
    The zygote continues the group once it runs again and the lease still holds, and kills
    it otherwise; a job never runs while its fence cannot act. A look every `interval`
    seconds (jm.policy.jobs.runparams.fence_interval of the lease)."""
    def run() -> None:
        # each stat file opened once and read again in place (a look is two preads: an
        # open and close of each per look cost a job process ~3 ms of CPU a second)
        stats = [StatFile(p) for p in pids]
        while True:
            time.sleep(interval)  # the watch's period
            if not L.job_may_run([s.state() for s in stats]):
                try:
                    os.killpg(os.getpgid(0), signal.SIGSTOP)
                except OSError:
                    os.kill(os.getpid(), signal.SIGSTOP)
    t = threading.Thread(target=run, name="jm-fence-watch", daemon=True)
    t.start()
    return t
