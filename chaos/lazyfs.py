"""A power-loss filesystem in the spirit of Jepsen's LazyFS: a FUSE passthrough that keeps
every data write nobody has fsynced in memory, so that a "power cut" can lose it.

    python -m chaos.lazyfs MOUNT BACKING --control SOCK [--sync-delay S]   # until SIGTERM

The files live in BACKING. A write() to a file through MOUNT stays in this process's
memory (per file, in 4 KiB blocks) until fsync/fdatasync of that file (any handle of it):
then the file's pending blocks are written to the backing file and it is fsynced. close
and flush do not sync. Reads and the size seen through the mount include pending writes.
`cut` on the control socket is the power cut: every pending write is dropped and every
later change is refused with EIO (reads still work and show only synced data). Unmount,
mount again: what was synced is all there is.

`eio S` is a failing disk for S seconds: each fsync/fdatasync in that time fails with EIO
and drops the file's pending writes, as Linux does after a failed writeback (the pages
are marked clean: the page cache still shows the data, the disk never gets it, and a
later fsync that succeeds says nothing about them; PostgreSQL's "fsyncgate").

A weaker model than LazyFS: metadata changes (create, mkdir, rename, unlink, truncate,
chmod, utimens; no links) go to BACKING at once and survive a cut, where LazyFS loses
the unsynced ones too. So this checks that data is synced before it is relied on, not that
a rename or a new directory entry is (fsyncdir is passed on to BACKING but has no effect
on what survives).

Shared writable mmap (pysyncobj's journal): FUSE supports it when direct_io is off (the
default here) without the kernel's writeback cache (not enabled here: then every write
is sent at once and the kernel keeps its own i_size). Stores into the mapping dirty the
page cache; the kernel writes the pages back as write() calls to this process (on
fsync/fdatasync/msync, on close of the last handle, under memory pressure, or every ~30 s),
and fsync/fdatasync/msync(MS_SYNC) become write() calls followed by an fsync call.
tests/e2e/test_power_loss.py::test_lazyfs_mmap checks exactly that.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Optional

BLOCK = 4096


class _Pending:
    """The unsynced writes of one file: whole blocks as they would read now, and the size."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.blocks: dict[int, bytearray] = {}


