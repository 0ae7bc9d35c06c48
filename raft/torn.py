"""A journal whose tail is torn starts with its whole records only.

pysyncobj's file journal is a header (with the offset where the records end) followed by
records `size | index, term, command | size`. A power cut in the middle of a write-out can
leave the header on disk but not every page of the records it covers (disks write pages,
or sectors, in any order): the missing ones read as zeros, or as older bytes. pysyncobj
then fails at start-up on a record it cannot unpack, and the member never starts again.

None of those records was acknowledged by this member: it answers for an entry only once
an fdatasync covering it returned, and that writes every page. So the journal is cut back
to its last whole record (the header's end offset rewritten and synced), and Raft brings
the member up to date from the leader, as after any lag. `whole_records` is pure.
"""
from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple, Optional

from pysyncobj import journal as pj

log = logging.getLogger("jm.raft")

_SIZE = struct.Struct("<I")
_ENTRY = struct.Struct("<QQ")   # raft index, term


class Scan(NamedTuple):
    end: int                # offset just past the last whole record
    records: int            # whole records before it
    torn: Optional[str]     # why the record at `end` is not whole (None: every record is)


def whole_records(data: bytes, first: int, last: int) -> Scan:
    """Walk the records of a journal image from `first` to `last` (the header's end
    offset): where the first record that is not whole starts, and why it is not."""
    offset, records, prev_idx = first, 0, None
    while offset < last:
        why = _bad_record(data, offset, last, prev_idx)
        if why is not None:
            return Scan(offset, records, why)
        size = _SIZE.unpack_from(data, offset)[0]
        prev_idx = _ENTRY.unpack_from(data, offset + 4)[0]
        offset += size + 8
        records += 1
    return Scan(offset, records, None)


def _bad_record(data: bytes, offset: int, last: int, prev_idx: Optional[int]) -> Optional[str]:
    if offset + 4 > last:
        return "a record's size runs past the end"
    size = _SIZE.unpack_from(data, offset)[0]
    if size < _ENTRY.size:
        return f"a record of {size} bytes (zeros: a page never written?)"
    if offset + size + 8 > last:
        return f"a record of {size} bytes runs past the end ({last})"
    if _SIZE.unpack_from(data, offset + 4 + size)[0] != size:
        return "a record's sizes differ (a page of it never written?)"
    idx = _ENTRY.unpack_from(data, offset + 4)[0]
    if prev_idx is not None and idx != prev_idx + 1:
        return f"entry {idx} follows entry {prev_idx}"
    return None


def repair_torn_tail(path: str) -> Optional[Scan]:
    """Cut the journal at `path` back to its whole records, if its tail is torn (the
    header rewritten and fsynced); the scan when it was, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    header = pj.LAST_RECORD_OFFSET_OFFSET
    if len(data) < header + 4 or not data.startswith(pj.APP_NAME):
        return None  # not a journal pysyncobj wrote (it says so itself)
    last = min(_SIZE.unpack_from(data, header)[0], len(data))
    scan = whole_records(data, pj.FIRST_RECORD_OFFSET, last)
    if scan.torn is None and last == _SIZE.unpack_from(data, header)[0]:
        return None
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, _SIZE.pack(scan.end), header)
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning("the Raft journal %s was torn after %d whole entries (%s): cut back to "
                "them; none of the rest was acknowledged, the leader sends them again",
                path, scan.records, scan.torn or "its end offset runs past the file")
    return scan
