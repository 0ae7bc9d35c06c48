"""Reading and copying files a job could have written, without trusting them (issue 28).

A job writes in its run folder (result.json, error.json, its Spark details) and in its
checkpoints, which savepoints copy to the shared storage and restores copy back. A job
may leave anything there: a symbolic link to /dev/zero or to a file only the peer may
read, a FIFO nobody writes, a file of many gigabytes. So a file is opened without
following a symbolic link (O_NOFOLLOW) and without blocking (O_NONBLOCK: a FIFO opens at
once), must be a regular file once open (fstat, so the check and the read are about the
same file), and is read to at most its limit + 1 byte, whatever its size says (a size
can change while it is read). Copies take regular files only; anything else is left out
and named in the log.
"""
from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import shutil
import signal
import stat
import sys
import time
from typing import Any, Optional

from jm.cluster.peerlog import rfc3339
from jm.policy.jobs.bounds import bounded_failure
from jm.policy.jobs.logtee import frame, split_lines

log = logging.getLogger("jm.jobfiles")
_CHUNK = 1 << 20
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """A file that is there but is not read: `why` completes "the file ..."; `size` is
    set when it is only too large."""

    def __init__(self, why: str, size: Optional[int] = None) -> None:
        super().__init__(why)
        self.why, self.size = why, size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """An open descriptor on `path` and its fstat; Refused unless it is a regular file
    reached without a symbolic link in its last component; FileNotFoundError if absent."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise Refused("is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused(f"is {_kind(st.st_mode)}, not a regular file")
    return fd, st


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the regular file `path`; Refused (with its size) beyond `limit`."""
    fd, st = open_regular(path)
    try:
        chunks, n = [], 0
        while n <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - n))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
        if n > limit:
            size = max(st.st_size, n)
            raise Refused(f"is {size} bytes, more than {limit}", size)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: str, limit: int) -> tuple[Any, Optional[Refused]]:
    """(the JSON in `path`, None); (None, None) if it is absent, unreadable or not JSON;
    (None, Refused) if it is not a regular file or over `limit` bytes. Blocking: call it
    in a thread."""
    try:  # (a NaN or Infinity, not JSON, is kept as a string: answers stay valid JSON)
        return json.loads(read_bounded(path, limit), parse_constant=str), None
    except Refused as exc:
        return None, exc
    except (OSError, ValueError):
        return None, None


def copy_regular(src: str, dst: str) -> bool:
    """Copy the regular file `src` to `dst` (contents, mode, times; never through a
    symbolic link); False, leaving nothing, if it is not one (named in the log) or has
    gone."""
    try:
        fd, st = open_regular(src)
    except Refused as exc:
        log.warning("not copied: %s %s", src, exc.why)
        return False
    except FileNotFoundError:  # removed meanwhile (Spark's log maintenance)
        return False
    try:
        with os.fdopen(fd, "rb", closefd=False) as fin, open(dst, "wb") as fout:
            shutil.copyfileobj(fin, fout, _CHUNK)
            os.fchmod(fout.fileno(), stat.S_IMODE(st.st_mode))
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        return True
    finally:
        os.close(fd)


def copy_tree(src: str, dst: str) -> None:
    """Copy the folders and regular files under `src` to the new folder `dst`; symbolic
    links (to files or folders), FIFOs, devices and sockets are left out."""
    for root, dirs, files in os.walk(src):  # (never descends a linked folder)
        rel = os.path.relpath(root, src)
        target = dst if rel == "." else os.path.join(dst, rel)
        os.makedirs(target, exist_ok=True)
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):
                log.warning("not copied: %s is a symbolic link", os.path.join(root, name))
                dirs.remove(name)
        for name in files:
            copy_regular(os.path.join(root, name), os.path.join(target, name))


