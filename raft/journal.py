"""Durable acknowledgements for pysyncobj (raft.fsync): its file journal is an mmap it never
syncs, so a power cut of a majority could lose entries it had acknowledged.

The rule kept here: an entry counts toward a majority only once it is on that member's
disk. A follower's "I have up to N" (and a vote) leaves only after its journal is synced
(every message pysyncobj sends goes through `SyncingTransport.send`); a leader counts its
own copy when it moves its commit index, which first waits for its sync, started in the
background when its append-entries left, so that the leader's write and its followers'
overlap (as the Raft paper allows).
The messages of one pysyncobj tick are held and sent together after a single sync: one
fsync covers every entry the tick appended (group commit). The fsyncs run on a thread of
their own; pysyncobj's tick thread waits for them where it must, the asyncio event loop
never does.

Also durable: the term and vote (written and fsynced, then renamed, before a vote leaves),
and a snapshot (raft.dump) before the journal entries it replaces are dropped.
The syncer thread and the disk policy are in raft/syncer.py (DurableJournal's mixin), the
fsync of files and the snapshot's durable rename in raft/durablefiles.py.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
from typing import Any, Optional

from pysyncobj import journal as pj

from raft.door import HookedJournal, journal_of
from raft.durablefiles import fsync_dir, fsync_file
from raft.prevote import PRE_VOTE, PRE_VOTE_RESPONSE
from raft.relay import MESSAGE as RELAY
from raft.syncer import JournalFailed, JournalSyncer  # noqa: F401  (JournalFailed: re-exported)
from raft.transport import WireTransport

log = logging.getLogger("jm.raft")


class UnreadableSnapshot(JournalFailed):
    """The member's snapshot exists but cannot be read: it stops instead of starting
    from an empty state."""


RESERVE_CHUNK = 4 * 1024 * 1024  # bytes of journal written ahead at a time


def _write_zeros(fd: int, start: int, end: int) -> None:
    """Zeros over [start, end) of the file, all of them or an OSError (a short write on a
    full disk is an ENOSPC here)."""
    block = bytes(min(end - start, 1 << 20))
    while start < end:
        n = os.pwrite(fd, block[:end - start], start)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        start += n


class DurableMetaStorer(pj.MetaStorer):
    """The term, vote and commit index: a new file, fsynced, renamed over the old one.
    A disk that refuses (full) holds the member until it accepts (`syncer.retry`)."""

    def __init__(self, path: str, syncer: JournalSyncer) -> None:
        super().__init__(path)
        self.syncer = syncer

    def storeMeta(self, meta: dict) -> None:
        self.syncer.retry(lambda: self._store(meta), "the Raft term and vote")

    def _store(self, meta: dict) -> None:
        path = self.getPath()
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(pj.dumps(meta))
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a partial file would only take room
            raise
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))


class DurableJournal(HookedJournal):
    """pysyncobj's file journal with a syncer (raft/syncer.py): `syncer.sync()` returns
    once everything written before the call is on disk; `syncer.sync_soon()` starts that
    without waiting (a leader's own copy is written out while its followers write
    theirs)."""

    def __init__(self, path: str, dump_path: Optional[str]) -> None:
        created = not os.path.exists(path)
        super().__init__(path)
        self.syncer = JournalSyncer(lambda: self.fd)
        self.use_meta_storer(DurableMetaStorer(path + ".meta", self.syncer))
        self.dump_path = dump_path
        self._zeroed = 0          # the file is written (with zeros) up to here
        if created:
            self.syncer.wrote()
            self.syncer.sync()
            fsync_dir(os.path.dirname(os.path.abspath(path)))

    # ---- room written ahead ------------------------------------------------------------
    def _reserve(self, size: int) -> None:
        """Blocks written (with zeros) and synced ahead of the journal's end, a chunk at a
        time: an fdatasync of entries written into them has no file metadata to commit
        (no block allocation, no size change), so it does not wait for the filesystem's
        journal, nor for other files' data that this would flush (ext4 data=ordered)."""
        need = self.end_offset + size + 4096
        if need <= self._zeroed:
            return
        start = max(self._zeroed, self.end_offset)
        fd = self.fd
        before = os.fstat(fd).st_size
        # a chunk ahead; on a full disk just what this entry needs, so that the journal
        # does not take the last free blocks from the other files of the member
        for end in dict.fromkeys((max(need, self._zeroed + RESERVE_CHUNK), need)):
            try:
                # the blocks first, with write(2): a full disk is an ENOSPC here, where a
                # store into an unbacked page of the mapping would be a SIGBUS
                _write_zeros(fd, start, end)
            except OSError as exc:
                with contextlib.suppress(OSError):  # give back what the try took
                    os.ftruncate(fd, max(before, len(self.mapping)))
                if exc.errno != errno.ENOSPC or end == need:
                    raise
                continue
            self.syncer.sync_fd(fd)  # (it also writes out the entries in the mapping)
            break
        mm = self.mapping
        if len(mm) < end:  # (mm.size() is the file's size, len(mm) the mapping's)
            mm.resize(end)  # the file is that long already: only the mapping grows
        self._zeroed = end

    # ---- what makes the journal dirty ----------------------------------------------
    def add(self, command: Any, idx: int, term: int) -> None:
        self.syncer.retry(lambda: self._reserve(len(command) + 24), "the Raft journal")
        super().add(command, idx, term)
        self.syncer.wrote(entries=1)

    def clear(self) -> None:
        self._snapshot_durable()  # the entries dropped here live on in the snapshot
        super().clear()
        self.syncer.wrote()

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        super().deleteEntriesFrom(entryFrom)
        self.syncer.wrote()

    def deleteEntriesTo(self, entryTo: int) -> None:
        self._snapshot_durable()
        super().deleteEntriesTo(entryTo)
        self.syncer.sync()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        """pysyncobj calls this when the commit index moves, before the entries up to it
        are applied and answered: on a leader its own copy counts toward the majority, so
        it is on disk first (with one member no message would have synced it). A disk
        that refuses the sync holds the member's Raft here (no answers, no applies, no
        heartbeats: its lease runs out and its jobs move) until it syncs again."""
        self.syncer.retry(self.syncer.sync, "the Raft journal")
        super().setRaftCommitIndex(raftCommitIndex)

    def _snapshot_durable(self) -> None:
        if self.dump_path:
            fsync_file(self.dump_path)
            fsync_dir(os.path.dirname(os.path.abspath(self.dump_path)))

    def _destroy(self) -> None:
        try:
            if self.syncer.failed is None:  # (a failed journal holds nothing more to sync)
                self.syncer.sync()
        finally:
            self.syncer.close()
            super()._destroy()


