"""Files made durable for raft.fsync (raft/journal.py): fsync of a file or a directory,
and the rename of a new snapshot over the old one, patched into pysyncobj's serializer
on import, which for a durable member's snapshot (`DURABLE_DUMPS`) is on disk first."""
from __future__ import annotations

import os

from pysyncobj import serializer as pser

DURABLE_DUMPS: set[str] = set()  # snapshots of members with raft.fsync (absolute paths)
_plain_replace = pser.atomicReplace


def _durable_replace(src: str, dst: str) -> None:
    """pysyncobj renames a new snapshot (written by its forked serializer, or received
    from the leader) over the old one: for a durable member the new one is on disk before
    it replaces the old, and the rename is on disk before the journal is compacted."""
    if os.path.abspath(dst) in DURABLE_DUMPS:
        fsync_file(src)
        _plain_replace(src, dst)
        fsync_dir(os.path.dirname(os.path.abspath(dst)))
    else:
        _plain_replace(src, dst)


pser.atomicReplace = _durable_replace  # the forked serializer inherits it


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
