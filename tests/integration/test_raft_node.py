"""RaftHost.submit through a real pysyncobj node: a write pysyncobj refused before
appending it (the leader was lost between our check and its tick) is sent again once a
leader is known, within the write's timeout; past the timeout it is RaftUnavailable."""
import asyncio

import pytest
from pysyncobj import FAIL_REASON

from raft.commands import Barrier
from raft.node import RaftHost, RaftSettings, RaftUnavailable
from tests.helpers import apoll, free_ports


@pytest.fixture
async def single(tmp_path):
    port = free_ports(1)[0]
    addr = f"127.0.0.1:{port}"
    host = RaftHost(addr, [], str(tmp_path), RaftSettings(), asyncio.get_running_loop(),
                    {addr: "p0"})
    try:
        await apoll(lambda: host.leader() == "p0", 20, what="single-node leader")
        yield host
    finally:
        await asyncio.to_thread(host.destroy)


def _refuse_first(host, times: int, reason: int):
    """pysyncobj answers the first `times` writes with `reason` (as its tick thread does
    when it has lost the leader), then appends as usual."""
    real = host.consumer.apply
    calls = []

    def apply(blob, callback):
        calls.append(blob)
        if len(calls) <= times:
            callback(None, reason)
        else:
            real(blob, callback=callback)
    host.consumer.apply = apply
    return calls


async def test_a_write_refused_for_a_missing_leader_is_sent_again(single):
    before = single.applied_index()
    calls = _refuse_first(single, 2, FAIL_REASON.MISSING_LEADER)
    res = await single.submit(Barrier(), 5.0)
    assert res.ok
    assert len(calls) == 3 and single.applied_index() == before + 1  # applied once


async def test_the_resend_waits_for_a_leader_within_the_timeout(single):
    calls = _refuse_first(single, 1, FAIL_REASON.NOT_LEADER)
    real_leader = single.syncobj._getLeader
    seen = []

    def leader():  # known at the first check, then an "election" of 10 polls
        seen.append(1)
        return real_leader() if len(seen) == 1 or len(seen) > 11 else None
    single.syncobj._getLeader = leader
    res = await single.submit(Barrier(), 5.0)
    single.syncobj._getLeader = real_leader
    assert res.ok and len(calls) == 2 and len(seen) == 12


async def test_no_leader_within_the_timeout_is_unavailable(single):
    _refuse_first(single, 1, FAIL_REASON.MISSING_LEADER)
    real_leader = single.syncobj._getLeader
    calls = []

    def leader():  # known for the first check only, then lost for good
        calls.append(1)
        return real_leader() if len(calls) == 1 else None
    single.syncobj._getLeader = leader
    before = single.applied_index()
    with pytest.raises(RaftUnavailable, match="MISSING_LEADER"):
        await single.submit(Barrier(), 0.5)
    single.syncobj._getLeader = real_leader
    assert single.applied_index() == before


async def test_other_failures_are_not_resent(single):
    calls = _refuse_first(single, 1, FAIL_REASON.LEADER_CHANGED)  # outcome unknown
    with pytest.raises(RaftUnavailable, match="LEADER_CHANGED"):
        await single.submit(Barrier(), 5.0)
    assert len(calls) == 1
