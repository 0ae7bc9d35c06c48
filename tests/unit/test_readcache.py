"""Unit tests for jm/cluster/api/readcache.py: Flink's complete overview from cached rows is
the pure view's answer, re-serialises only live and changed jobs, forgets purged ones."""
from __future__ import annotations

import asyncio
import contextlib
import json

from jm.cluster.api import readcache
from jm.cluster.api.readcache import OverviewCache
from jm.wire import views as V
from raft import commands as c
from raft import state as S
from raft.state import ClusterState


def make(n_ended: int) -> ClusterState:
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h1", 8081, 6123, 11, 4, 1.0))
    for i in range(n_ended + 1):
        st.apply(c.SubmitJob(f"j{i}", {"name": f"job-{i}", "slots": 1, "entry": "m:f"},
                             10.0 + i))
        st.apply(c.AssignJobs((c.Assignment(f"j{i}", "n1", 0),), 10.5 + i))
        st.apply(c.ReportStatuses((c.StatusReport(f"j{i}", 1, "n1", S.RUNNING, 11.0 + i),)))
        if i < n_ended:
            st.apply(c.ReportStatuses((c.StatusReport(f"j{i}", 1, "n1", S.FINISHED,
                                                      12.0 + i),)))
    return st


def body(cache, st, now):
    return json.loads(b"".join(asyncio.run(cache.body(lambda: contextlib.nullcontext(st),
                                                      now))))


def test_cached_rows_are_the_views_rows_and_live_jobs_stay_fresh():
    st = make(5)
    cache = OverviewCache()
    assert body(cache, st, 100.0) == json.loads(json.dumps(V.jobs_overview(st, 100.0)))
    assert (cache.hits, cache.misses) == (0, 5)
    later = body(cache, st, 200.0)  # the live job's duration grew; ended rows reused
    assert later == json.loads(json.dumps(V.jobs_overview(st, 200.0)))
    assert (cache.hits, cache.misses) == (5, 5)


def test_a_replaced_or_purged_ended_job_is_not_served_stale():
    st = make(3)
    cache = OverviewCache()
    body(cache, st, 100.0)
    import copy
    st.jobs["j0"] = copy.deepcopy(st.jobs["j0"])  # another record (a snapshot installed)
    st.jobs["j0"].restarts += 1
    assert body(cache, st, 100.0)["jobs"][0]["restarts"] == 1
    del st.jobs["j1"]
    assert [r["jid"] for r in body(cache, st, 100.0)["jobs"]] == ["j0", "j2", "j3"]
    assert "j1" not in cache._rows


def test_a_cold_cache_hands_the_loop_back_between_chunks(monkeypatch):
    monkeypatch.setattr(readcache, "CHUNK", 2)
    st = make(5)
    ticks = []

    async def main():
        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0)
        t = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        n = len(ticks)
        out = await OverviewCache().body(lambda: contextlib.nullcontext(st), 50.0)
        t.cancel()
        return out, len(ticks) - n
    out, ran = asyncio.run(main())
    assert len(json.loads(b"".join(out))["jobs"]) == 6 and ran >= 2


def test_jobs_ended_by_a_command_prompt_a_new_fill_every_few_hundred():
    from jm.cluster.api import joblists
    from jm.cluster.api.joblists import JobLists, jobs_ended
    from raft.state import Result
    reports = c.ReportStatuses((c.StatusReport("a", 1, "n1", S.FINISHED, 1.0),
                                c.StatusReport("b", 1, "n1", S.FAILED, 1.0),
                                c.StatusReport("c", 1, "n1", S.RUNNING, 1.0),
                                c.StatusReport("d", 1, "n1", S.CANCELED, 1.0)))
    res = Result(True, [Result(True), Result(True), Result(True), Result.fail("stale", "x")])
    assert jobs_ended(reports, res) == 2
    assert jobs_ended(c.CancelJob("a", 1.0), Result(True, S.CANCELED)) == 1
    assert jobs_ended(c.CancelJob("a", 1.0), Result(True, S.CANCELLING)) == 0
    lists = JobLists(lambda: contextlib.nullcontext(ClusterState()))
    calls = [lists.note_applied(reports, res) for _ in range(joblists.WARM_AFTER)]
    assert calls.count(True) == 2 and calls[joblists.WARM_AFTER // 2 - 1] is True


def test_a_fill_makes_the_rows_of_new_ended_jobs_only_and_forgets_purged_ones():
    st = ClusterState()
    for k in range(6):
        st.apply(c.SubmitJob(f"j{k}", {"name": f"job {k}"}, float(k)))
    for k in range(4):
        st.apply(c.CancelJob(f"j{k}", 10.0))
    cache = OverviewCache()
    read = lambda: contextlib.nullcontext(st)  # noqa: E731
    assert asyncio.run(cache.fill(read, 20.0)) == 4
    assert asyncio.run(cache.fill(read, 21.0)) == 0  # nothing new
    st.apply(c.CancelJob("j4", 22.0))
    st.apply(c.PurgeJobs(("j0",), 23.0))
    assert asyncio.run(cache.fill(read, 24.0)) == 1 and set(cache._rows) == {
        "j1", "j2", "j3", "j4"}
    # a body afterwards joins the cached rows: no miss
    body = json.loads(b"".join(asyncio.run(cache.body(read, 25.0))))
    assert [j["jid"] for j in body["jobs"]] == ["j1", "j2", "j3", "j4", "j5"]
    assert cache.misses == 0
