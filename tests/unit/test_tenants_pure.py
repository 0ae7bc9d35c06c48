"""Tenants, pure parts: quotas in the replicated state (raft/tenants.py: set, validate,
forget at no limit; a session over the quota refused when it opens), the slot quota at
placement (jm/policy/members/quota.py, jm/policy/members/placement.py: a job over its
tenant's room waits, smaller ones of the same tenant and other tenants' go) and who may see what
(rest/gateway.Credential)."""
import pytest

from jm.policy.members import quota
from jm.policy.members.placement import PeerLoad, Waiting, place
from raft import commands as c
from raft.state import ClusterState
from jm.api import ANYONE, ROOT, Credential

A = "127.0.0.1:1"


def state():
    st = ClusterState()
    assert st.apply(c.RegisterPeer(A, "127.0.0.1", 8000, 9000, 1, 8, 0.0)).ok
    return st


def test_a_tenant_s_quotas_are_set_checked_and_forgotten_at_no_limit():
    st = state()
    assert st.apply(c.SetTenant("team-a", 4, None, 1.0)).ok
    assert st.apply(c.SetTenant("team-a", None, 2, 2.0)).ok
    rec = st.tenants["team-a"]
    assert (rec.slots, rec.sessions, rec.updated) == (4, 2, 2.0)
    for bad in (c.SetTenant("team a", 1, 1, 3.0), c.SetTenant("a", -1, None, 3.0),
                c.SetTenant("a", True, None, 3.0), c.SetTenant("a", None, "2", 3.0),
                c.SetTenant("a", 10 ** 7, None, 3.0)):
        res = st.apply(bad)
        assert not res.ok and res.code == "invalid", bad
    assert st.apply(c.SetTenant("team-a", 0, 0, 4.0)).ok
    assert "team-a" not in st.tenants


def test_a_session_over_its_tenant_s_quota_is_refused_when_it_opens():
    st = state()
    st.apply(c.SetTenant("a", None, 1, 1.0))
    assert st.apply(c.OpenSqlSession("h1", "", {}, A, 1.0, 0, "a", "alice")).ok
    res = st.apply(c.OpenSqlSession("h2", "", {}, A, 1.0, 0, "a", "alice"))
    assert not res.ok and res.code == "quota" and "tenant a holds 1" in res.error
    res = st.apply(c.OpenLivySession("h3", "sql", "", {}, A, 1.0, 0, (), "a", "alice"))
    assert not res.ok and res.code == "quota"
    assert st.apply(c.OpenSqlSession("h4", "", {}, A, 1.0, 0, "b", "bob")).ok  # b: none
    assert st.apply(c.OpenSqlSession("h5", "", {}, A, 1.0)).ok  # the default tenant
    assert (st.sessions["h1"].tenant, st.sessions["h1"].submitter) == ("a", "alice")
    st.apply(c.CloseSqlSessions(("h1",), 2.0, "closed"))
    assert st.apply(c.OpenSqlSession("h2", "", {}, A, 2.0, 0, "a", "alice")).ok


def test_placement_keeps_each_tenant_within_its_room():
    peers = [PeerLoad("p1", 8, 0), PeerLoad("p2", 8, 0)]
    waiting = [Waiting("a-big", 3, 1, "a"), Waiting("a-small", 1, 1, "a"),
               Waiting("a-more", 1, 1, "a"), Waiting("b-1", 4, 1, "b"),
               Waiting("free", 5, 1, "default")]
    placed = {j for j, _, _ in place(waiting, peers, room={"a": 2, "b": 4})}
    # a's big job waits (3 > 2), its small ones fill its room; b fills its own; no quota
    assert placed == {"a-small", "a-more", "b-1", "free"}
    assert {j for j, _, _ in place(waiting, peers)} == {j.job_id for j in waiting}


def test_usage_room_and_the_waiting_reason():
    used = quota.usage([("a", 2), (None, 1), ("a", 1), ("b", 4)])
    assert used == {"a": 3, "default": 1, "b": 4}
    assert quota.room({"a": 4, "b": 2, "c": 0}, used) == {"a": 1, "b": 0}
    assert quota.waiting_reason("a", 1, {"a": 4}, used) is None  # it fits
    assert "tenant a holds 3 of its 4 slots" in quota.waiting_reason("a", 2, {"a": 4}, used)
    assert "more than tenant a's quota of 4" in quota.waiting_reason("a", 5, {"a": 4}, used)
    assert quota.waiting_reason("c", 9, {"a": 4}, used) is None  # no quota


