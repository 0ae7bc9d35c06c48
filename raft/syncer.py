"""The Raft journal's disk policy (a mixin of raft/journal.py's DurableJournal): a
syncer thread that fdatasyncs the journal once for every change made before a `sync()`
(group commit), fail-stop when an fdatasync fails, and waiting out a disk that refuses
writes (full) instead of failing."""
from __future__ import annotations

import logging
import os
import time

log = logging.getLogger("jm.raft")


class JournalFailed(OSError):
    """The journal's fdatasync failed once: it is never trusted again in this process."""


class JournalSyncer:
    """`sync()`, `sync_soon()` and their syncer thread (`_sync_loop`), `retry`; the
    attributes they use are set by DurableJournal.__init__."""

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
                self._sync_or_fail(self.fd)
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

    def _sync_or_fail(self, fd: int) -> None:
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
            self._fail(f"the Raft journal could not be synced ({exc}): this member "
                       "stops; restarted, it recovers from what its disk holds")
            raise JournalFailed(self.failed) from exc

    def _fail(self, why: str) -> None:
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
