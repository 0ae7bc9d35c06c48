"""Unit tests for jm/cluster/jobs/savepoint.py on a checkpoint laid out like Spark's."""
from __future__ import annotations

import json
import os

import pytest

from jm.cluster.jobs.savepoint import (SavepointError, last_committed, new_location,
                                       read_metadata, restore, snapshot, sweep_temporaries)


def touch(path: str, text: str = "x") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def spark_checkpoint(root: str, committed: int, in_flight: bool = True) -> str:
    """A query checkpoint with batches 0..committed committed, and batch committed+1
    planned (offsets, source log, state) but not committed when in_flight."""
    q = os.path.join(root, "events")
    touch(os.path.join(q, "metadata"), '{"id": "q"}')
    last = committed + 1 if in_flight else committed
    for b in range(last + 1):
        touch(os.path.join(q, "offsets", str(b)), f"offsets {b}")
        touch(os.path.join(q, "offsets", f".{b}.crc"))
        touch(os.path.join(q, "sources", "0", str(b)), f"files {b}")
        touch(os.path.join(q, "state", "0", "0", f"{b + 1}.delta"), f"state {b + 1}")
    for b in range(committed + 1):
        touch(os.path.join(q, "commits", str(b)), f"commit {b}")
    touch(os.path.join(q, "sources", "0", "9.compact"))
    touch(os.path.join(q, "state", "0", "_metadata", "schema"))
    touch(os.path.join(q, "offsets", f".{last + 1}.tmp"))  # a write in progress
    touch(os.path.join(root, "user", "notes.txt"), "own state")
    return q


def listing(root: str) -> set[str]:
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def test_last_committed(tmp_path):
    q = spark_checkpoint(str(tmp_path), committed=12)
    assert last_committed(q) == 12
    assert last_committed(str(tmp_path / "nothing")) == -1


def test_snapshot_cuts_at_the_last_committed_batch(tmp_path):
    ck = str(tmp_path / "ck")
    spark_checkpoint(ck, committed=12)
    loc = new_location(str(tmp_path / "sps"), "abcdef123456")
    assert os.path.basename(loc).startswith("savepoint-abcdef-")
    meta = snapshot(ck, loc, {"job-id": "j"})
    assert meta["queries"] == {"events": {"last-committed-batch": 12}}
    assert read_metadata(loc)["job-id"] == "j"
    files = listing(os.path.join(loc, "checkpoint"))
    assert "events/offsets/12" in files and "events/offsets/13" not in files
    assert "events/offsets/.12.crc" in files and "events/offsets/.13.crc" not in files
    assert "events/commits/12" in files
    assert "events/sources/0/12" in files and "events/sources/0/13" not in files
    assert "events/sources/0/9.compact" in files
    assert "events/state/0/0/13.delta" in files and "events/state/0/0/14.delta" not in files
    assert "events/state/0/_metadata/schema" in files and "events/metadata" in files
    assert "user/notes.txt" in files
    assert not any(f.endswith(".tmp") for f in files)
    assert not [n for n in os.listdir(tmp_path / "sps") if n.startswith(".")]


def test_snapshot_of_an_empty_job_and_existing_location(tmp_path):
    loc = str(tmp_path / "sp")
    meta = snapshot(str(tmp_path / "missing"), loc, {})
    assert meta["queries"] == {} and os.path.isdir(os.path.join(loc, "checkpoint"))
    with pytest.raises(SavepointError, match="already exists"):
        snapshot(str(tmp_path / "missing"), loc, {})


def test_snapshot_into_an_unwritable_place_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SavepointError, match="could not write savepoint"):
        snapshot(str(tmp_path), str(blocker / "sp"), {})


def test_restore_once_then_never_again(tmp_path):
    ck = str(tmp_path / "old")
    spark_checkpoint(ck, committed=3, in_flight=False)
    loc = str(tmp_path / "sp")
    snapshot(ck, loc, {})
    job_ck, marker_dir = str(tmp_path / "job" / "checkpoints"), str(tmp_path / "job")
    touch(os.path.join(job_ck, "stale"))
    assert restore(loc, job_ck, marker_dir)
    assert listing(job_ck) == listing(os.path.join(loc, "checkpoint"))
    with open(os.path.join(marker_dir, "restored-from")) as f:
        assert f.read().strip() == loc
    touch(os.path.join(job_ck, "events", "commits", "4"))  # the job went on
    assert not restore(loc, job_ck, marker_dir)
    assert "events/commits/4" in listing(job_ck)


def test_restore_of_a_non_savepoint_is_refused(tmp_path):
    os.makedirs(tmp_path / "junk")
    with pytest.raises(SavepointError, match="not a savepoint"):
        restore(str(tmp_path / "junk"), str(tmp_path / "ck"), str(tmp_path))
    (tmp_path / "junk" / "_metadata").write_text("{")
    with pytest.raises(SavepointError, match="cannot read"):
        read_metadata(str(tmp_path / "junk"))
    (tmp_path / "junk" / "_metadata").write_text(json.dumps({"version": 1}))
    with pytest.raises(SavepointError, match="not a complete savepoint"):
        read_metadata(str(tmp_path / "junk"))