def read_result(run_dir: str, limit: int) -> tuple[Any, Optional[str]]:
    """The result the job wrote (result.json): (value, None), or (None, why) for a file
    over `limit` (jobmanager.result.max-size: the job process checks what it returns, but
    a job can write the file itself) or not a regular file."""
    out, refused = read_json(os.path.join(run_dir, "result.json"), limit + 64)
    if refused is not None:
        return None, "ValueError: the job's result.json " + (
            refused.why if refused.size is None else f"is {refused.size} bytes, more "
            f"than jobmanager.result.max-size ({limit} bytes)")
    return (out if isinstance(out, dict) else {}).get("result"), None


def read_failure(run_dir: str, code: int, sig: int, limit: int) -> dict:
    """The failure the job wrote (error.json), bounded by `limit`
    (jobmanager.failure.max-size); the exit's description when there is none (or it is
    too large or not a regular file)."""
    out, refused = read_json(os.path.join(run_dir, "error.json"), 8 * limit + 4096)
    if refused is not None:
        return {"exception": f"{describe_exit(code, sig)}; its error.json " + (
            refused.why if refused.size is None else f"({refused.size} bytes) is over "
            f"what jobmanager.failure.max-size ({limit} bytes) allows: see the job's "
            "log"), "traceback": ""}
    if not isinstance(out, dict):
        return {"exception": describe_exit(code, sig), "traceback": ""}
    return bounded_failure(out, limit)


def describe_exit(code: int, sig: int) -> str:
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"the job process died with signal {name}"
    return f"the job process exited with code {code}"


# ---- job output on the peer's stdout (jobmanager.job-log.stdout) --------------------------
def read_from(path: str, offset: int, limit: int = _CHUNK) -> tuple[bytes, int]:
    """(what `path` holds from `offset`, at most `limit` bytes; the offset after it). A
    file cut shorter (the log cap) is followed from its new end. Blocking: in a thread."""
    try:
        fd, st = open_regular(path)
    except (Refused, OSError):
        return b"", offset
    try:
        if st.st_size < offset:
            return b"", st.st_size
        data = os.pread(fd, limit, offset)
        return data, offset + len(data)
    finally:
        os.close(fd)


class StdoutTee:
    """Follows the log file of a job's running attempt and writes its new lines to the
    peer's stdout, each framed with the job and the attempt (jm/policy/jobs/logtee.py); the
    lines left when the attempt ends are written by `stop`."""

    POLL = 0.25  # seconds between two looks at the file

    def __init__(self, conf: Any, node: str, write: Any = None) -> None:
        self.enabled = bool(conf["jobmanager.job-log.stdout"])
        self.kind, self.node = conf["jobmanager.log.format"], node
        self.write = write or _write_stdout
        self.task: Any = None
        self._where: Any = None  # (path, job, attempt, offset, partial line)

    def follow(self, path: str, job: str, attempt: str) -> None:
        if self.enabled:
            self._where = [path, job, attempt, 0, b""]
            self.task = asyncio.create_task(self._follow())

    def pending(self) -> list:
        return [self.task] if self.task is not None and not self.task.done() else []

    async def stop(self) -> None:
        """The attempt ended: its last lines, the partial one too."""
        if self.task is None:
            return
        task, self.task = self.task, None
        task.cancel()
        await asyncio.wait([task])  # (a look half done is not counted: read again)
        await self._once(final=True)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.POLL)  # (a look at the file)
            await self._once()

    async def _once(self, final: bool = False) -> None:
        path, job, attempt, offset, rest = self._where
        data, offset = await asyncio.to_thread(read_from, path, offset)
        lines, rest = split_lines(rest, data)
        if final and rest:
            lines, rest = lines + [rest], b""
        self._where[3:] = [offset, rest]
        if lines:
            now = rfc3339(time.time()) if self.kind == "json" else None
            self.write("".join(frame(line, job, attempt, self.kind, self.node, now) + "\n"
                               for line in lines))


def _write_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed stdout: the job's log has it all anyway
        pass
