"""raft/protocol.py: replicas of two builds hold the same state (pure). A command or field
newer than the cluster's protocol is applied as an older replica decodes it (a command it
does not know: refused; a field it does not know: its default); a peer refuses to send
what would lose its meaning; the cluster's protocol is its peers' lowest and never goes
down; the protocol-1 commands are pinned, so a new field cannot come without an entry."""
import dataclasses
import json
import os

import msgpack
import pytest

from raft import commands as c
from raft import protocol as P
from raft.state import ClusterState

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "protocol1_commands.json")) as _f:
    PROTOCOL1 = json.load(_f)  # every command and its fields in the builds before protocols


def reg(st, node, protocol, time=1.0):
    return st.apply(c.RegisterPeer(node, "h", 8000, 9000, 1, 4, time, protocol=protocol))


def test_every_command_or_field_newer_than_protocol_1_has_an_entry():
    for name, cls in c.COMMAND_TYPES.items():
        fields = [f.name for f in dataclasses.fields(cls)]
        if name not in PROTOCOL1:
            assert 1 < P.COMMANDS.get(name, 0) <= P.PROTOCOL, f"{name}: no entry in COMMANDS"
            continue
        assert set(PROTOCOL1[name]) <= set(fields), f"{name} lost a field older peers send"
        for field in set(fields) - set(PROTOCOL1[name]):
            key = (name, field)
            assert key in P.ANNOUNCED or 1 < P.FIELDS.get(key, (0,))[0] <= P.PROTOCOL, \
                f"{name}.{field}: no entry in raft/protocol.py FIELDS"
    for name in P.COMMANDS:
        assert name in c.COMMAND_TYPES
    for name, field in list(P.FIELDS) + list(P.ABSENT) + list(P.ANNOUNCED):
        assert field in {f.name for f in dataclasses.fields(c.COMMAND_TYPES[name])}
        assert field not in PROTOCOL1.get(name, ())


def test_the_default_tenant_is_raft_tenants_one():
    from raft.tenants import DEFAULT  # (raft.tenants imports raft.commands: a copy here)
    assert P.DEFAULT_TENANT == DEFAULT


def test_masked_is_what_an_older_replica_decodes():
    job = c.SubmitJob("j1", {"entry": "m:f"}, 1.0, "", "team-a", "alice")
    assert P.masked(job, 1) == c.SubmitJob("j1", {"entry": "m:f"}, 1.0, "")
    assert P.masked(job, 2) is job
    assert P.masked(c.SetTenant("a", 1, 1, 1.0), 1) is None
    batch = c.SubmitJobs((job, c.SubmitJob("j2", {}, 1.0)))
    assert P.masked(batch, 1).jobs == (c.SubmitJob("j1", {"entry": "m:f"}, 1.0, ""),
                                       c.SubmitJob("j2", {}, 1.0))
    report = c.ReportStatuses((c.StatusReport("j1", 1, "n1", "RUNNING", 1.0,
                                              progress={"time": 1.0}),))
    assert P.masked(report, 1).reports[0].progress is None
    beat = c.Heartbeat("n1", 1.0)
    assert P.masked(beat, 1) is beat  # nothing newer in it: the same object
    # a newer command inside a batch: an older replica cannot decode the batch at all
    assert P.masked(c.SubmitJobs((job, c.SetTenant("a", 1, 1, 1.0))), 1) is None


@pytest.mark.parametrize("command, refused", [
    (c.SetTenant("a", 1, 1, 1.0), "tenants' quotas"),
    (c.PutPipeline("p", {}, "j", 1.0), "named pipelines"),
    (c.SubmitJob("j", {}, 1.0, "", "team-a"), "tenants' work"),
    (c.SubmitJob("j", {"proxy-user": "etl"}, 1.0), "proxy users"),
    (c.SubmitJobs((c.SubmitJob("j", {}, 1.0, "", "team-a"),)), "tenants' work"),
    (c.AddArtifact("sha256:x", "a.py", 1, "n1", 1.0, ("team-a",)), "tenants' artifacts"),
    (c.OpenLivySession("h", "pyspark", "", {}, "n1", 1.0, proxy_user="etl"), "proxy users"),
    (c.OpenLivySession("h", "pyspark", "", {}, "n1", 1.0, proxy_user="default"),
     "proxy users"),  # (a user, not the default tenant)
    (c.SubmitJob("j", {}, 1.0, "", None, "alice"), None),  # a name only informs: cut
    (c.AddArtifact("sha256:x", "a.py", 1, "n1", 1.0, ("default",), "bob"), None),
    (c.StatusReport("j", 1, "n1", "RUNNING", 1.0, progress={"t": 1}), None),
    (c.DrainPeer("n1", True, 1.0, by_stop=True), None),
])
def test_a_peer_refuses_to_send_what_protocol_1_would_cut_the_meaning_of(command, refused):
    why = P.refusal(command, 1)
    if refused is None:
        assert why is None
    else:
        assert why.startswith(refused) and "protocol 2" in why and "protocol 1" in why, why
    assert P.refusal(command, 2) is None


