"""The audit log of one peer: who did what to which job, session or artifact, through
this peer (jm/cluster/tenancy.py writes an entry for every write request the REST layer
took, accepted or refused). Each entry is a JSON line in `<log dir>/audit.log` (rotated
at MAX_BYTES, one old file kept) and a line of the peer's log (logger `jm.audit`);
`GET /audit` reads the newest entries back, this peer's merged with every other live
peer's (`merge_newest`)."""
from __future__ import annotations

import json
import logging
import os
import heapq
import threading
from collections import deque
from typing import Any, Iterable, Optional

log = logging.getLogger("jm.audit")

MAX_BYTES = 16 * 1024 * 1024   # audit.log is rotated to audit.log.1 beyond it
MAX_READ = 10_000              # entries one GET /audit may return


class AuditLog:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "audit.log")
        self._lock = threading.Lock()
        self._file: Optional[Any] = None

    def write(self, entry: dict) -> None:
        line = json.dumps(entry, separators=(",", ":"), sort_keys=True, default=str)
        log.info("audit %s", line)
        try:
            with self._lock:
                f = self._open()
                f.write(line + "\n")
                f.flush()
                if f.tell() > MAX_BYTES:
                    f.close()
                    self._file = None
                    os.replace(self.path, self.path + ".1")
        except OSError as exc:  # a full disk loses audit lines, never a request
            log.warning("audit.log not written: %s", exc)

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
        for path in (self.path + ".1", self.path):
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


def merge_newest(logs: Iterable[list[dict]], limit: int) -> list[dict]:
    """The newest `limit` entries (oldest first) of several peers' answers, each oldest
    first: by their UTC time stamps (ISO 8601, so they compare as text), then peer."""
    def order(e: dict) -> tuple:
        return (str(e.get("time") or ""), str(e.get("peer") or ""))
    merged = heapq.merge(*(sorted(log_, key=order) for log_ in logs), key=order)
    return list(deque(merged, maxlen=max(1, min(limit, MAX_READ))))
