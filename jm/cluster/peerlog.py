"""The peer's own log: it rotates the file bin/jobmanager.sh (or systemd) redirected the
peer's stdout and stderr to (env.log.max-size, env.log.max-files)."""
from __future__ import annotations

import fcntl
import logging
import logging.handlers
import os
import stat
import sys
from typing import Optional


class _RotatingStdout(logging.handlers.RotatingFileHandler):
    """Rotates the file the peer's stdout and stderr were redirected to (bin/jobmanager.sh
    `>> log`): after each rollover fds 1 and 2 point at the new file, so what is printed
    there (tracebacks, warnings) follows, and no rotated file is held open."""

    fds: list = [1]  # the descriptors that were redirected to the log file

    def _open(self):
        """A new log file after a rollover is the peer's alone (mode 0600), as the first:
        it holds every tenant's job ids and errors."""
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def doRollover(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        super().doRollover()
        if self.stream is not None:
            fd = self.stream.fileno()
            for target in self.fds:
                try:
                    os.dup2(fd, target)
                except OSError:
                    pass



def peer_log_handler(max_size: int, max_files: int) -> Optional[logging.Handler]:
    """A rotating handler on the file stdout goes to, if stdout is a regular file and
    env.log.max-size is set; None otherwise (log to stdout as it is)."""
    if max_size <= 0:
        return None
    try:
        st = os.fstat(1)
        if not stat.S_ISREG(st.st_mode):
            return None
        path = os.readlink("/proc/self/fd/1")
        same = os.stat(path)
    except OSError:
        return None
    if (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
        return None  # the file was moved or deleted
    handler = _RotatingStdout(path, maxBytes=max_size, backupCount=max_files, encoding="utf-8")
    handler.fds = [1, 2] if _same_file(2, st) else [1]
    # the handler appends through its own descriptor: fds 1 and 2 must append too, or a
    # file opened for writing (systemd `StandardOutput=file:`) has what is written there
    # (a `kill -USR2` stack dump, a traceback) land over the handler's lines
    for fd in handler.fds:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            if not flags & os.O_APPEND:
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)
        except OSError:
            pass
    return handler


def _same_file(fd: int, st: os.stat_result) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def rfc3339(created: float) -> str:
    """A log record's time in UTC, RFC 3339 with milliseconds: 2026-11-26T16:20:00.123Z
    (log collectors parse it without knowing the peer's time zone)."""
    import datetime
    when = datetime.datetime.fromtimestamp(created, datetime.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class LogFormat(logging.Formatter):
    """One line per event. text: `time level logger: message [job=... epoch=...]`;
    json: one JSON object per line with time (UTC, RFC 3339), level, logger, node,
    message, job, epoch."""

    def __init__(self, kind: str, node: str) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.kind, self.node = kind, node

    def format(self, record: logging.LogRecord) -> str:
        job, epoch = getattr(record, "job", None), getattr(record, "epoch", None)
        if self.kind == "json":
            import json
            out = {"time": rfc3339(record.created), "level": record.levelname,
                   "logger": record.name, "node": self.node, "message": record.getMessage()}
            if job is not None:
                out.update(job=job, epoch=epoch)
            if record.exc_info:
                out["traceback"] = self.formatException(record.exc_info)
            return json.dumps(out)
        line = super().format(record)
        return line if job is None else f"{line} [job={job} epoch={epoch}]"


def setup_logging(level: str, kind: str = "text", node: str = "", max_size: int = 0,
                   max_files: int = 1) -> None:
    # stdout redirected to a file (bin/jobmanager.sh): that file rotates (env.log.max-size)
    handler = peer_log_handler(max_size, max_files) or logging.StreamHandler(sys.stdout)
    handler.setFormatter(LogFormat(kind, node))
    logging.basicConfig(level=getattr(logging, level), handlers=[handler])
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
