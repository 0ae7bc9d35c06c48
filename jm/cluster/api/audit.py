"""The audit log of one peer: who did what to which job, session or artifact, through
this peer (jm/cluster/api/auditapi.py writes an entry for every write request the REST layer
took, accepted or refused; requests without valid credentials are counted per source,
`RefusedTally`). Each entry is a JSON line in `<log dir>/audit.log` (rotated at
MAX_BYTES, `rest.audit.max-files` old files kept), a line of the peer's log (logger
`jm.audit`) and, with `rest.audit.syslog`, a syslog message (for shipping off the host);
`GET /audit` reads the newest entries back, this peer's merged with every other live
peer's (`merge_newest`)."""
from __future__ import annotations

import heapq
import json
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from jm.configvalues import syslog_address
from jm.fastjson import dumps_ascii

log = logging.getLogger("jm.audit")

MAX_BYTES = 16 * 1024 * 1024   # audit.log is rotated to audit.log.1 beyond it
MAX_READ = 10_000              # entries one GET /audit may return


@dataclass
class _Tally:
    since: float  # when this source's window began
    count: int    # its refusals in the window not written yet


class RefusedTally:
    """Requests without valid credentials, counted per source address instead of an entry
    each (a flood of them would push the entries that matter out of the rotated files):
    a source's first refusal is written at once; the others of the next `window` seconds
    are counted and written as one entry when the window is over (at the next request
    after it). At most `max_sources` sources are told apart; others count as "other".
    Pure: the time is passed in; the entries to write are returned."""

    def __init__(self, window: float = 60.0, max_sources: int = 1024) -> None:
        self.window, self.max_sources = window, max_sources
        self._by: dict[str, _Tally] = {}

    def refused(self, remote: Optional[str], now: float) -> list[dict]:
        source = remote or "-"
        if source not in self._by and len(self._by) >= self.max_sources:
            source = "other"
        out = self.due(now)
        tally = self._by.get(source)
        if tally is None:
            self._by[source] = _Tally(now, 0)
            out.append(self._entry(source, 1, now, now))
        else:
            tally.count += 1
        return out

    def due(self, now: float) -> list[dict]:
        """The counts of the windows that are over (their sources forgotten)."""
        out = []
        for source, tally in list(self._by.items()):
            if now - tally.since >= self.window:
                del self._by[source]
                if tally.count:
                    out.append(self._entry(source, tally.count, tally.since, now))
        return out

    @staticmethod
    def _entry(source: str, count: int, since: float, now: float) -> dict:
        return {"unauthenticated": count, "remote": source, "status": 401,
                "seconds": round(now - since, 1)}


class AuditLog:
    def __init__(self, directory: str, max_files: int = 5,
                 sink: Optional[logging.Handler] = None) -> None:
        self.path = os.path.join(directory, "audit.log")
        self.max_files = max(1, max_files)  # rotated files kept: audit.log.1 .. .N
        self.sink = sink
        self._lock = threading.Lock()
        self._file: Optional[Any] = None

    def write(self, entry: dict) -> None:
        line = dumps_ascii(entry, sort_keys=True, default=str)
        log.info("audit %s", line)
        if self.sink is not None:
            self.sink.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO,
                                                    "levelname": "INFO", "name": "jm.audit"}))
        try:
            with self._lock:
                f = self._open()
                f.write(line + "\n")
                f.flush()
                if f.tell() > MAX_BYTES:
                    f.close()
                    self._file = None
                    self._rotate()
        except OSError as exc:  # a full disk loses audit lines, never a request
            log.warning("audit.log not written: %s", exc)

    def _files(self) -> list[str]:
        """The log's files, oldest first."""
        return [f"{self.path}.{i}" for i in range(self.max_files, 0, -1)] + [self.path]

    def _rotate(self) -> None:
        for i in range(self.max_files, 1, -1):  # .N-1 -> .N (the oldest .N is dropped)
            if os.path.exists(f"{self.path}.{i - 1}"):
                os.replace(f"{self.path}.{i - 1}", f"{self.path}.{i}")
        os.replace(self.path, self.path + ".1")

    def _open(self):
        if self._file is None or self._file.closed:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            # the peer's alone (job processes may run as other users of this host)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)  # (a file an older build made readable)
            self._file = open(fd, "a", encoding="utf-8")
        return self._file

    def read(self, limit: int, keep) -> list[dict]:
        """The newest `limit` entries (oldest first) for which `keep(entry)` holds."""
        out: deque = deque(maxlen=max(1, min(limit, MAX_READ)))
        for path in self._files():
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        try:
                            entry = json.loads(line)
                        except ValueError:
                            continue  # a line cut by a crash
                        if isinstance(entry, dict) and keep(entry):
                            out.append(entry)
            except FileNotFoundError:
                continue
        return list(out)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if self.sink is not None:
            self.sink.close()


def syslog_sink(address: str) -> logging.Handler:
    """A syslog handler (facility auth, tag jobmanager-audit) for `rest.audit.syslog`.
    OSError if a Unix socket's path cannot be reached."""
    import logging.handlers
    handler = logging.handlers.SysLogHandler(syslog_address(address),
                                             logging.handlers.SysLogHandler.LOG_AUTH)
    handler.ident = "jobmanager-audit: "
    return handler


def merge_newest(logs: Iterable[list[dict]], limit: int) -> list[dict]:
    """The newest `limit` entries (oldest first) of several peers' answers, each oldest
    first: by their UTC time stamps (ISO 8601, so they compare as text), then peer."""
    def order(e: dict) -> tuple:
        return (str(e.get("time") or ""), str(e.get("peer") or ""))
    merged = heapq.merge(*(sorted(log_, key=order) for log_ in logs), key=order)
    return list(deque(merged, maxlen=max(1, min(limit, MAX_READ))))