def test_savepoints_copy_no_link_fifo_or_device_and_read_bounded_metadata(tmp_path):
    """jm/cluster/jobs/jobfiles.py in savepoints: what a job left in its checkpoint besides
    regular files is not copied to the shared storage (nor back by a restore), and a
    `_metadata` that is a link or too large is refused, not read."""
    ck = str(tmp_path / "ck")
    spark_checkpoint(ck, committed=1, in_flight=False)
    os.symlink("/etc/hostname", os.path.join(ck, "user", "secret"))
    os.symlink("/dev", os.path.join(ck, "user", "devices"))
    os.mkfifo(os.path.join(ck, "user", "pipe"))
    loc = str(tmp_path / "sp")
    snapshot(ck, loc, {"job-id": "j"})
    assert sorted(os.listdir(os.path.join(loc, "checkpoint", "user"))) == ["notes.txt"]
    # a restore copies back regular files only, whatever the savepoint folder holds
    os.symlink("/etc/hostname", os.path.join(loc, "checkpoint", "user", "secret"))
    job_ck = str(tmp_path / "job" / "checkpoints")
    assert restore(loc, job_ck, str(tmp_path / "job"))
    assert sorted(os.listdir(os.path.join(job_ck, "user"))) == ["notes.txt"]
    # _metadata: a link to /dev/zero, or larger than 1 MB, is refused and not listed
    meta = os.path.join(loc, "_metadata")
    os.rename(meta, meta + ".real")
    os.symlink("/dev/zero", meta)
    with pytest.raises(SavepointError, match="_metadata is a symbolic link"):
        read_metadata(loc)
    from jm.cluster.jobs.savepoint import MAX_METADATA, list_savepoints
    assert list_savepoints(str(tmp_path)) == []
    os.remove(meta)
    with open(meta, "w") as f:
        f.write('{"job-id": "j", "pad": "' + "x" * MAX_METADATA + '"}')
    with pytest.raises(SavepointError, match=f"_metadata is .* bytes, more than {MAX_METADATA}"):
        read_metadata(loc)
    assert list_savepoints(str(tmp_path)) == []
    os.replace(meta + ".real", meta)
    assert [e.job_id for e in list_savepoints(str(tmp_path))] == ["j"]


def test_a_savepoint_or_restore_that_fails_leaves_no_temporary_copy(tmp_path, monkeypatch):
    cp = tmp_path / "ha" / "job" / "checkpoints"
    (cp / "q1" / "offsets").mkdir(parents=True)
    (cp / "q1" / "offsets" / "0").write_text("v1\n")
    done = snapshot(str(cp), str(tmp_path / "sp" / "ok"), {"job-id": "job"})
    assert done

    def refuse(src, dst):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr("jm.cluster.jobs.savepoint.os.rename", refuse)
    with pytest.raises(SavepointError, match="Input/output"):
        snapshot(str(cp), str(tmp_path / "sp" / "bad"), {"job-id": "job"})
    with pytest.raises(SavepointError, match="Input/output"):
        restore(str(tmp_path / "sp" / "ok"), str(tmp_path / "ha" / "j2" / "checkpoints"),
                str(tmp_path / "ha" / "j2"))
    assert sorted(os.listdir(tmp_path / "sp")) == ["ok"]
    assert os.listdir(tmp_path / "ha" / "j2") == []


def test_half_written_log_entries_of_a_killed_attempt_are_swept(tmp_path):
    """A kill while Spark wrote a batch's offsets leaves `.N.<uuid>.tmp` (and its .crc);
    Spark then refuses batch 0 for good (offsets log not empty): swept before the next
    attempt, and nothing else is touched."""
    root = str(tmp_path / "cp")
    q = spark_checkpoint(root, 1)
    first = os.path.join(root, "first")  # killed while writing its very first batch
    touch(os.path.join(first, "metadata"), '{"id": "f"}')
    os.makedirs(os.path.join(first, "commits"))
    for name in (".0.ae80bee3-efa6.tmp", "..0.ae80bee3-efa6.tmp.crc"):
        touch(os.path.join(first, "offsets", name))
    touch(os.path.join(q, "commits", ".2.1f2e.tmp"))
    touch(os.path.join(root, "user", "offsets", ".mine.tmp"))  # not a query's log
    before = listing(root)
    gone = sweep_temporaries(root)
    assert sorted(os.path.relpath(p, root) for p in gone) == sorted([
        "first/offsets/.0.ae80bee3-efa6.tmp", "first/offsets/..0.ae80bee3-efa6.tmp.crc",
        "events/offsets/.3.tmp", "events/commits/.2.1f2e.tmp"])
    assert listing(root) == before - {os.path.relpath(p, root) for p in gone}
    assert os.listdir(os.path.join(first, "offsets")) == []
    assert sweep_temporaries(root) == []
