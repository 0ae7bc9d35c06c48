"""Unit tests for retention: jm/policy/jobs/cleanup.py (pure decisions), the log cut
(jm/runtime/joblogs.py cap_file), savepoint listing and removal, blob ages, the new config
keys, and the peer's own log rotation (jm/cluster/peerlog.py peer_log_handler)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from jm.cluster.blobs import BlobStore
from jm.cluster.jobs.savepoint import list_savepoints, remove
from jm.config import ConfigError, load_config
from jm.policy.jobs import cleanup
from jm.policy.jobs.cleanup import (BLOB, CHECKPOINTS, LOG_DIR, RUN_DIR, SAVEPOINT, Entry,
                                    Listing, Policy, Refs, SavepointEntry)
from jm.runtime import joblogs
from raft import commands as c
from raft.state import ClusterState

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D1, D2, D3 = "a" * 64, "b" * 64, "c" * 64


def refs(jobs=(), arts=(), sps=()):
    return Refs(frozenset(jobs), frozenset(arts), frozenset(sps))


def sp(path, job, t, pinned=False):
    return SavepointEntry(path, job, t, t, pinned)


# ---- what the state needs ------------------------------------------------------------------

def test_refs_of_the_state():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 1, 2, 1, 4, 0.0))
    for d in (D1, D2):
        st.apply(c.AddArtifact(f"sha256:{d}", "lib.zip", 1, "n1", 0.0))
    st.apply(c.SubmitJob("j1", {"jobid": "j1", "name": "x", "entry": "m:f",
                                "pyfiles": [f"artifact:sha256:{D1}", "/local/lib.zip"],
                                "script": f"artifact:sha256:{D2}",
                                "savepoint-path": "/sp/savepoint-a/"}, 0.0))
    st.apply(c.SubmitJob("j2", {"jobid": "j2", "name": "y", "entry": "m:f"}, 0.0))
    st.jobs["j2"].savepoint_location = "/sp/savepoint-b"
    r = cleanup.refs_of(st.jobs.values())
    assert r.jobs == {"j1", "j2"}
    assert r.artifacts == {D1, D2}
    assert r.savepoints == {"/sp/savepoint-a", "/sp/savepoint-b"}


# ---- the plan -------------------------------------------------------------------------------

def test_files_of_jobs_the_store_holds_are_kept_whatever_their_age():
    listing = Listing(run_dirs=(Entry("live", 0.0), Entry("gone", 0.0), Entry("..", 0.0)),
                      log_dirs=(Entry("live", 0.0), Entry("gone", 1e9 - 11),
                                Entry("fresh", 1e9 - 9)),  # (within FOLDER_GRACE: kept)
                      ha_dirs=(Entry("live", 0.0), Entry("gone", 0.0)))
    out = cleanup.plan(listing, refs(jobs={"live"}), Policy(3600, 0), now=1e9)
    assert sorted((d.kind, d.name) for d in out) == [
        (CHECKPOINTS, "gone"), (LOG_DIR, "gone"), (RUN_DIR, "gone")]
    assert all("no longer holds" in d.why for d in out)
    # nothing at all when every job is still there
    assert cleanup.plan(listing, refs(jobs={"live", "gone"}), Policy(0, 0), 1e9) == []


def test_blobs_no_job_names_go_after_their_grace_period():
    listing = Listing(blobs=(Entry(D1, 1000.0), Entry(D2, 1000.0), Entry(D3, 1990.0),
                             Entry("not-a-digest", 0.0)))
    out = cleanup.plan(listing, refs(arts={D2}), Policy(blob_grace=60, savepoints_retained=0),
                       now=2000.0)
    assert [(d.kind, d.name) for d in out] == [(BLOB, D1)]  # D2 used, D3 young
    assert "jobmanager.blob.grace-period" in out[0].why
    # exactly at the grace period: still kept
    assert cleanup.plan(Listing(blobs=(Entry(D1, 1940.0),)), refs(), Policy(60, 0), 2000.0) == []


def test_logs_of_closed_livy_sessions_go_and_open_ones_stay():
    listing = Listing(session_logs=(
        Entry("livy-session-1.log", 0.0), Entry("livy-session-2.log", 0.0),
        Entry("livy-session-3.log", 1e9 - 5),  # closed, but written within FOLDER_GRACE
        Entry("livy-session-x.log", 0.0), Entry("spark-connect.log", 0.0)))
    held = Refs(frozenset(), frozenset(), frozenset(), frozenset({2}))
    out = cleanup.plan(listing, held, Policy(3600, 0), now=1e9)
    assert [(d.kind, d.name) for d in out] == [(cleanup.SESSION_LOG, "livy-session-1.log")]
    assert "Livy session 1" in out[0].why
    assert cleanup.refs_of([], [2, 5]).livy_sessions == {2, 5}


def test_savepoints_beyond_the_newest_k_except_pinned_and_referenced():
    sps = (sp("/s/a1", "A", 1.0), sp("/s/a2", "A", 2.0, pinned=True), sp("/s/a3", "A", 3.0),
           sp("/s/a4", "A", 4.0), sp("/s/a5", "A", 5.0), sp("/s/b1", "B", 1.0),
           sp("/s/a0", "A", 0.5))
    out = cleanup.plan(Listing(savepoints=sps), refs(sps={"/s/a1"}), Policy(0, 2), now=9.0)
    assert out == []  # all modified within cleanup.FOLDER_GRACE
    out = cleanup.plan(Listing(savepoints=sps), refs(sps={"/s/a1"}), Policy(0, 2), now=99.0)
    assert sorted(d.name for d in out) == ["/s/a0", "/s/a3"]
    assert all(d.kind == SAVEPOINT and "state.savepoints.num-retained" in d.why for d in out)
    assert cleanup.plan(Listing(savepoints=sps), refs(), Policy(0, 0), 99.0) == []  # 0: all kept
    one = cleanup.plan(Listing(savepoints=sps), refs(), Policy(0, 1), 99.0)
    assert sorted(d.name for d in one) == ["/s/a0", "/s/a1", "/s/a3", "/s/a4"]


def test_disk_low_warning():
    gb = 1024 ** 3
    assert cleanup.disk_low("/d", 2 * gb, 100 * gb, (gb, 0.0)) is None
    msg = cleanup.disk_low("/d", gb // 2, 100 * gb, (gb, 0.0))
    assert "jobmanager.disk.min-free" in msg and "/d" in msg and "512.0 MB" in msg
    assert cleanup.disk_low("/d", 4 * gb, 100 * gb, (0, 5.0)) is not None
    assert cleanup.disk_low("/d", 6 * gb, 100 * gb, (0, 5.0)) is None
    assert cleanup.disk_low("/d", 0, 100 * gb, (0, 0.0)) is None  # 0: no check


# ---- cutting a log --------------------------------------------------------------------------

def test_plan_cut_keeps_head_and_tail_at_line_boundaries():
    cap = 16 * 1024
    assert cleanup.plan_cut(cap, cap, b"") is None
    data = b"".join(b"line %05d\n" % i for i in range(5000))  # 50000 bytes
    cut, old = cleanup.plan_cut(len(data), cap, data[:cleanup.head_window(cap)])
    assert old == 0 and cut.prior == 0
    assert cut.head <= cap // 4 and data[cut.head - 1:cut.head] == b"\n"
    cut = cleanup.align_tail(cut, data[cut.tail:])
    assert data[cut.tail - 1:cut.tail] == b"\n" and len(data) - cut.tail <= cap // 2


def cap_roundtrip(path, cap):
    dropped = joblogs.cap_file(str(path), cap)
    return dropped, path.read_bytes()


def test_cap_file_cuts_in_place_and_counts_across_cuts(tmp_path):
    cap = 16 * 1024
    path = tmp_path / "attempt-1-0.log"
    lines = [b"line %05d\n" % i for i in range(3000)]
    path.write_bytes(b"".join(lines))
    more = b"".join(b"more %05d\n" % i for i in range(2000))
    # a writer holding the file open O_APPEND (like a job process) goes on after the cut
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        dropped, text = cap_roundtrip(path, cap)
        assert 0 < len(text) <= cap
        assert text.startswith(b"line 00000\n")
        assert text.endswith(b"line 02999\n")
        m = cleanup.MARKER.search(text)
        assert m and int(m.group(1)) == dropped == 33000 - (len(text) - len(m.group(0)))
        os.write(fd, more)
        before = len(path.read_bytes())
        dropped2, text2 = cap_roundtrip(path, cap)
        assert len(text2) <= cap and text2.endswith(b"more 01999\n")
        assert text2.startswith(b"line 00000\n")
        markers = list(cleanup.MARKER.finditer(text2))
        assert len(markers) == 1  # the earlier marker was in the dropped part
        user_bytes = 33000 + len(more)
        kept = len(text2) - len(markers[0].group(0))
        assert int(markers[0].group(1)) == user_bytes - kept
        assert dropped2 == user_bytes - kept  # cumulative, as the marker says
        assert before > cap
        os.write(fd, b"after\n")
        assert path.read_bytes().endswith(b"more 01999\nafter\n")  # appends land at the end
    finally:
        os.close(fd)
    assert joblogs.cap_file(str(path), cap) == 0  # under the cap: untouched
    assert joblogs.cap_file(str(tmp_path / "missing.log"), cap) == 0
    assert joblogs.cap_file(str(path), 0) == 0


def test_a_capped_log_still_reads_through_the_log_api(tmp_path):
    d = tmp_path / "jobs" / "j"
    d.mkdir(parents=True)
    (d / "attempt-1-0.log").write_bytes(b"x" * 40000 + b"\nlast line\n")
    joblogs.cap_file(str(d / "attempt-1-0.log"), 16 * 1024)
    files = joblogs.attempt_files(str(tmp_path), "j", 1)
    assert joblogs.read(files, tail=1)["text"] == "last line\n"
    whole = joblogs.read(files)
    assert "bytes of this log dropped here" in whole["text"] and whole["size"] <= 16 * 1024


# ---- savepoints and blobs on disk -------------------------------------------------------------

def make_savepoint(folder, name, job, t, pinned=False):
    path = folder / name
    (path / "checkpoint").mkdir(parents=True)
    (path / "_metadata").write_text(json.dumps({"job-id": job, "time": t}))
    if pinned:
        (path / "_pinned").write_text("")
    return str(path)


def test_list_and_remove_savepoints(tmp_path):
    a = make_savepoint(tmp_path, "savepoint-aaaaaa-1", "A", 5.0)
    b = make_savepoint(tmp_path, "savepoint-bbbbbb-1", "B", 6.0, pinned=True)
    (tmp_path / ".savepoint-x.inprogress").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "_metadata").write_text("{not json")
    found = {s.path: s for s in list_savepoints(str(tmp_path))}
    assert set(found) == {a, b}
    assert found[a].job_id == "A" and found[a].time == 5.0 and not found[a].pinned
    assert found[b].pinned
    remove(a)
    assert not os.path.exists(a) and not any(n.endswith(".deleting") for n in os.listdir(tmp_path))
    remove(a)  # gone already: nothing to do
    assert list_savepoints(str(tmp_path / "missing")) == []


def test_blob_given_again_is_young_again(tmp_path):
    store = BlobStore(str(tmp_path / "blobs"))
    art, name = store.put("lib.py", b"x = 1\n")
    digest = art.split(":")[1]
    path = store.local_path(art, name)
    os.utime(path, (1000, 1000))
    os.utime(os.path.dirname(path), (1000, 1000))
    assert dict(store.entries())[digest] == 1000
    store.put("lib.py", b"x = 1\n")  # uploaded (or fetched) again
    assert dict(store.entries())[digest] > 1000
    store.remove(digest)
    assert store.entries() == [] and store.local_path(art, name) is None


# ---- configuration ----------------------------------------------------------------------------

def test_retention_keys(tmp_path):
    conf = load_config(str(tmp_path))
    assert conf["jobmanager.cleanup.interval"] == 60.0
    assert conf["jobmanager.blob.grace-period"] == 3600.0
    assert conf["state.savepoints.num-retained"] == 10
    assert conf["jobmanager.job-log.max-size"] == 64 * 1024 ** 2
    assert conf["jobmanager.disk.min-free"] == (1024 ** 3, 0.0)
    assert conf["env.log.max-size"] == 100 * 1024 ** 2 and conf["env.log.max-files"] == 10
    conf = load_config(str(tmp_path), {"jobmanager.disk.min-free": "5%",
                                       "jobmanager.job-log.max-size": 0})
    assert conf["jobmanager.disk.min-free"] == (0, 5.0)
    assert conf["jobmanager.job-log.max-size"] == 0
    for key, bad in (("jobmanager.disk.min-free", "120%"), ("jobmanager.disk.min-free", "x%"),
                     ("jobmanager.job-log.max-size", "1 kb"), ("env.log.max-size", "100"),
                     ("env.log.max-files", 0), ("state.savepoints.num-retained", -1)):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(str(tmp_path), {key: bad})


# ---- the peer's own log rotates ---------------------------------------------------------------

def test_peer_log_rotates_and_stdout_follows(tmp_path):
    """As bin/jobmanager.sh starts a peer (`>> log 2>&1`): the log rotates at
    env.log.max-size, keeps env.log.max-files, and what is printed to stdout or stderr
    after a rotation goes to the current file (no rotated file grows)."""
    log = tmp_path / "jm.log"
    script = textwrap.dedent("""
        import logging, sys
        from jm.cluster.peerlog import setup_logging
        setup_logging("INFO", "text", "n1", 16 * 1024, 2)
        lg = logging.getLogger("t")
        for i in range(2000):
            lg.info("message %05d %s", i, "x" * 40)
        print("printed after rotation", flush=True)
        sys.stderr.write("stderr after rotation\\n")
        sys.stderr.flush()
    """)
    with open(log, "ab") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT,
                       cwd=ROOT, check=True, timeout=60)
    names = sorted(os.listdir(tmp_path))
    assert names == ["jm.log", "jm.log.1", "jm.log.2"]
    for n in names:
        assert os.path.getsize(tmp_path / n) <= 16 * 1024 + 200
    current = log.read_text()
    assert "message 01999" in current
    assert "printed after rotation" in current and "stderr after rotation" in current


def test_peer_log_to_a_file_opened_without_append_loses_no_line(tmp_path):
    """stdout opened for writing, not appending (systemd `StandardOutput=file:`, a test's
    `open(log, "w")`): the handler's own lines and what is written to fds 1 and 2 (a
    `kill -USR2` stack dump, a traceback) all stay; none is written over another."""
    log = tmp_path / "jm.log"
    script = textwrap.dedent("""
        import logging, os, sys
        from jm.cluster.peerlog import setup_logging
        setup_logging("INFO", "text", "n1", 1 << 20, 2)
        lg = logging.getLogger("t")
        for i in range(50):
            lg.info("logged %02d", i)
            os.write(2, b"raw stderr %02d\\n" % i)
            print("printed %02d" % i, flush=True)
    """)
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT,
                       cwd=ROOT, check=True, timeout=60)
    text = log.read_text()
    for i in range(50):
        for what in ("logged", "raw stderr", "printed"):
            assert f"{what} {i:02d}" in text, (what, i, text[-2000:])


def test_peer_log_to_a_terminal_or_pipe_is_not_rotated(tmp_path):
    script = ("from jm.cluster.peerlog import peer_log_handler;"
              "print(peer_log_handler(1 << 20, 3))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, check=True, timeout=60)
    assert out.stdout.strip() == "None"


# ---- the janitor's shell, on a fake replica ----------------------------------------------------

class FakeRaft:
    def __init__(self, state, leader=True):
        self.state, self.leader, self.deposed = state, leader, False
        self.submitted = []
        self.membership = self  # (RaftHost's role: caught_up)

    def read(self):
        import contextlib
        return contextlib.nullcontext(self.state)

    def caught_up(self):
        return True

    def is_leader(self):
        return self.leader

    async def submit(self, cmd, timeout):  # applied at once, as a committed write
        self.submitted.append(cmd)
        return self.state.apply(cmd)

    async def barrier(self, timeout):  # a deposed leader's fails
        if self.deposed:
            from raft.node import RaftUnavailable
            raise RaftUnavailable("no majority answers this term")


def janitor_on(tmp_path, state, ready, leader=True):
    from jm.cluster.jobs.janitor import Janitor, JanitorConfig
    cfg = JanitorConfig(str(tmp_path / "data"), str(tmp_path / "log"), str(tmp_path / "ha"),
                        str(tmp_path / "ha" / "savepoints"), 60.0, 60.0, 1, 16 * 1024, 5.0,
                        (0, 0.0))
    j = Janitor(cfg, BlobStore(str(tmp_path / "data" / "blobs")), "n1")
    j.raft, j._ready = FakeRaft(state, leader), ready
    return j


def job_files(tmp_path, jid, age=60.0):
    paths = [tmp_path / "data" / "jobs" / jid / "1-0", tmp_path / "log" / "jobs" / jid,
             tmp_path / "ha" / jid / "checkpoints"]
    for p in paths:
        p.mkdir(parents=True, exist_ok=True)
    then = time.time() - age  # (younger than cleanup.FOLDER_GRACE: never deleted)
    for p in paths + [p.parent for p in paths]:
        os.utime(p, (then, then))
    return paths


async def test_janitor_deletes_only_once_ready_and_only_what_no_job_needs(tmp_path):
    st = ClusterState()
    st.apply(c.SubmitJob("live", {"jobid": "live", "name": "x", "entry": "m:f"}, 0.0))
    live, gone = job_files(tmp_path, "live"), job_files(tmp_path, "gone")
    (tmp_path / "ha" / "savepoints").mkdir()
    (tmp_path / "ha" / "notajob").mkdir()
    ready = [False]
    j = janitor_on(tmp_path, st, lambda: ready[0])
    assert await j.sweep() == []  # a replica not caught up with its registration: nothing
    assert all(p.exists() for p in gone)
    ready[0] = True
    done = await j.sweep()
    assert sorted(d.kind for d in done) == [CHECKPOINTS, LOG_DIR, RUN_DIR]
    assert not any((tmp_path / d).exists() for d in ("data/jobs/gone", "log/jobs/gone",
                                                     "ha/gone"))
    assert all(p.exists() for p in live)
    assert (tmp_path / "ha" / "savepoints").exists() and (tmp_path / "ha" / "notajob").exists()


async def test_a_deposed_leader_or_a_fresh_folder_loses_nothing(tmp_path):
    """The shared storage is swept only past a Raft barrier: a deposed leader (its
    is_leader() still true) deletes nothing there, and nobody deletes a folder modified
    within cleanup.FOLDER_GRACE (a job placed since the state was read)."""
    st = ClusterState()
    gone, fresh = job_files(tmp_path, "gone"), job_files(tmp_path, "fresh", age=0.0)
    j = janitor_on(tmp_path, st, lambda: True)
    j.raft.deposed = True
    done = await j.sweep()
    assert sorted(d.kind for d in done) == [LOG_DIR, RUN_DIR]  # its own disk only
    assert (tmp_path / "ha" / "gone" / "checkpoints").exists() and all(p.exists() for p in fresh)
    j.raft.deposed = False
    assert [(d.kind, d.name) for d in await j.sweep()] == [(CHECKPOINTS, "gone")]
    assert all(p.exists() for p in fresh)


async def test_janitor_rechecks_the_state_before_deleting(tmp_path):
    """A job submitted between the plan and the deletion keeps its files."""
    st = ClusterState()
    job_files(tmp_path, "late")
    j = janitor_on(tmp_path, st, lambda: True, leader=False)
    listing = j._list(False)
    todo = cleanup.plan(listing, cleanup.refs_of(st.jobs.values()), j._policy(), time.time())
    assert {d.name for d in todo} == {"late"}
    st.apply(c.SubmitJob("late", {"jobid": "late", "name": "x", "entry": "m:f"}, 0.0))
    assert j._delete(todo) == []
    assert (tmp_path / "data" / "jobs" / "late").exists()


def test_stale_artifacts_are_old_and_named_by_no_job():
    from raft.records import ArtifactRecord
    arts = [ArtifactRecord(f"sha256:{d}", "x.py", 1, ["n1"], t)
            for d, t in ((D1, 0.0), (D2, 0.0), (D3, 3550.0))]
    refs = cleanup.Refs(frozenset(), frozenset({D2}), frozenset())
    assert cleanup.stale_artifacts(arts, refs, cleanup.Policy(3600.0, 1), 3601.0) == \
        [f"sha256:{D1}"]  # D2: a job names it; D3: in its grace period
    assert cleanup.stale_artifacts(arts, refs, cleanup.Policy(3600.0, 1), 3600.0) == []


@pytest.mark.parametrize("leader", [True, False])
async def test_the_leaders_janitor_forgets_artifacts_whose_files_go(tmp_path, leader):
    """GET /artifacts lists what a job can use: the leader's sweep forgets (through Raft)
    an artifact no job names once it is older than the grace period (60 s here)."""
    st = ClusterState()
    now = time.time()
    for d, t in ((D1, now - 120), (D2, now - 120), (D3, now)):
        st.apply(c.AddArtifact(f"sha256:{d}", "x.py", 1, "n1", t))
    st.apply(c.SubmitJob("j1", {"pyfiles": [f"artifact:sha256:{D2}"]}, now))
    j = janitor_on(tmp_path, st, lambda: True, leader=leader)
    await j.sweep()
    if leader:
        assert sorted(st.artifacts) == [f"sha256:{D2}", f"sha256:{D3}"]
        assert [type(x).__name__ for x in j.raft.submitted] == ["ForgetArtifacts"]
        await j.sweep()  # nothing more to forget: no command
        assert len(j.raft.submitted) == 1
    else:  # a follower's janitor leaves the replicated state to the leader
        assert len(st.artifacts) == 3 and j.raft.submitted == []


async def test_janitor_caps_the_logs_of_jobs_running_here(tmp_path):
    st = ClusterState()
    j = janitor_on(tmp_path, st, lambda: True)
    d = tmp_path / "log" / "jobs" / "j1"
    d.mkdir(parents=True)
    (d / "attempt-1-0.log").write_bytes(b"z" * 100_000)
    (tmp_path / "log" / "zygote.log").write_bytes(b"q\n" * 50_000)
    (d.parent / "j2").mkdir()
    (d.parent / "j2" / "attempt-1-0.log").write_bytes(b"z" * 100_000)  # not running here
    assert j.cap_logs(["j1"]) > 0
    assert os.path.getsize(d / "attempt-1-0.log") <= 16 * 1024
    assert os.path.getsize(tmp_path / "log" / "zygote.log") <= 16 * 1024
    assert os.path.getsize(d.parent / "j2" / "attempt-1-0.log") == 100_000


def test_runs_beyond_keeps_first_newest_and_the_caps_worth_between():
    assert cleanup.runs_beyond([(0, 10), (1, 10)], 5) == []
    runs = [(3, 10), (0, 10), (1, 10), (2, 10), (4, 10)]
    assert cleanup.runs_beyond(runs, 25) == [1]          # 30 between -> 20
    assert cleanup.runs_beyond(runs, 5) == [1, 2, 3]     # first and newest stay
    assert cleanup.runs_beyond(runs, 30) == []
    assert cleanup.runs_beyond(runs, 0) == []            # no cap


def test_an_attempt_restarting_over_and_over_keeps_bounded_logs(tmp_path):
    """A crash-looping job: each run's log is small, but the runs add up; the attempt
    keeps its first run, its newest and at most the cap's worth in between."""
    cap = 16 * 1024
    d = tmp_path / "jobs" / "j"
    d.mkdir(parents=True)
    for r in range(40):
        (d / f"attempt-2-{r}.log").write_bytes(b"run %d\n" % r + b"." * 1000 + b"\n")
    (d / "attempt-1-0.log").write_bytes(b"x" * 100)
    gone = joblogs.trim_runs(str(tmp_path), "j", cap)
    left = joblogs.attempt_files(str(tmp_path), "j", 2)
    names = [os.path.basename(p) for p in left]
    assert names[0] == "attempt-2-0.log" and names[-1] == "attempt-2-39.log"
    assert sum(os.path.getsize(p) for p in left[1:-1]) <= cap
    assert len(gone) == 40 - len(left) > 0
    assert joblogs.read(left, tail=1)["text"] == "." * 1000 + "\n"
    assert joblogs.attempt_files(str(tmp_path), "j", 1)  # another attempt: untouched