class LazyOps:
    """mfusepy operations (its FUSE class calls the methods that exist). Pending writes are
    keyed by the backing file's inode number, so renames and extra handles share them."""

    use_ns = True

    def __init__(self, backing: str, sync_delay: float = 0.0) -> None:
        self.root = os.path.realpath(backing)
        self.sync_delay = sync_delay   # seconds an fsync takes before it is done (a slow disk)
        self.guard = threading.Lock()   # guards pending and cut
        self.pending: dict[int, _Pending] = {}
        self.cut = False
        self.eio_until = 0.0           # monotonic time until which every fsync fails
        self.failed_syncs = 0          # fsyncs failed so far
        self.dropped = 0               # bytes the cut or a failed fsync dropped (pending blocks)
        self.refused = 0               # bytes of writes refused after the cut

    # ---- helpers -------------------------------------------------------------------------
    def _path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _writable(self) -> None:
        if self.cut:
            raise OSError(errno.EIO, "power is cut")

    def _forget(self, real: str) -> None:
        """The last name of a file goes away (unlink, renamed over): its writes too."""
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            self.pending.pop(st.st_ino, None)

    # ---- metadata (goes to the backing dir at once) -----------------------------------------
    def getattr(self, path: str, fh: Optional[int] = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
        out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid",
                                           "st_size", "st_ino", "st_blocks")}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        with self.guard:
            p = self.pending.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
            if p is not None:
                out["st_size"] = p.size
        return out

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._path(path))]

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._path(path))
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree",
                                            "f_bavail", "f_files", "f_ffree", "f_namemax")}

    def _meta(self, call: Any, *args: Any, **kwargs: Any) -> None:
        """A metadata change: refused after the cut, else done in the backing dir at once."""
        self._writable()
        call(*args, **kwargs)

    def mkdir(self, path: str, mode: int) -> None:
        self._meta(os.mkdir, self._path(path), mode)

    def rmdir(self, path: str) -> None:
        self._meta(os.rmdir, self._path(path))

    def chmod(self, path: str, mode: int) -> None:
        self._meta(os.chmod, self._path(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self._meta(os.chown, self._path(path), uid, gid)

    def utimens(self, path: str, times: Optional[tuple[int, int]] = None) -> None:
        self._meta(os.utime, self._path(path), **({"ns": times} if times else {}))

    def unlink(self, path: str) -> None:
        with self.guard:
            self._writable()
            self._forget(self._path(path))
            os.unlink(self._path(path))

    def rename(self, old: str, new: str) -> None:
        with self.guard:
            self._writable()
            self._forget(self._path(new))
            os.rename(self._path(old), self._path(new))

    def truncate(self, path: str, length: int, fh: Optional[int] = None) -> None:
        with self.guard:
            self._writable()
            if fh is not None:
                os.ftruncate(fh, length)
                ino = os.fstat(fh).st_ino
            else:
                os.truncate(self._path(path), length)
                ino = os.lstat(self._path(path)).st_ino
            p = self.pending.get(ino)
            if p is not None:  # the pending blocks past the new end are gone, as are bytes
                p.size = length
                for b in [b for b in p.blocks if b * BLOCK >= length]:
                    del p.blocks[b]
                last = p.blocks.get(length // BLOCK)
                if last is not None:
                    last[length % BLOCK:] = bytes(BLOCK - length % BLOCK)

    # ---- files -----------------------------------------------------------------------------
    def _open(self, real: str, flags: int, mode: int = 0o644) -> int:
        # always read-write (blocks are completed from the file), never O_APPEND (the
        # kernel sends the offset); O_TRUNC and O_CREAT are metadata, done here at once
        fd = os.open(real, os.O_RDWR | (flags & (os.O_CREAT | os.O_EXCL)), mode)
        if flags & os.O_TRUNC:
            self.truncate("", 0, fd)
        return fd

    def open(self, path: str, flags: int) -> int:
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            self._writable()
        return self._open(self._path(path), flags)

    def create(self, path: str, mode: int, flags: int) -> int:
        self._writable()
        return self._open(self._path(path), flags | os.O_CREAT, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self.guard:
            p = self.pending.get(os.fstat(fh).st_ino)
            if p is None:
                return os.pread(fh, size, offset)
            end = min(offset + size, p.size)
            if offset >= end:
                return b""
            out = bytearray(os.pread(fh, end - offset, offset).ljust(end - offset, b"\0"))
            for b in range(offset // BLOCK, (end - 1) // BLOCK + 1):
                blk = p.blocks.get(b)
                if blk is not None:
                    lo, hi = max(offset, b * BLOCK), min(end, (b + 1) * BLOCK)
                    out[lo - offset:hi - offset] = blk[lo - b * BLOCK:hi - b * BLOCK]
            return bytes(out)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.guard:
            if self.cut:  # e.g. the dirty pages of a killed process's mapping, written back
                self.refused += len(data)
            self._writable()
            st = os.fstat(fh)
            p = self.pending.setdefault(st.st_ino, _Pending(st.st_size))
            end = offset + len(data)
            for b in range(offset // BLOCK, (end - 1) // BLOCK + 1):
                blk = p.blocks.get(b)
                if blk is None:  # the block as it reads now (synced data, zeros past it)
                    blk = bytearray(os.pread(fh, BLOCK, b * BLOCK).ljust(BLOCK, b"\0"))
                    p.blocks[b] = blk
                lo, hi = max(offset, b * BLOCK), min(end, (b + 1) * BLOCK)
                blk[lo - b * BLOCK:hi - b * BLOCK] = data[lo - offset:hi - offset]
            p.size = max(p.size, end)
            return len(data)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        if self.sync_delay:  # a slow disk: the writes stay pending (and a cut drops them)
            time.sleep(self.sync_delay)
        with self.guard:
            self._writable()
            p = self.pending.pop(os.fstat(fh).st_ino, None)
            if time.monotonic() < self.eio_until:  # the writeback failed: the data is gone
                self.failed_syncs += 1
                self.dropped += len(p.blocks) * BLOCK if p is not None else 0
                raise OSError(errno.EIO, "the disk failed the write")
            if p is not None:
                for b in sorted(p.blocks):
                    n = min(BLOCK, p.size - b * BLOCK)
                    if n > 0:
                        os.pwrite(fh, bytes(p.blocks[b][:n]), b * BLOCK)
        (os.fdatasync if datasync else os.fsync)(fh)

    def flush(self, path: str, fh: int) -> None:
        pass  # close(2) is no sync

    def release(self, path: str, fh: int) -> None:
        with self.guard:
            st = os.fstat(fh)
            if st.st_nlink == 0:  # unlinked and now closed: its inode number may be reused
                self.pending.pop(st.st_ino, None)
        os.close(fh)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        self._writable()
        fd = os.open(self._path(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # ---- the power cut -----------------------------------------------------------------------
    def cut_power(self) -> dict:
        with self.guard:
            self.cut = True
            self.dropped += sum(len(p.blocks) * BLOCK for p in self.pending.values())
            self.pending.clear()
        return self.stats()

    def power_on(self) -> dict:
        """Power is back (once every process that used the files is gone): writes are
        accepted again; only what was synced before the cut is there. The kernel drops
        its cached pages of a file when a new process opens it (no keep_cache)."""
        with self.guard:
            self.cut = False
        return self.stats()

    def fail_syncs(self, seconds: float) -> dict:
        """Every fsync of the next `seconds` fails with EIO and drops what it was to write."""
        with self.guard:
            self.eio_until = time.monotonic() + seconds
        return self.stats()

    def stats(self) -> dict:
        """What is pending now; what the cut and failed fsyncs dropped, what was refused
        after the cut."""
        with self.guard:
            return {"cut": self.cut, "files": len(self.pending),
                    "pending-bytes": sum(len(p.blocks) * BLOCK for p in self.pending.values()),
                    "dropped-bytes": self.dropped, "refused-bytes": self.refused,
                    "failed-syncs": self.failed_syncs}


def _command(ops: LazyOps, line: str) -> dict:
    """One control command: `cut`, `on`, `stats` or `eio SECONDS`; its JSON answer."""
    cmd, _, arg = line.partition(" ")
    if cmd == "eio":
        try:
            return ops.fail_syncs(float(arg))
        except ValueError:
            return {"error": f"eio takes seconds, not {arg!r}"}
    actions = {"cut": ops.cut_power, "on": ops.power_on, "stats": ops.stats}
    return actions[cmd]() if cmd in actions else {"error": f"unknown command {line!r}"}


def _serve_control(ops: LazyOps, sock_path: str) -> None:
    """One command a connection: `cut` (the power cut), `on` (power back), `stats`,
    `eio SECONDS` (failing fsyncs); answers one JSON line."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(8)

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            with conn:
                out = _command(ops, conn.makefile().readline().strip())
                conn.sendall((json.dumps(out) + "\n").encode())
    threading.Thread(target=loop, name="lazyfs-control", daemon=True).start()


def control(sock_path: str, command: str, timeout: float = 10.0) -> dict:
    """Send a command (`cut`, `on`, `stats`, `eio S`) to a running lazyfs; its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(command.encode() + b"\n")
        return json.loads(s.makefile().readline())


def unmount(mount: str) -> None:
    """fusermount3 -u, lazily (-z) if the mount is still busy; nothing if not mounted."""
    for args in (["-u"], ["-u", "-z"]):
        if not os.path.ismount(mount):
            return
        subprocess.run(["fusermount3", *args, mount], capture_output=True, timeout=30)


def _forget_writeback(path: str) -> None:
    """Flush a file's dirty pages (refused while the power is cut) and take the error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return  # gone, a socket or a FIFO: nothing cached to forget
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class LazyMount:
    """One lazyfs process over `mount`, storing into `backing`: started, cut, stopped by pid
    (and unmounted with fusermount3, also when the process is gone or hangs)."""

    def __init__(self, mount: str, backing: str, log_path: Optional[str] = None,
                 sync_delay: float = 0.0) -> None:
        self.mount, self.backing, self.sync_delay = mount, backing, sync_delay
        self.sock = os.path.join(tempfile.gettempdir(), f"lazyfs-{os.getpid()}-{id(self)}.sock")
        self.log_path = log_path or os.devnull
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 20.0) -> None:
        os.makedirs(self.mount, exist_ok=True)
        os.makedirs(self.backing, exist_ok=True)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "chaos.lazyfs", self.mount, self.backing, "--control",
                 self.sock, "--sync-delay", str(self.sync_delay)], cwd=root, stdout=log,
                stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not (os.path.ismount(self.mount) and os.path.exists(self.sock)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"lazyfs over {self.mount} did not come up (see {self.log_path})")
            time.sleep(0.02)  # polling for the mount, with a deadline

    def cut(self) -> dict:
        return control(self.sock, "cut")

    def power_on(self) -> dict:
        """Power back without a remount (the hosts' mount namespaces keep this mount).
        What a reboot forgets, the kernel still holds: the killed processes' dirty pages
        (of their mappings) and the errors of their refused writeback, which Linux reports
        to the next process that opens the file and fsyncs it (errseq: an error nobody saw
        is reported once), so a restarted peer's first journal fsync failed with EIO. Here
        every file is synced while the power is still cut (its dirty pages are written
        back and refused) and that error is taken; then writes are accepted again."""
        for folder, _, files in os.walk(self.mount):
            for name in files:
                _forget_writeback(os.path.join(folder, name))
        return control(self.sock, "on")

    def stats(self) -> dict:
        return control(self.sock, "stats")

    def fail_syncs(self, seconds: float) -> dict:
        return control(self.sock, f"eio {seconds}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (libfuse unmounts and exits), SIGKILL after `timeout`; then unmount."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
        finally:
            unmount(self.mount)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.sock)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.lazyfs", description=__doc__.split("\n")[0])
    ap.add_argument("mount")
    ap.add_argument("backing")
    ap.add_argument("--control", required=True, help="unix socket for `cut` and `stats`")
    ap.add_argument("--sync-delay", type=float, default=0.0,
                    help="seconds each fsync takes (a slow disk: a wider window for the cut)")
    args = ap.parse_args(argv)
    import mfusepy  # binds libfuse 3 through ctypes; only the fs process needs it
    ops = LazyOps(args.backing, args.sync_delay)
    _serve_control(ops, args.control)
    # foreground, multi-threaded; no direct_io and no writeback cache (see the docstring)
    mfusepy.FUSE(ops, args.mount, foreground=True, fsname="lazyfs", subtype="lazyfs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
