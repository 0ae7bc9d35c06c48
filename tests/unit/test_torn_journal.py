"""raft/torn.py: a journal cut back to its whole records (pure scan, and the file)."""
import os
import struct

from pysyncobj import journal as pj

from raft.torn import repair_torn_tail, whole_records


def _journal(path: str, n: int) -> list[int]:
    """A real pysyncobj file journal with n entries; the offset where each record starts."""
    j = pj.FileJournal(path)
    starts = []
    for i in range(1, n + 1):
        starts.append(j._FileJournal__currentOffset)
        j.add(b"command %d " % i * 40, i, 1)
    j.flush()
    j._destroy()
    return starts


def _entries(path: str) -> list[int]:
    j = pj.FileJournal(path)
    try:
        return [j[i][1] for i in range(len(j))]
    finally:
        j._destroy()


def test_a_whole_journal_is_left_alone(tmp_path):
    path = str(tmp_path / "raft.journal")
    _journal(path, 20)
    before = open(path, "rb").read()
    assert repair_torn_tail(path) is None
    assert open(path, "rb").read() == before
    assert _entries(path) == list(range(1, 21))


def test_a_page_never_written_cuts_the_journal_back_before_it(tmp_path):
    """The header (page 0) reached the disk, a later page did not (zeros): pysyncobj
    cannot start on it; cut back, it starts with the entries before the hole."""
    path = str(tmp_path / "raft.journal")
    starts = _journal(path, 60)
    hole = 8192
    with open(path, "r+b") as f:
        f.seek(hole)
        f.write(bytes(4096))
    first_torn = max(i for i, s in enumerate(starts) if s <= hole)  # the record over the hole
    try:
        pj.FileJournal(path)._destroy()
        raise AssertionError("pysyncobj read a torn journal")  # (the reason for repair)
    except (struct.error, IndexError, ValueError):
        pass
    scan = repair_torn_tail(path)
    assert scan is not None and scan.records == first_torn and "never written" in scan.torn
    assert _entries(path) == list(range(1, first_torn + 1))


def test_older_bytes_in_a_page_are_found_by_the_entry_order():
    rec = lambda idx, body: (struct.pack("<I", 16 + len(body)) + struct.pack("<QQ", idx, 1)
                             + body + struct.pack("<I", 16 + len(body)))
    data = bytes(40) + rec(1, b"a") + rec(2, b"b") + rec(7, b"c") + rec(8, b"d")
    scan = whole_records(data, 40, len(data))
    assert scan.records == 2 and "entry 7 follows entry 2" in scan.torn
    assert whole_records(data, 40, 40 + len(rec(1, b"a")) * 2) == (
        40 + len(rec(1, b"a")) * 2, 2, None)
    short = (bytes(40) + rec(1, b"a") + rec(2, b"b"))[:-3]
    assert "past the end" in whole_records(short, 40, len(short)).torn