def test_shared_copies_of_uploads_follow_the_blob_rule():
    """<storageDir>/blobs (an upload's durable copy): deleted like a peer's own blob."""
    from jm.policy.jobs import cleanup as cl
    old, new, used = "a" * 64, "b" * 64, "c" * 64
    listing = cl.Listing(shared_blobs=(cl.Entry(old, 0.0), cl.Entry(new, 990.0),
                                       cl.Entry(used, 0.0)))
    refs = cl.Refs(jobs=frozenset(), artifacts=frozenset({used}), savepoints=frozenset())
    todo = cl.plan(listing, refs, cl.Policy(60.0, 10), 1000.0)
    assert [(d.kind, d.name) for d in todo] == [(cl.SHARED_BLOB, old)]


def test_only_the_temporaries_our_copies_write_are_left_overs():
    old = 1e9 - 3601
    temps = tuple(Entry(f"/d/{n}", old) for n in (
        ".upload-ab_12.tmp", ".sp-1.inprogress", ".savepoint-0123456789ab.staging",
        "checkpoints.restoring", "sp.inprogress", ".savepoint-xyz.staging", "upload-1.tmp",
        "checkpoints"))
    out = cleanup.plan(Listing(temps=temps, shared_temps=(Entry("/h/.b.inprogress", 1e9),)),
                       refs(), Policy(3600, 0), now=1e9)
    assert [d.name for d in out] == ["/d/.upload-ab_12.tmp", "/d/.sp-1.inprogress",
                                     "/d/.savepoint-0123456789ab.staging",
                                     "/d/checkpoints.restoring"]
    assert all(d.kind == cleanup.TEMP and "unfinished" in d.why for d in out)