# A leader's entries may leave before they are on its disk: they count toward a majority
# only through the followers' answers and its own commit index (which waits for its sync).
# A pre-vote speaks for no entry (the election it may lead to waits as usual), nor do
# submissions a follower relays to the leader (raft/relay.py).
_NO_WAIT = frozenset({"append_entries", "apply_command_response", PRE_VOTE,
                      PRE_VOTE_RESPONSE, RELAY})


class SyncingTransport(WireTransport):
    """pysyncobj's TCP transport: a message that speaks for this member's log (an
    answer to append-entries, a vote) leaves only once the journal is on disk; a
    leader's append-entries start its sync and leave at once. During a tick of
    a durable RaftNode (raft/raftnode.py) messages are held and sent together after one
    sync."""

    _held: Optional[list] = None

    def _journal(self) -> Optional[DurableJournal]:
        journal = journal_of(self._syncObj)
        return journal if isinstance(journal, DurableJournal) else None

    def _before(self, messages: list) -> None:
        journal = self._journal()
        if journal is None:
            return
        if all(isinstance(m, dict) and m.get("type") in _NO_WAIT for m in messages):
            journal.syncer.sync_soon()
        else:
            journal.syncer.sync()

    def hold(self) -> None:
        self._held = []

    def release(self) -> None:
        held, self._held = self._held, None
        if held:
            self._before([message for _, message in held])
            for node, message in held:
                super().send(node, message)

    def send(self, node: Any, message: Any) -> Any:
        held = self._held
        if held is not None:
            held.append((node, message))
            return True
        self._before([message])
        return super().send(node, message)
