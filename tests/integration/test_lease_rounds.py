"""Heartbeats through the leader's lease rounds on real peers (in-process: real pysyncobj
over TCP, real aiohttp): the Raft log holds LeaseRound entries carrying several peers'
heartbeats and no heartbeat entry of its own per peer; the leader's POST /cluster/beat
checks its input and a follower refuses it (the sender asks the leader)."""
from raft.commands import Heartbeat, LeaseRound
from tests.helpers import ahttp, apoll


async def test_heartbeats_reach_the_log_in_rounds(cluster3):
    c = cluster3
    seen = []
    hook = lambda command, result: seen.append((command, result))  # noqa: E731
    follower = next(p for p in c.peers if not p.parts.raft.is_leader())
    follower.parts.raft.apply_hooks.append(hook)
    try:
        # a few heartbeat intervals (500 ms) applied on a follower
        await apoll(lambda: sum(isinstance(cmd, LeaseRound) for cmd, _ in seen) >= 6, 30,
                    what="lease rounds applied")
    finally:
        follower.parts.raft.apply_hooks.remove(hook)
    assert not [cmd for cmd, _ in seen if isinstance(cmd, Heartbeat)]
    rounds = [(cmd, res) for cmd, res in seen if isinstance(cmd, LeaseRound)]
    nodes = {hb.node for cmd, _ in rounds for hb in cmd.beats}
    assert nodes == {p.node for p in c.peers}  # every peer's heartbeat, the leader's too
    assert max(len(cmd.beats) for cmd, _ in rounds) >= 2  # a round carries several peers
    assert all(r.ok for _, res in rounds for r in res.value)


async def test_the_beat_route_checks_input_and_only_the_leader_takes_beats(cluster3):
    c = cluster3
    lead = next(i for i, p in enumerate(c.peers) if p.parts.raft.is_leader())
    other = (lead + 1) % 3
    s, b = await ahttp("POST", c.url(lead) + "/cluster/beat", {"node": "x"})
    assert s == 400 and "time" in b["errors"][0]
    s, b = await ahttp("POST", c.url(lead) + "/cluster/beat",
                       {"node": "nobody:1", "time": 1.0})
    assert s == 200 and (b["ok"], b["code"], b["error"]) == (False, "not-found",
                                                             "unknown peer nobody:1")
    assert b["index"] >= 1  # the leader's applied index, the round included
    s, b = await ahttp("POST", c.url(other) + "/cluster/beat",
                       {"node": c.peers[other].node, "time": 1.0})
    assert s == 503 and "not the Raft leader" in b["errors"][0]
    s, nodes = await ahttp("GET", c.url(other) + "/nodes")
    assert all(n["state"] == "ALIVE" for n in nodes["nodes"])
