"""The warm job-process parent ("zygote").

Started once per peer with `python -m jm.runtime.zygote`. It imports the heavy modules a
job needs (pyspark's Connect client, pandas, pyarrow) once, freezes the GC, and
then forks one child per job attempt on request, so that a job starts in
milliseconds. It never opens a Spark/gRPC channel itself (gRPC is not fork-safe).

Protocol on stdin/stdout: 4-byte big-endian length + msgpack frames of the typed
messages below. The zygote dies with its peer (PR_SET_PDEATHSIG, and EOF on
stdin), and kills its job processes when it goes.
"""
from __future__ import annotations

import ctypes
import dataclasses
import gc
import os
import select
import selectors
import signal
import struct
import sys
import time
from dataclasses import dataclass

import msgpack


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


def _child(params: dict, fds_to_close: list[int], zygote_pid: int) -> None:
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
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.makedirs(os.path.dirname(params["log_path"]), exist_ok=True)
        logfd = os.open(params["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        os.close(logfd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
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


def main() -> None:
    if not die_with_parent():
        sys.exit(0)
    # user code yields the CPU to the JobManager peer (heartbeats, REST, Raft)
    nice = int(os.environ.get("JM_JOB_NICE", "0") or 0)
    if nice:
        os.nice(nice)
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
    lease_until = float("inf")  # no lease until the peer sends one
    guarded: list[int] = []
    buf = b""

    def send(msg) -> None:
        data = pack(msg)
        while data:
            try:
                n = os.write(stdout_fd, data)
                data = data[n:]
            except BlockingIOError:  # the peer is not reading (frozen?): keep fencing
                enforce_lease()
                select.select([], [stdout_fd], [], wait_timeout(time.monotonic(), lease_until))

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
            was_fenced = pid in fenced
            fenced.discard(pid)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                send(Exited(key, pid, -sig, sig, was_fenced))
            else:
                send(Exited(key, pid, os.WEXITSTATUS(status), 0, was_fenced))

    def enforce_lease() -> None:
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

    my_pid = os.getpid()
    send(Ready(my_pid))
    running = True
    while running:
        enforce_lease()
        for skey, _ in sel.select(wait_timeout(time.monotonic(), lease_until)):
            if skey.data == "sig":
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                reap()
                continue
            try:
                chunk = os.read(stdin_fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                running = False
                break
            buf += chunk
            while len(buf) >= 4:
                (n,) = struct.unpack(">I", buf[:4])
                if len(buf) < 4 + n:
                    break
                msg, buf = unpack(buf[4:4 + n]), buf[4 + n:]
                if isinstance(msg, Lease):
                    lease_until = msg.until
                    continue
                if isinstance(msg, Guard):
                    guarded[:] = [int(p) for p in msg.pids]
                    continue
                if isinstance(msg, Spawn):
                    if time.monotonic() > lease_until:  # fenced: run nothing
                        send(Exited(msg.key, 0, -int(signal.SIGKILL), int(signal.SIGKILL), True))
                        continue
                    pid = os.fork()
                    if pid == 0:
                        _child(msg.params, [stdin_fd, stdout_fd, wake_r, wake_w], my_pid)
                    children[pid] = msg.key
                    send(Spawned(msg.key, pid))
        reap()
    for pid in list(children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    main()
