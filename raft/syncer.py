"""The Raft journal's disk policy (raft/journal.py's DurableJournal holds one as
`syncer`): a syncer thread that fdatasyncs the journal once for every change made before
a `sync()` (group commit), fail-stop when an fdatasync fails, and waiting out a disk that
refuses writes (full) instead of failing."""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Optional

log = logging.getLogger("jm.raft")


class JournalFailed(OSError):
    """The journal's fdatasync failed once: it is never trusted again in this process."""


class JournalSyncer:
    """`sync()`, `sync_soon()` and their syncer thread (`_sync_loop`), `retry`. The
    journal says when it changed (`wrote`); `fd()` is its file's descriptor."""

    def __init__(self, fd: Callable[[], int]) -> None:
        self.fd = fd
        self.trouble: Optional[str] = None  # what the disk refuses now (None: all well)
        # a failed fdatasync of the journal, for good: Linux may have dropped the pages it
        # could not write and marked them clean, so a later fdatasync that succeeds says
        # nothing about them (PostgreSQL's "fsyncgate"). The member stops (fail-stop) and
        # its restart reads what is on disk.
        self.failed: Optional[str] = None
        self.on_failed: Callable[[str], None] = lambda why: None
        self.syncs = 0            # fsyncs of the journal
        self.synced_entries = 0   # entries they covered
        self.sync_seconds = 0.0
        self._entries = 0         # entries added so far
        self._written = 0         # changes made so far (tick thread)
        self._synced = 0          # changes known to be on disk
        self._synced_entries_mark = 0
        self._want = False
        self._closed = False
        self._giving_up = False   # the member is stopping: a write waiting for room fails
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._sync_loop, name="raft-fsync", daemon=True)
        self._thread.start()

    def wrote(self, entries: int = 0) -> None:
        """(Tick thread) The journal changed: `entries` appended, or entries dropped."""
        self._entries += entries
        self._written += 1

    def close(self) -> None:
        """The journal is closed: the syncer thread ends, a sync waiting fails."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def dirty(self) -> bool:
        return self._synced < self._written

    def close_soon(self) -> None:
        """From any thread: the member is stopping, so a write waiting for the disk
        (`retry`) gives up instead of holding the stop."""
        self._giving_up = True

    def retry(self, write, what: str) -> None:
        """Run `write` until the disk accepts it: a full disk holds this member's Raft
        (no answers, no votes, no heartbeats: its lease runs out and its jobs move) and
        says so (`trouble`, /healthz, the log every 10 s) until there is room again."""
        delay, logged = 0.01, 0.0
        while True:
            try:
                write()
            except OSError as exc:
                if self._closed or self._giving_up or isinstance(exc, JournalFailed):
                    raise
                self.trouble = f"{what} cannot be written: {exc}"
                if time.monotonic() - logged > 10:
                    log.error("%s; this member's Raft waits for its disk", self.trouble)
                    logged = time.monotonic()
                time.sleep(delay)
                delay = min(1.0, delay * 2)
                continue
            if self.trouble is not None:
                log.warning("the Raft journal's disk accepts writes again")
                self.trouble = None
            return

    # ---- the sync --------------------------------------------------------------------
    def sync_soon(self) -> None:
        if self.dirty:
            with self._cond:
                self._want = True
                self._cond.notify_all()

    def sync(self) -> None:
        """Everything written before this call is on disk when it returns (JournalFailed
        if the disk refused, now and for every later call: then nothing that depends on
        it may be sent)."""
        target = self._written
        if self.failed is not None:
            raise JournalFailed(self.failed)
        if self._synced >= target:
            return
        with self._cond:
            self._want = True
            self._cond.notify_all()
            while self._synced < target:
                if self.failed is not None:
                    raise JournalFailed(self.failed)
                if self._closed:
                    raise OSError("the Raft journal is closed")
                self._cond.wait(1.0)

    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                while not self._want and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._want = False
                target, entries = self._written, self._entries
            start = time.perf_counter()
            try:
                # the journal is a shared file mapping: its written pages are the file's
                # page cache, and fdatasync writes them out with the file's size (what
                # msync MS_SYNC of the whole mapping does on Linux)
                self.sync_fd(self.fd())
            except (OSError, ValueError):
                return
            with self._cond:
                if target > self._synced:
                    self._synced = target
                    self.syncs += 1
                    self.synced_entries += entries - self._synced_entries_mark
                    self._synced_entries_mark = entries
                    self.sync_seconds += time.perf_counter() - start
                self._cond.notify_all()

    def sync_fd(self, fd: int) -> None:
        """fdatasync the journal's file; if it fails, the journal fails for good (and
        JournalFailed is raised): whatever it was to write may be lost, though the pages
        read back as written."""
        if self.failed is not None:
            raise JournalFailed(self.failed)
        try:
            os.fdatasync(fd)
        except (OSError, ValueError) as exc:
            if self._closed:  # (the member is stopping: its file was closed under it)
                raise
            self.fail(f"the Raft journal could not be synced ({exc}): this member "
                       "stops; restarted, it recovers from what its disk holds")
            raise JournalFailed(self.failed) from exc

    def fail(self, why: str) -> None:
        """The member stops for good, saying why (`on_failed`)."""
        with self._cond:
            if self.failed is not None:  # (both threads saw it: said once)
                return
            self.failed = self.trouble = why
            self._cond.notify_all()
        log.critical("%s", why)
        try:
            self.on_failed(why)
        except Exception:
            log.exception("reporting the journal's failure")

    def stats(self) -> dict:
        return {"fsyncs": self.syncs, "entries": self.synced_entries,
                "fsync-seconds": round(self.sync_seconds, 3)}