def test_a_tenant_s_os_user_needs_protocol_3_and_is_cut_whole_below_it():
    cmd = c.SetTenant("a", 1, None, 1.0, "etl")
    why = P.refusal(cmd, 2)
    assert why.startswith("tenants' OS users") and "protocol 3" in why, why
    assert P.refusal(c.SetTenant("a", 1, None, 1.0, ""), 2) is None  # none: nothing to cut
    assert P.refusal(cmd, 3) is None
    assert P.masked(cmd, 2) == c.SetTenant("a", 1, None, 1.0)  # as a protocol-2 replica
    st = ClusterState()
    assert reg(st, "n1", 3).ok and st.apply(cmd).ok and st.tenants["a"].os_user == "etl"


def test_a_mixed_cluster_applies_as_its_oldest_peer_and_never_goes_down():
    st = ClusterState()
    assert st.protocol == P.BASELINE and reg(st, "n1", 1).ok and reg(st, "n2", 2).ok
    assert st.protocol == 1
    res = st.apply(c.SetTenant("a", 1, None, 2.0))
    assert not res.ok and res.code == "protocol" and st.tenants == {}
    assert st.apply(c.SubmitJob("j1", {"entry": "m:f"}, 2.0, "", "team-a", "al")).ok
    assert (st.jobs["j1"].tenant, st.jobs["j1"].submitter) == (None, "")
    assert reg(st, "n1", 2, time=3.0).ok and st.protocol == 2  # the last one upgraded
    assert st.apply(c.SetTenant("a", 1, None, 4.0)).ok
    res = reg(st, "n3", 1, time=5.0)  # an older build joining, or one going back
    assert not res.ok and res.code == "protocol" and "n3" not in st.peers
    assert "speaks protocol 1 and the cluster runs protocol 2" in res.error
    assert st.apply(c.SubmitJob("j2", {"entry": "m:f"}, 6.0)).ok
    assert st.apply(c.AssignJobs((c.Assignment("j2", "n1", st.jobs["j2"].epoch),), 6.0)).ok
    # n1 back with an older build: refused, and its last incarnation is dead (its jobs
    # wait for another peer; its heartbeats no longer keep it alive)
    res = reg(st, "n1", 1, time=7.0)
    assert not res.ok and res.code == "protocol"
    assert st.peers["n1"].state == "DEAD" and st.peers["n1"].protocol == 2
    assert st.jobs["j2"].node is None and st.protocol == 2
    assert st.apply(c.Heartbeat("n1", 8.0)).code == "stale"


def test_removing_the_last_older_peer_raises_the_protocol():
    st = ClusterState()
    assert reg(st, "n1", 1).ok and reg(st, "n2", 1).ok and reg(st, "n1", 2, 1.5).ok
    assert st.apply(c.DeclarePeerDead("n2", 2.0)).ok and st.protocol == 1  # dead: held
    assert st.apply(c.RemovePeer("n2", 3.0)).ok
    assert "n2" not in st.peers and st.protocol == 2


def test_an_older_build_s_registration_decodes_as_protocol_1():
    blob = c.encode(c.RegisterPeer("n1", "h", 1, 2, 3, 4, 5.0))
    name, fields = msgpack.unpackb(msgpack.unpackb(blob, raw=False).data, raw=False)
    assert name == "RegisterPeer" and fields.pop("protocol") == P.PROTOCOL
    old = msgpack.packb(msgpack.ExtType(1, msgpack.packb([name, fields], use_bin_type=True)),
                        use_bin_type=True)  # what a build without the field sends
    assert c.decode(old).protocol == P.BASELINE
    assert c.decode(blob).protocol == P.PROTOCOL


def test_an_older_snapshot_s_state_runs_protocol_1():
    st = ClusterState()
    reg(st, "n1", 2)
    data = dict(vars(st))
    data.pop("protocol")
    for peer in data["peers"].values():
        del peer.__dict__["protocol"]  # (records of older builds lack it)
    old = ClusterState.__new__(ClusterState)
    old.__setstate__(data)
    assert old.protocol == P.BASELINE and old.peers["n1"].protocol == P.BASELINE
