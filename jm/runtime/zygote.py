"""The warm job-process parent ("zygote").

Started once per peer with `python -m jm.runtime.zygote`. It imports the heavy modules a
job needs (pyspark's Connect client, pandas, pyarrow) once, freezes the GC, and
then forks one child per job attempt on request, so that a job starts in
milliseconds. It never opens a Spark/gRPC channel itself (gRPC is not fork-safe).

Protocol on stdin/stdout: 4-byte big-endian length + msgpack frames of the typed
messages below. The zygote dies with its peer (PR_SET_PDEATHSIG, and EOF on
stdin), and kills its job processes when it goes.

It runs in a process group of its own, so that a stop or kill of the peer's process group
(Ctrl-Z on `bin/jobmanager.sh start-foreground`) does not stop the process that enforces
the lease. It stays in the peer's session: where the kernel groups CPU time by session
(sched_autogroup), a session of its own would put every job in a scheduling group of
its own, as heavy as the whole peer's, and the jobs' `nice` would no longer yield to the
peer (submissions measured ~35% slower that way, docs/benchmarks.md). A job runs only while its fence can act: each job
process stops its own process group while the zygote or the peer is stopped
(`confine.watch_fence`); the zygote continues it once both run and the lease holds, and
kills it when the lease ran out meanwhile. Each job process gets its limits, its user and
its cgroup (`jm/runtime/limits.py`, `jm/runtime/confine.py`) before user code runs.
"""
from __future__ import annotations

import ctypes
import dataclasses
import gc
import json
import os
import select
import selectors
import signal
import struct
import sys
import time
from dataclasses import dataclass

import msgpack

from jm.runtime import limits as L
from jm.runtime.confine import state_of


@dataclass(frozen=True)
class Spawn:
    key: str
    params: dict


@dataclass(frozen=True)
class Spawned:
    key: str
    pid: int


@dataclass(frozen=True)
class Exited:
    key: str
    pid: int
    code: int      # exit code, or -signal number
    signal: int
    fenced: bool = False  # killed because the peer's lease ran out


@dataclass(frozen=True)
class Ready:
    pid: int
    note: str = ""  # a line for the peer's log (e.g. whether jobs get cgroups)


@dataclass(frozen=True)
class Lease:
    """The peer's lease is valid until this CLOCK_MONOTONIC time (shared by all processes
    of the machine). Past it the zygote kills every job process, even if the peer itself
    is frozen (SIGSTOP) and cannot."""
    until: float


@dataclass(frozen=True)
class Guard:
    """Other processes that run job work for this peer (its Spark Connect JVM, whose
    streaming queries outlive a killed job process): killed too when the lease runs out.
    The peer's supervisor starts a fresh JVM once the peer is back."""
    pids: list


MESSAGES = {cls.__name__: cls for cls in (Spawn, Spawned, Exited, Ready, Lease, Guard)}