async def test_copies_a_dead_peer_left_unfinished_are_deleted_after_the_grace(tmp_path):
    """A peer killed during an upload, a savepoint or a restore leaves its temporary
    copy; the janitor deletes it once older than jobmanager.blob.grace-period (60 s
    here), also in a live job's folder, and never a young one or on a follower."""
    st = ClusterState()
    st.apply(c.SubmitJob("live", {"jobid": "live", "name": "x", "entry": "m:f"}, 0.0))
    job_files(tmp_path, "live")
    blobs = BlobStore(str(tmp_path / "data" / "blobs"))
    art, _ = blobs.put("a.py", b"x = 1\n")
    folder = tmp_path / "data" / "blobs" / art.split(":")[1]
    left = [folder / ".upload-abc123.tmp", tmp_path / "ha" / "savepoints" / ".sp-1.inprogress",
            tmp_path / "ha" / "live" / ".savepoint-0123456789ab.staging",
            tmp_path / "ha" / "live" / "checkpoints.restoring"]
    young = tmp_path / "ha" / "savepoints" / ".sp-2.inprogress"
    for p in left[1:] + [young]:
        (p / "chk").mkdir(parents=True)
    left[0].write_bytes(b"half")
    then = time.time() - 120
    for p in left + [left[1] / "chk", left[2] / "chk", left[3] / "chk"]:
        os.utime(p, (then, then))
    j = janitor_on(tmp_path, st, lambda: True, leader=False)
    done = await j.sweep()
    assert [d.name for d in done] == [str(left[0])]  # a follower: its own disk only
    j.raft.leader = True
    done = await j.sweep()
    assert sorted(d.name for d in done) == sorted(str(p) for p in left[1:])
    assert not any(p.exists() for p in left) and young.exists()
    assert (tmp_path / "ha" / "live" / "checkpoints").exists() and blobs.local_path(art, "a.py")
