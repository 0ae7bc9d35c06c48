"""A follower's disk fails its fsyncs, then the power goes out: no acknowledged write is
lost (raft/journal.py's fail-stop; PostgreSQL's "fsyncgate").

Three real peers, each with its data folder on a lazyfs (chaos/lazyfs.py). The third
peer's host hangs (SIGSTOP), so the leader's majority is itself and one follower. Clients
post jobs to the leader. That follower's disk then fails every fsync for a while (EIO;
what it was to write is dropped, as Linux drops pages whose writeback failed and marks
them clean). A journal that retried would later sync "successfully" and answer for
entries its disk never got; the leader would count them, and after a power cut the
follower and the hung peer (whose log is older) could elect the follower, which drops
those acknowledged entries from the leader. The follower must stop instead (exit 1).
Then the power goes out everywhere; the follower and the hung peer come back first (only
the follower can be elected), then the old leader: every job answered 202 is there.
"""
from __future__ import annotations

import os
import signal

import pytest

from tests.e2e.powercut import Load, PowerCluster, _accepted, _fuse_missing
from tests.helpers import consistent_session, end_session, http, poll

pytestmark = [pytest.mark.slow]

FAIL_SECONDS = 3.0      # the sick disk fails every fsync for this long
ACKS_BEFORE = 30        # acknowledged before the disk fails
ACKS_AFTER = 20         # a journal that retried would answer for this many after it


def _leader(c: PowerCluster) -> int:
    """The index of the leader's peer, once every peer names the same leader."""
    def agreed():
        seen = [http("GET", u + "/healthz", timeout=2)[1] for u in c.urls]
        leaders = {h.get("leader") for h in seen}
        nodes = [h.get("node") for h in seen]
        return len(leaders) == 1 and leaders & set(nodes) and nodes.index(leaders.pop()) + 1
    return poll(agreed, 30, what="one leader named by every peer") - 1


def _peer_log(c: PowerCluster, i: int) -> str:
    with open(os.path.join(c.log_dir, f"peer-{i}.log"), errors="replace") as f:
        return f.read()


@pytest.mark.timeout(240)
def test_a_follower_whose_fsync_fails_stops_and_no_acknowledged_write_is_lost(tmp_path):
    if _fuse_missing() is not None:
        pytest.skip(_fuse_missing())
    c = PowerCluster(str(tmp_path), fsync=True, sync_delay=0.0)
    load = None
    try:
        c.mount()
        c.start()
        c.wait_ready()
        lead = _leader(c)
        sick, hung = [i for i in range(3) if i != lead]
        os.killpg(c.procs[hung].pid, signal.SIGSTOP)  # its host hangs
        load = Load([c.urls[lead]] * 8)  # 16 clients, all on the leader
        load.start()
        poll(lambda: load.count() >= ACKS_BEFORE, 60, interval=0.02,
             what=f"{ACKS_BEFORE} acknowledged with the leader and one follower")
        c.mounts[sick].fail_syncs(FAIL_SECONDS)
        poll(lambda: c.mounts[sick].stats()["failed-syncs"] > 0, 30, interval=0.02,
             what="the follower's disk failed an fsync")
        failed_at = load.count()
        # a journal that retried answers again once the disk works: acknowledgements go on
        poll(lambda: c.procs[sick].poll() is not None or load.count() >= failed_at + ACKS_AFTER,
             60, interval=0.02, what="the follower stopped, or its writes were acknowledged")
        failing = c.mounts[sick].stats()
        c.power_cut()  # the power goes out everywhere (the hung host too)
        acked = load.finish()
        sick_code, sick_log = c.procs[sick].returncode, _peer_log(c, sick)

        c.mount()
        c.start(only=[sick, hung])  # these two first: only the follower can be elected
        poll(lambda: http("GET", c.urls[sick] + "/healthz", timeout=2)[1].get("leader"),
             60, what="a leader among the follower and the hung peer")
        c.start(only=[lead])
        c.wait_ready()
        consistent_session(c.urls)
        try:
            marker = poll(lambda: _accepted(c.urls[sick], "marker"), 30,
                          what="a submission after the restart")
            present = {j["jid"] for j in http("GET", c.urls[lead] + "/jobs/overview",
                                              timeout=30)[1]["jobs"]}
            assert marker["jobid"] in present
        finally:
            end_session(c.urls)
    finally:
        if load is not None:
            load.finish()
        c.close()
    lost = [a for a in acked if a[0] not in present]
    assert not lost, (f"{len(lost)} of {len(acked)} acknowledged submissions lost ({failed_at} "
                      f"acknowledged before the fsync failed); the sick disk before the cut: "
                      f"{failing}; logs in {tmp_path}")
    assert sick_code == 1, f"the follower whose fsync failed did not stop (exit {sick_code})"
    assert "could not be synced" in sick_log and "Input/output error" in sick_log, \
        sick_log[-2000:]
    assert len(acked) >= ACKS_BEFORE
