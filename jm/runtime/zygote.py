"""The warm job-process parent ("zygote").

Started once per peer with `python -m jm.runtime.zygote`. It imports the heavy modules a
job needs (pyspark's Connect client, pandas, pyarrow) once, freezes the GC, and
then forks one child per job attempt on request, so that a job starts in
milliseconds. It never opens a Spark/gRPC channel itself (gRPC is not fork-safe).

Protocol on stdin/stdout: jm/runtime/zygoteproto.py (length-prefixed msgpack frames of
typed messages). What it does with them is decided in jm/runtime/zygotestate.py
(`ZygoteState.handle(event, now) -> [action]`); this module is the loop that turns its
input and the OS's news (child exits and stops, the lease's end) into events and performs
the actions. The zygote dies with its peer (PR_SET_PDEATHSIG, and EOF on
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
import sys
import time

from jm.policy.jobs.runparams import RunParams
from jm.policy.jobs.runparams import TOKEN_ENV
from jm.policy.jobs.submitopts import with_local_files
from jm.policy.jobs.sinknote import SPARK_LOG_ENV
from jm.runtime import limits as L
from jm.runtime.cgroups import remove_job_cgroup, tenant_cgroup_name
from jm.runtime.confine import limits_note, state_of
from jm.runtime.zygoteproto import (CGROUP_ENV, LIMITS_ENV, PARENT_ENV, ProtocolError,
                                    Ready, latest_lease, next_frame, pack, unpack)
from jm.runtime.zygotestate import (PAUSED_POLL, ChildEnding, ChildReaped, ChildStopped,
                                    Continue, DropCgroup, Exit, Fork, Forked, Garbled,
                                    InputClosed, KillJob, KillLeftovers, KillPid, PeerSeen,
                                    Send, Tick, ZygoteState, wait_timeout)


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


def _child(params: RunParams, fds_to_close: list[int], zygote_pid: int, peer_pid: int,
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
        os.makedirs(os.path.dirname(params.log_path), exist_ok=True)
        for path in (params.result_path, params.error_path):  # the attempt's run folder
            if path:
                os.makedirs(os.path.dirname(path), exist_ok=True)
        logfd = os.open(params.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        os.close(logfd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        if params.memory or params.cpu:  # its tenant's (before it starts anything)
            note = confine.tenant_cgroup(cgroup, params.memory, params.cpu,
                                         tenant_cgroup_name(zygote_pid, os.getpid()))
            if note:
                print(f"[jm] {note}", file=sys.stderr, flush=True)
        if params.run_as:  # its proxy-user (jobmanager.executor.proxy-users allowed it)
            limits = dataclasses.replace(limits, user=params.run_as)
        target = confine.user_uid(limits.user)
        if limits.user is not None and target is None:  # never as the peer's user instead
            _no_user(params, limits.user)
        switch = L.switch_user(limits, os.getuid(), target)
        confine.apply_limits(limits, target if switch else os.getuid(), cgroup is not None)
        if switch:
            own = [os.path.dirname(p) for p in (params.result_path, params.error_path) if p]
            if params.peer_files and own:  # the peer's copies are its user's alone
                params = _handed(params, confine.hand_over(
                    params.peer_files, own[0], target, confine.user_gid(limits.user)))
            confine.drop_user(limits.user, own,
                              (params.checkpoint_dir,) if params.checkpoint_dir else ())
            # a change of credentials clears the parent-death signal: arm it again
            if not die_with_parent(zygote_pid):
                os._exit(1)
        confine.watch_fence([zygote_pid, peer_pid], params.fence_interval)
        os.umask(confine.USER_UMASK)  # (the peer's is its own: what user code writes is not)
        if params.python_env:  # its own requirements (jm/runtime/pyenv.py)
            from jm.runtime import pyenv
            os.environ["PYSPARK_PYTHON"] = (params.executor_python or params.python_exec
                                            or sys.executable)
            if pyenv.activate(params.python_env):  # a module the zygote imported: its own
                pyenv.exec_fresh(params, [zygote_pid, peer_pid])
        if params.spark_log:  # where a connect-mode query's console output goes
            os.environ[SPARK_LOG_ENV] = params.spark_log  # (jm/policy/jobs/sinknote.py)
        if params.spark_token:  # its engine's (a tenant's or its own), not the peer's
            os.environ[TOKEN_ENV] = params.spark_token
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


def _handed(params: RunParams, copies: dict) -> RunParams:
    """`params` with the job's user's copies of the peer's files in their places."""
    return dataclasses.replace(
        params, pyfiles=tuple(copies.get(p, p) for p in params.pyfiles),
        script=copies.get(params.script, params.script) if params.script else None,
        spark_conf=with_local_files(dict(params.spark_conf), copies), peer_files=(),
        shown_names=tuple((copies.get(p, p), name) for p, name in params.shown_names))