@pytest.mark.parametrize("who, tenant, sees", [
    (ROOT, "a", True), (ANYONE, None, True), (Credential("x", "read", None), "a", True),
    (Credential("x", "submit", "a"), "a", True), (Credential("x", "submit", "a"), "b", False),
    (Credential("x", "read", "a"), None, False), (Credential("x", "admin", "a"), "b", True)])
def test_who_sees_which_tenant_s_work(who, tenant, sees):
    assert who.may_see(tenant) is sees


def test_a_tenant_s_proxy_users_survive_the_codec_and_are_checked():
    from jm.policy.jobs.spec import proxy_refusal
    from raft import tenants as T
    from raft.protocol import PROTOCOL
    st = state()
    assert st.protocol == PROTOCOL  # (its one peer registered with this build's)
    cmd = c.decode(c.encode(c.SetTenant("team-a", None, None, 1.0, proxy_users=(
        "etl", "nobody", "etl"))))
    assert cmd.proxy_users == ("etl", "nobody", "etl")  # a tuple again, not a list
    assert st.apply(cmd).ok and T.proxy_users(st, "team-a") == ("etl", "nobody")
    for bad in (("root",), ("Bad User",), ("x",) * 65, ["etl"]):
        res = st.apply(c.SetTenant("team-a", None, None, 2.0, proxy_users=bad))
        assert not res.ok and res.code == "invalid", bad
    assert T.proxy_users(st, "team-b") == ()
    allowed = ("etl", "nobody", "daemon")
    assert proxy_refusal("etl", allowed, "proxy-user", "jobs", "team-a", ("etl",)) is None
    assert "tenant team-b's jobs may not run as 'etl'" in proxy_refusal(
        "etl", allowed, "proxy-user", "jobs", "team-b", ())
    assert proxy_refusal("etl", allowed, "proxy-user") is None  # no tenant: the peers' list
    assert "jobmanager.executor.proxy-users" in proxy_refusal(
        "root", allowed, "proxy-user", "jobs", "team-a", ("root",))
    # only proxy users kept: the record stays; none left: it goes
    assert st.apply(c.SetTenant("team-a", None, None, 3.0, proxy_users=())).ok
    assert "team-a" not in st.tenants


def test_a_tenant_s_savepoint_dirs_survive_the_codec_are_checked_and_need_protocol_6():
    from jm.policy.jobs import fsuri
    from raft import protocol as P, tenants as T
    st = state()
    cmd = c.decode(c.encode(c.SetTenant("team-a", None, None, 1.0, savepoint_dirs=(
        "/sp/a", "s3://bucket/a", "/sp/a"))))
    assert cmd.savepoint_dirs == ("/sp/a", "s3://bucket/a", "/sp/a")
    assert st.apply(cmd).ok and T.savepoint_dirs(st, "team-a") == ("/sp/a", "s3://bucket/a")
    for bad in (("relative",), ("/",), ("/x" * 600,), ("/d",) * 17, ["/sp"]):
        res = st.apply(c.SetTenant("team-a", None, None, 2.0, savepoint_dirs=bad))
        assert not res.ok and res.code == "invalid", bad
    assert T.savepoint_dirs(st, "team-b") == ()
    assert P.refusal(c.SetTenant("a", None, None, 1.0, savepoint_dirs=("/sp",)), 5)
    assert P.masked(c.SetTenant("a", 1, None, 1.0, savepoint_dirs=("/sp",)), 5) == \
        c.SetTenant("a", 1, None, 1.0)
    # under a granted directory: the directory itself or below it, not a sibling's prefix
    assert fsuri.within("/sp/a/savepoint-1", ["/sp/a"]) and fsuri.within("/sp/a", ["/sp/a/"])
    assert not fsuri.within("/sp/ab/x", ["/sp/a"]) and not fsuri.within("/sp", ["/sp/a"])
    assert fsuri.within("s3://bucket/a/x", ["/sp", "s3://bucket/a"])
    assert st.apply(c.SetTenant("team-a", None, None, 3.0, savepoint_dirs=())).ok
    assert "team-a" not in st.tenants