def pack(msg) -> bytes:
    body = msgpack.packb([type(msg).__name__, dataclasses.asdict(msg)], use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def unpack(body: bytes):
    name, fields = msgpack.unpackb(body, raw=False)
    return MESSAGES[name](**fields)


PARENT_ENV = "JM_PARENT_PID"  # set by whoever starts us: the pid we must die with
LIMITS_ENV = "JM_JOB_LIMITS"  # JSON of limits.JobLimits for every job process
CGROUP_ENV = "JM_JOB_CGROUP"  # "1": a cgroup v2 per job where the host has one


def latest_lease(buf: bytes) -> float | None:
    """The last Lease among the whole frames of `buf` (pure; None: none there): what the
    zygote will hold once it has read them. A zygote that was stopped looks at it (how far
    the peer renewed the lease meanwhile) before it judges the lease run out."""
    until = None
    while len(buf) >= 4:
        (n,) = struct.unpack(">I", buf[:4])
        if len(buf) < 4 + n:
            break
        body, buf = buf[4:4 + n], buf[4 + n:]
        try:
            name, fields = msgpack.unpackb(body, raw=False)
        except Exception:
            continue
        if name == "Lease":
            until = fields["until"]
    return until


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send `sig` to this process when its parent dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def die_with_parent(expected: int | None = None) -> bool:
    """Arm the parent-death signal; False if the parent is already gone (it died before
    the signal was armed, so it will never come). `expected` is the parent's pid (else
    $JM_PARENT_PID); without one, a parent of pid 1 counts as gone."""
    set_pdeathsig(signal.SIGKILL)
    if expected is None:
        env = os.environ.pop(PARENT_ENV, "")
        expected = int(env) if env.isdigit() else None
    ppid = os.getppid()
    return ppid == expected if expected is not None else ppid != 1


PRELOADS = {
    "pyspark": ("pyspark.sql.connect.session", "pyspark.sql.connect.functions", "pandas",
                "pyarrow", "json", "traceback", "jm.runtime.jobrun"),
    "none": ("json", "traceback", "jm.runtime.jobrun"),
}


IDLE_WAIT = 1.0  # seconds: the longest the loop sleeps when nothing is due


def wait_timeout(now: float, lease_until: float, idle: float = IDLE_WAIT) -> float:
    """How long the main loop may block in select (pure; `now` is CLOCK_MONOTONIC).

    Until the lease runs out: until just past its end (at most `idle`), so that the
    job processes are killed on time. Once it has run out, the kill is done (every later
    spawn is refused at once) and only the peer (stdin) or a child (SIGCHLD) can change
    anything: wait `idle`, never 0, so a fenced zygote sleeps instead of spinning."""
    left = lease_until - now
    if left < 0 or left == float("inf"):
        return idle
    return min(idle, left + 0.001)


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in a job process's group (not the zygote's own)."""
    try:
        if pgid != os.getpgid(0):
            os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _warm_imports(preload: str) -> None:
    for name in PRELOADS.get(preload, PRELOADS["pyspark"]):
        try:
            __import__(name)
        except Exception as exc:  # a missing optional module must not stop the peer
            print(f"[zygote] warm import of {name} failed: {exc}", file=sys.stderr, flush=True)


def _child(params: dict, fds_to_close: list[int], zygote_pid: int, peer_pid: int,
           limits: L.JobLimits, cgroup_base: str | None) -> None:
    """In the forked child: become the job process. Never returns."""
    code = 1
    try:
        for fd in fds_to_close:
            try:
                os.close(fd)
            except OSError:
                pass
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.setpgid(0, 0)
        if not die_with_parent(zygote_pid):
            os._exit(1)
        from jm.runtime import confine
        cgroup = confine.join_cgroup(cgroup_base, limits) if cgroup_base else None
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.makedirs(os.path.dirname(params["log_path"]), exist_ok=True)
        for key in ("result_path", "error_path"):  # the attempt's run folder
            if params.get(key):
                os.makedirs(os.path.dirname(params[key]), exist_ok=True)
        logfd = os.open(params["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        os.close(logfd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        target = confine.user_uid(limits.user)
        switch = L.switch_user(limits, os.getuid(), target)
        confine.apply_limits(limits, target if switch else os.getuid(), cgroup is not None)
        if switch:
            own = [os.path.dirname(params[k]) for k in ("result_path", "error_path")
                   if params.get(k)]
            if params.get("checkpoint_dir"):
                own.append(params["checkpoint_dir"])
            confine.drop_user(limits.user, own)
            # a change of credentials clears the parent-death signal: arm it again
            if not die_with_parent(zygote_pid):
                os._exit(1)
        confine.watch_fence([zygote_pid, peer_pid])
        if params.get("cwd"):
            os.chdir(params["cwd"])
        from jm.runtime.jobrun import run_job
        code = run_job(params)
    except BaseException:
        import traceback
        try:
            traceback.print_exc()
        except Exception:
            pass
        code = 1
    finally:
        os._exit(code)


PAUSED_POLL = 0.1  # seconds between looks at the peer while jobs wait for it to run


def main() -> None:
    if not die_with_parent():
        sys.exit(0)
    peer_pid = os.getppid()
    try:  # out of the peer's process group, in its session (see the module's doc)
        os.setpgid(0, 0)
    except OSError:
        pass
    # user code yields the CPU to the JobManager peer (heartbeats, REST, Raft)
    nice = int(os.environ.get("JM_JOB_NICE", "0") or 0)
    if nice:
        os.nice(nice)
    limits = L.JobLimits.from_dict(json.loads(os.environ.get(LIMITS_ENV) or "{}"))
    cgroup_base, note = None, "no per-job cgroups (jobmanager.executor.cgroup is off)"
    if os.environ.get(CGROUP_ENV) == "1":
        from jm.runtime.confine import setup_cgroups
        cgroup_base, note = setup_cgroups(limits, os.getpid(),
                                          os.environ.get("JM_CGROUP_MOUNT") or "/sys/fs/cgroup")
    target = None
    if limits.user is not None:
        from jm.runtime.confine import probe_user, user_uid
        target = user_uid(limits.user)
    if L.switch_user(limits, os.getuid(), target):
        problem = probe_user(limits.user)
        if problem:
            note += f"; WARNING {problem}"
    print(f"[zygote] {note}", file=sys.stderr, flush=True)
    _warm_imports(os.environ.get("JM_ZYGOTE_PRELOAD", "pyspark"))
    gc.collect()
    gc.freeze()

    stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
    os.set_blocking(stdin_fd, False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: None)  # the peer stops us by closing stdin
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    sel = selectors.DefaultSelector()
    sel.register(stdin_fd, selectors.EVENT_READ, "in")
    sel.register(wake_r, selectors.EVENT_READ, "sig")
    children: dict[int, str] = {}
    fenced: set[int] = set()
    paused: set[int] = set()  # job processes that stopped themselves (their fence was)
    cgroups_left: list[str] = []  # cgroups of ended jobs still busy (being killed)
    lease_until = float("inf")  # no lease until the peer sends one
    guarded: list[int] = []
    buf = b""
    eof = False

    def send(msg) -> None:
        data = pack(msg)
        while data:
            try:
                n = os.write(stdout_fd, data)
                data = data[n:]
            except BlockingIOError:  # the peer is not reading (frozen?): keep fencing
                enforce_lease()
                select.select([], [stdout_fd], [], wait_timeout(time.monotonic(), lease_until))

    def drop_cgroup(pid: int) -> None:
        if cgroup_base:
            from jm.runtime.confine import remove_cgroup
            path = os.path.join(cgroup_base, L.job_cgroup_name(pid))
            if not remove_cgroup(path):
                cgroups_left.append(path)

    def reap() -> None:
        while children:
            try:  # look first, reap after: while it is a zombie its pid (and process
                # group id) cannot be reused, so the group kill below hits only its own
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            if info.si_pid in children:
                kill_group(info.si_pid)  # what the attempt left: its Spark driver JVM...
            pid, status = os.waitpid(info.si_pid, os.WNOHANG)
            if pid == 0:
                return
            key = children.pop(pid, None)
            if key is None:
                continue
            paused.discard(pid)
            drop_cgroup(pid)
            was_fenced = pid in fenced
            fenced.discard(pid)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                send(Exited(key, pid, -sig, sig, was_fenced))
            else:
                send(Exited(key, pid, os.WEXITSTATUS(status), 0, was_fenced))

    def read_input() -> None:
        """What the peer sent so far, into buf (without acting on it)."""
        nonlocal buf, eof
        while not eof:
            try:
                chunk = os.read(stdin_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                eof = True
                return
            buf += chunk

    def enforce_lease() -> None:
        nonlocal lease_until
        if time.monotonic() <= lease_until:
            return
        # stopped for a while? the peer may have renewed the lease meanwhile: read first
        read_input()
        newest = latest_lease(buf)
        if newest is not None:
            lease_until = newest
            if time.monotonic() <= lease_until:
                return
        while guarded:
            try:
                os.kill(guarded.pop(), signal.SIGKILL)
            except OSError:
                pass
        for pid in children:
            if pid not in fenced:
                fenced.add(pid)
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                        break
                    except OSError:
                        continue

    def note_stopped() -> None:
        """Job processes that stopped themselves since we last looked."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WSTOPPED | os.WNOHANG)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            if info.si_pid in children:
                paused.add(info.si_pid)

    def resume_paused() -> None:
        """Continue the stopped job processes once their fence runs again: the lease
        still holds (else they are killed) and the peer is not stopped."""
        if not paused:
            return
        enforce_lease()
        if time.monotonic() > lease_until or not L.job_may_run([state_of(peer_pid)]):
            return
        for pid in list(paused):
            paused.discard(pid)
            for cont in (os.killpg, os.kill):
                try:
                    cont(pid, signal.SIGCONT)
                    break
                except OSError:
                    continue

    def handle(msg) -> None:
        nonlocal lease_until
        if isinstance(msg, Lease):
            lease_until = msg.until
        elif isinstance(msg, Guard):
            guarded[:] = [int(p) for p in msg.pids]
        elif isinstance(msg, Spawn):
            if time.monotonic() > lease_until:  # fenced: run nothing
                send(Exited(msg.key, 0, -int(signal.SIGKILL), int(signal.SIGKILL), True))
                return
            pid = os.fork()
            if pid == 0:
                _child(msg.params, [stdin_fd, stdout_fd, wake_r, wake_w], my_pid, peer_pid,
                       limits, cgroup_base)
            children[pid] = msg.key
            send(Spawned(msg.key, pid))

    my_pid = os.getpid()
    send(Ready(my_pid, note))
    while not eof:
        enforce_lease()
        timeout = wait_timeout(time.monotonic(), lease_until)
        if paused or cgroups_left:
            timeout = min(timeout, PAUSED_POLL)
        for skey, _ in sel.select(timeout):
            if skey.data == "sig":
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                reap()
                note_stopped()
                continue
            read_input()
        while len(buf) >= 4 and not eof:
            (n,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + n:
                break
            msg, buf = unpack(buf[4:4 + n]), buf[4 + n:]
            handle(msg)
        reap()
        note_stopped()
        resume_paused()
        if cgroups_left:
            from jm.runtime.confine import remove_cgroup
            cgroups_left[:] = [p for p in cgroups_left if not remove_cgroup(p)]
    for pid in list(children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    if cgroup_base:
        from jm.runtime.confine import remove_cgroup
        deadline = time.monotonic() + 2.0
        for pid in list(children):
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
            drop_cgroup(pid)
        while cgroups_left and time.monotonic() < deadline:
            cgroups_left[:] = [p for p in cgroups_left if not remove_cgroup(p)]
            time.sleep(0.05)
        remove_cgroup(cgroup_base)


if __name__ == "__main__":
    main()