def _no_user(params: RunParams, user: str) -> None:
    """The user the job must run as does not exist on this host: the attempt fails, saying
    so (its error.json), before anything of the job runs."""
    import json
    text = (f"UserNotFound: the OS user {user!r} this job runs as does not exist on this "
            "peer's host (useradd it there, or change the tenant's os-user)")
    print(f"[jobmanager] {text}", file=sys.stderr, flush=True)
    if params.error_path:
        with open(params.error_path, "w") as f:
            json.dump({"exception": text, "traceback": ""}, f)
    os._exit(1)


def exit_status(status: int) -> tuple[int, int]:
    """(exit code, 0), or (-signal, signal) for a process a signal ended (a waitpid status)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return -sig, sig
    return os.WEXITSTATUS(status), 0


def _signal_pid(pid: int, sig: int, fns=(os.killpg, os.kill)) -> None:
    """`sig` to the process group `pid`, else (no such group yet) to the process."""
    for fn in fns:
        try:
            fn(pid, sig)
            return
        except OSError:
            continue


class Cgroups:
    """The job processes' cgroups under `base` (none without one): removed as each job ends,
    again while one is still busy (its processes being killed)."""

    def __init__(self, base: str | None, zygote_pid: int) -> None:
        self.base = base
        self.zygote_pid = zygote_pid
        self.left: list[str] = []
        self.left_tenant: list[int] = []  # jobs whose tenant's cgroup is still busy

    def drop(self, pid: int) -> None:
        if not remove_job_cgroup(tenant_cgroup_name(self.zygote_pid, pid)):
            self.left_tenant.append(pid)
        if self.base:
            from jm.runtime.confine import remove_cgroup
            path = os.path.join(self.base, L.job_cgroup_name(pid))
            if not remove_cgroup(path):
                self.left.append(path)

    def retry(self) -> None:
        if self.left_tenant:
            self.left_tenant[:] = [p for p in self.left_tenant if not remove_job_cgroup(
                tenant_cgroup_name(self.zygote_pid, p))]
        if self.left:
            from jm.runtime.confine import remove_cgroup
            self.left[:] = [p for p in self.left if not remove_cgroup(p)]

    def finish(self, pids: tuple) -> None:
        """At exit, once `pids` were killed: reap them, remove their cgroups and ours."""
        from jm.runtime.confine import remove_cgroup
        deadline = time.monotonic() + 2.0  # (a process stuck in the kernel is left)
        left = set(pids)
        while left:
            for pid in list(left):
                try:
                    done = os.waitpid(pid, os.WNOHANG)[0] == pid
                except OSError:
                    done = True
                if done:
                    left.discard(pid)
                    self.drop(pid)
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.05)  # the killed processes dying
        while (self.left or self.left_tenant) and time.monotonic() < deadline:
            self.retry()
            time.sleep(0.05)  # the killed processes leaving their cgroups
        if self.base:
            remove_cgroup(self.base)


class ZygoteLoop:
    """The zygote's I/O: turns stdin frames and the OS's news into events for its
    ZygoteState and performs the actions it returns."""

    def __init__(self, peer_pid: int, limits: L.JobLimits, cgroup_base: str | None) -> None:
        self.state = ZygoteState()
        self.peer_pid, self.limits, self.my_pid = peer_pid, limits, os.getpid()
        self.cgroups = Cgroups(cgroup_base, os.getpid())
        self.stdin_fd, self.stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
        os.set_blocking(self.stdin_fd, False)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)  # the peer stops us by closing stdin
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.stdin_fd, selectors.EVENT_READ, "in")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "sig")
        self.buf = b""
        self.eof = False

    # ---- events in -----------------------------------------------------------------------
    def step(self, event, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.perform(self.state.handle(event, now))

    def read_input(self) -> None:
        """What the peer sent so far, into buf (without acting on it)."""
        while not self.eof:
            try:
                chunk = os.read(self.stdin_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.buf += chunk

    def dispatch(self) -> None:
        """Hand the whole frames read to the state, in order."""
        while not self.eof:
            body, rest = next_frame(self.buf)
            if body is None:
                return
            self.buf = rest
            try:
                msg = unpack(body)
            except ProtocolError as exc:
                msg = Garbled(str(exc))
            self.step(msg)

    def enforce_lease(self) -> None:
        now, pending = time.monotonic(), None
        if self.state.lease_ran_out(now):
            # stopped for a while? the peer may have renewed the lease meanwhile: read first
            self.read_input()
            pending, now = latest_lease(self.buf), time.monotonic()
        self.step(Tick(pending), now)

    def reap(self) -> None:
        while self.state.children:
            try:  # look first, reap after: while it is a zombie its pid (and process
                # group id) cannot be reused, so the group kill hits only its own
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            self.step(ChildEnding(info.si_pid))
            pid, status = os.waitpid(info.si_pid, os.WNOHANG)
            if pid == 0:
                return
            self.step(ChildReaped(pid, *exit_status(status)))

    def note_stopped(self) -> None:
        """Job processes that stopped themselves since we last looked."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WSTOPPED | os.WNOHANG)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            self.step(ChildStopped(info.si_pid))

    def resume_paused(self) -> None:
        if self.state.paused:
            self.enforce_lease()
            self.step(PeerSeen(L.job_may_run([state_of(self.peer_pid)])))

    # ---- actions out ---------------------------------------------------------------------
    def perform(self, actions: list) -> None:
        for act in actions:
            if isinstance(act, Send):
                self.send(act.msg)
            elif isinstance(act, Fork):
                pid = os.fork()
                if pid == 0:
                    _child(act.params, [self.stdin_fd, self.stdout_fd, self.wake_r, self.wake_w],
                           self.my_pid, self.peer_pid, self.limits, self.cgroups.base)
                self.step(Forked(act.key, pid))
            elif isinstance(act, KillJob):
                _signal_pid(act.pid, signal.SIGKILL)
            elif isinstance(act, Continue):
                _signal_pid(act.pid, signal.SIGCONT)
            elif isinstance(act, KillLeftovers):
                kill_group(act.pid)
            elif isinstance(act, KillPid):
                _signal_pid(act.pid, signal.SIGKILL, (os.kill,))
            elif isinstance(act, DropCgroup):
                self.cgroups.drop(act.pid)
            elif isinstance(act, Exit):
                self.exit(act.pids)

    def send(self, msg) -> None:
        data = pack(msg)
        while data:
            try:
                n = os.write(self.stdout_fd, data)
                data = data[n:]
            except BlockingIOError:  # the peer is not reading (frozen?): keep fencing
                self.enforce_lease()
                select.select([], [self.stdout_fd], [],
                              wait_timeout(time.monotonic(), self.state.lease_until))

    def exit(self, pids: tuple) -> None:
        for pid in pids:
            _signal_pid(pid, signal.SIGKILL, (os.killpg,))
        self.cgroups.finish(pids)

    def run(self, note: str) -> None:
        self.send(Ready(self.my_pid, note))
        while not self.eof:
            self.enforce_lease()
            timeout = self.state.timeout(time.monotonic())
            if self.cgroups.left:
                timeout = min(timeout, PAUSED_POLL)
            for skey, _ in self.sel.select(timeout):
                if skey.data == "sig":
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
                    self.reap()
                    self.note_stopped()
                    continue
                self.read_input()
            self.dispatch()
            self.reap()
            self.note_stopped()
            self.resume_paused()
            self.cgroups.retry()
        self.step(InputClosed())


def _prepare() -> tuple[L.JobLimits, str | None, str]:
    """Leave the peer's process group, lower our priority, set up the jobs' cgroups and
    check their user: (limits, cgroup base or None, a note for the peer's log)."""
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
    clamp = limits_note(limits)  # said once here; each job gets the hard limit silently
    if clamp:
        note += f"; WARNING {clamp}"
    print(f"[zygote] {note}", file=sys.stderr, flush=True)
    return limits, cgroup_base, note


def main() -> None:
    if not die_with_parent():
        sys.exit(0)
    peer_pid = os.getppid()
    limits, cgroup_base, note = _prepare()
    _warm_imports(os.environ.get("JM_ZYGOTE_PRELOAD", "pyspark"))
    gc.collect()
    gc.freeze()
    ZygoteLoop(peer_pid, limits, cgroup_base).run(note)


if __name__ == "__main__":
    main()
