"""Unit tests of jm/policy/spark/engines.py: which engine work uses at each share level, and the
pool's starts, idle stops, bound and waiting (pure, no Spark)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as hs

from jm.policy.spark.engines import (PEER_ENGINE, Acquire, EngineKey, EnginePool, Granted, Release,
                                     ShareLevel, Start, Stop, Stopped, Tick, engine_for)

T, J = ShareLevel.TENANT, ShareLevel.JOB


def test_work_maps_to_its_engine_at_each_level():
    assert engine_for(ShareLevel.PEER, "a", "j1") == PEER_ENGINE
    assert engine_for(T, "a", "j1") == EngineKey(T, "a")
    assert engine_for(T, None, None) == EngineKey(T, "default")
    assert engine_for(J, "a", "j1") == EngineKey(J, "j1")
    assert engine_for(J, "a", None) == EngineKey(T, "a")  # a session: its tenant's engine
    assert EngineKey(T, "a/../b").name == "tenant-a_.._b"
    assert PEER_ENGINE.name == "peer"


def test_the_peer_engine_is_pinned_and_never_idles_out():
    pool = EnginePool(30, 4, pinned=(PEER_ENGINE,))
    assert pool.boot(0) == [Start(PEER_ENGINE)]
    assert pool.handle(Acquire(PEER_ENGINE, "j1"), 1) == [Granted(PEER_ENGINE, "j1")]
    assert pool.handle(Release(PEER_ENGINE, "j1"), 2) == []
    assert pool.handle(Tick(), 10_000) == []


def test_a_tenant_engine_starts_on_demand_is_shared_and_stops_when_idle():
    a = EngineKey(T, "a")
    pool = EnginePool(30, 4)
    assert pool.boot(0) == []
    assert pool.handle(Acquire(a, "j1"), 0) == [Start(a), Granted(a, "j1")]
    assert pool.handle(Acquire(a, "s1"), 1) == [Granted(a, "s1")]  # no second JVM
    pool.handle(Release(a, "j1"), 2)
    assert pool.handle(Tick(), 100) == []  # s1 still holds it
    pool.handle(Release(a, "s1"), 100)
    assert pool.handle(Tick(), 129) == []
    assert pool.handle(Tick(), 130) == [Stop(a, "idle for 30 s")]
    assert pool.handle(Tick(), 200) == []  # asked once
    # work that comes while it stops waits for it to be gone, then starts it afresh
    assert pool.handle(Acquire(a, "j2"), 131) == []
    assert pool.handle(Stopped(a), 132) == [Start(a), Granted(a, "j2")]


def test_a_full_peer_stops_its_least_recently_used_idle_engine_first():
    a, b, c = (EngineKey(T, x) for x in "abc")
    pool = EnginePool(300, 2)
    pool.handle(Acquire(a, "ja"), 0)
    pool.handle(Acquire(b, "jb"), 1)
    pool.handle(Release(b, "jb"), 5)
    pool.handle(Release(a, "ja"), 6)  # a used last: b is the one to go
    out = pool.handle(Acquire(c, "jc"), 7)
    assert len(out) == 1 and isinstance(out[0], Stop) and out[0].key == b
    assert "max-per-peer (2)" in out[0].reason
    assert pool.handle(Stopped(b), 8) == [Start(c), Granted(c, "jc")]


def test_work_waits_while_every_engine_is_in_use_and_a_release_lets_it_in():
    a, b, c = (EngineKey(T, x) for x in "abc")
    pool = EnginePool(300, 2)
    pool.handle(Acquire(a, "ja"), 0)
    pool.handle(Acquire(b, "jb"), 0)
    assert pool.handle(Acquire(c, "jc"), 1) == []
    assert pool.waiting_for(c) == 1
    out = pool.handle(Release(a, "ja"), 2)
    assert [type(i) for i in out] == [Stop]
    assert pool.handle(Stopped(a), 3) == [Start(c), Granted(c, "jc")]
    # a holder that gives up while waiting is forgotten
    pool.handle(Acquire(a, "ja2"), 4)
    pool.handle(Release(a, "ja2"), 5)
    assert pool.waiting == []


def test_a_job_engine_is_the_job_s_alone():
    j1, j2 = EngineKey(J, "j1"), EngineKey(J, "j2")
    pool = EnginePool(10, 8)
    assert pool.handle(Acquire(j1, "j1"), 0) == [Start(j1), Granted(j1, "j1")]
    assert pool.handle(Acquire(j2, "j2"), 0) == [Start(j2), Granted(j2, "j2")]
    pool.handle(Release(j1, "j1"), 1)
    assert pool.handle(Tick(), 11) == [Stop(j1, "idle for 10 s")]


KEYS = [EngineKey(T, x) for x in "abcd"]
HOLDERS = ["h1", "h2", "h3", "h4", "h5"]
events = hs.lists(hs.one_of(
    hs.builds(Acquire, hs.sampled_from(KEYS), hs.sampled_from(HOLDERS)),
    hs.builds(Release, hs.sampled_from(KEYS), hs.sampled_from(HOLDERS)),
    hs.builds(Stopped, hs.sampled_from(KEYS)),
    hs.just(Tick())), max_size=60)


@settings(max_examples=300, deadline=None)
@given(events, hs.integers(1, 3))
def test_the_pool_never_holds_more_engines_than_its_bound(evs, bound):
    pool = EnginePool(5, bound)
    running: set = set()   # started and not yet reported stopped
    stopping: set = set()
    now = 0.0
    for ev in evs:
        now += 2
        if isinstance(ev, Stopped) and ev.key not in stopping:
            continue  # the driver reports only stops it was told to make
        if isinstance(ev, Stopped):
            stopping.discard(ev.key)
            running.discard(ev.key)
        for ins in pool.handle(ev, now):
            if isinstance(ins, Start):
                assert ins.key not in running
                running.add(ins.key)
            elif isinstance(ins, Stop):
                assert ins.key in running and ins.key not in stopping
                assert not pool.holders(ins.key)  # never an engine in use
                stopping.add(ins.key)
            elif isinstance(ins, Granted):
                assert ins.key in running and ins.key not in stopping
        assert len(running) <= bound
        assert set(pool.engines) == running


# ---- an engine's cgroup ------------------------------------------------------------------
def test_an_engine_s_cgroup_holds_its_tenant_s_memory_and_cpu_weight_on_v1_and_v2():
    from jm.runtime import cgroups
    mb = 1 << 20
    assert cgroups.files("v2", 512 * mb, 200) == {"": {
        "memory.max": str(512 * mb), "memory.swap.max": "0", "cpu.weight": "200"}}
    assert cgroups.files("v1", 512 * mb, 50) == {
        "memory": {"memory.limit_in_bytes": str(512 * mb),
                   "memory.memsw.limit_in_bytes": str(512 * mb)},
        "cpu": {"cpu.shares": "512"}}
    assert cgroups.files("v1", 0, 0) == {} and cgroups.files("v2", 0, 0) == {}
    assert cgroups.heap(1024 * mb, 4096 * mb) == 768 * mb  # 3/4 of the limit
    assert cgroups.heap(1024 * mb, 512 * mb) == 512 * mb
    assert cgroups.heap(0, 512 * mb) == 512 * mb


def test_a_made_cgroup_gets_its_files_and_the_process_and_goes(tmp_path):
    from jm.runtime.cgroups import EngineCgroup
    for c in ("memory", "cpu"):  # a v1 layout, as plain directories
        (tmp_path / c).mkdir()
    cg = EngineCgroup("42-tenant-a", 300 << 20, 100, mount=str(tmp_path))
    assert cg.version == "v1" and cg.create(), cg.error
    mem = tmp_path / "memory" / "jm-engines" / "42-tenant-a"
    assert (mem / "memory.limit_in_bytes").read_text() == str(300 << 20)
    assert (tmp_path / "cpu" / "jm-engines" / "42-tenant-a" / "cpu.shares").read_text() \
        == "1024"
    cg.add(4242)
    assert (mem / "cgroup.procs").read_text() == "4242"
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert cg.oom_kills() == 3
    missing = EngineCgroup("x", 300 << 20, 0, mount=str(tmp_path / "none"))
    assert not missing.create() and "no cgroup v2 mount" in missing.error


def test_a_job_s_tenant_limits_go_into_its_per_job_cgroup_the_lower_memory_winning(
        tmp_path):
    from jm.runtime.confine import tenant_cgroup
    (tmp_path / "memory.max").write_text("max")
    (tmp_path / "cpu.weight").write_text("100")
    assert tenant_cgroup(str(tmp_path), 300 << 20, 50, "unused") is None
    assert (tmp_path / "memory.max").read_text() == str(300 << 20)
    assert (tmp_path / "cpu.weight").read_text() == "50"
    (tmp_path / "memory.max").write_text(str(100 << 20))  # jobmanager.executor.limits.memory
    assert tenant_cgroup(str(tmp_path), 300 << 20, 0, "unused") is None
    assert (tmp_path / "memory.max").read_text() == str(100 << 20)


def test_a_job_s_cgroup_of_its_tenant_s_limits_is_removed_when_empty(tmp_path):
    from jm.runtime.cgroups import JOBS, EngineCgroup, remove_job_cgroup, tenant_cgroup_name
    for c in ("memory", "cpu"):
        (tmp_path / c).mkdir()
    name = tenant_cgroup_name(7, 4242)
    cg = EngineCgroup(name, 300 << 20, 0, mount=str(tmp_path), group=JOBS)
    assert cg.create(), cg.error
    d = tmp_path / "memory" / JOBS / name
    assert (d / "memory.limit_in_bytes").read_text() == str(300 << 20)
    for f in d.iterdir():  # (a real cgroup's files go with its rmdir)
        f.unlink()
    assert remove_job_cgroup(name, mount=str(tmp_path)) and not d.exists()
    assert remove_job_cgroup(name, mount=str(tmp_path))  # gone already: fine
