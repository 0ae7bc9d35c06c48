"""The leader's promotion rounds (jm/cluster/members/voting.py) with a fake Raft and peer client:
a peer added back that is still catching up is looked at again a second later, and only
through a cheap read of its applied index (nothing is started on it while it is behind)."""
import asyncio
import contextlib
from types import SimpleNamespace

from jm.cluster.peerclient import PeerAnswer
from jm.cluster.members.voting import LAG_RETRY, RETRY_AFTER, VotingCore
from jm.policy.members.voters import PROMOTE_MAX_LAG
from raft.records import ALIVE

A, B, C = "10.0.0.1:6123", "10.0.0.2:6123", "10.0.0.3:6123"


class FakeRaft:
    def __init__(self) -> None:
        self.voters = [A, B]
        self.applied = 10_000
        self.changes: list[tuple[bool, str]] = []
        peers = {n: SimpleNamespace(id=n, state=ALIVE, declared_dead_at=None, leaving=False,
                                    draining=False) for n in (A, B, C)}
        self.state = SimpleNamespace(peers=peers)
        self.membership = self  # (RaftHost's role: members, change_member)

    def members(self) -> list[str]:
        return list(self.voters)

    @contextlib.contextmanager
    def read(self):
        yield self.state

    def leader(self) -> str:
        return A

    def applied_index(self) -> int:
        return self.applied

    async def change_member(self, add: bool, node: str, timeout: float) -> None:
        self.changes.append((add, node))
        self.voters.append(node)


class FakeClient:
    def __init__(self, applied: int) -> None:
        self.applied = applied
        self.calls: list[tuple[str, str]] = []

    async def call(self, method: str, url: str, timeout: float, json=None, **_) -> PeerAnswer:
        self.calls.append((method, url.split("/", 3)[-1]))
        if method == "GET":
            return PeerAnswer(200, {"status": "ok"}, index=self.applied)
        return PeerAnswer(200, {"node": C, "applied": self.applied}, index=self.applied)


def test_a_peer_behind_is_probed_each_second_and_promoted_once_caught_up():
    raft, client, now = FakeRaft(), FakeClient(10_000 - PROMOTE_MAX_LAG - 500), [100.0]
    core = VotingCore(raft, 3, 60.0, 5.0, lambda n: "http://" + n.split(":")[0] + ":8081",
                      client, wall=lambda: 1e9, mono=lambda: now[0])

    async def rounds():
        await core.step()
        assert client.calls == [("GET", "healthz")] and raft.changes == []
        now[0] += LAG_RETRY / 2
        await core.step()  # held off: not a second probe within LAG_RETRY
        assert client.calls == [("GET", "healthz")]
        now[0] += LAG_RETRY
        client.applied = 10_000 - 10  # caught up
        await core.step()
        assert client.calls[1:] == [("GET", "healthz"), ("POST", "cluster/voter")]
        assert raft.changes == [(True, C)] and raft.voters == [A, B, C]

    asyncio.run(rounds())


def test_a_peer_that_cannot_start_its_voting_node_waits_the_long_retry():
    raft, client, now = FakeRaft(), FakeClient(10_000), [100.0]

    async def refuse(method, url, timeout, json=None, **_):
        client.calls.append((method, url.split("/", 3)[-1]))
        if method == "GET":
            return PeerAnswer(200, {}, index=10_000)
        return PeerAnswer(400, {"errors": ["this peer votes already"]})
    client.call = refuse
    core = VotingCore(raft, 3, 60.0, 5.0, lambda n: "http://x:8081", client,
                      wall=lambda: 1e9, mono=lambda: now[0])

    async def rounds():
        await core.step()
        now[0] += LAG_RETRY * 2
        await core.step()
        assert client.calls == [("GET", "healthz"), ("POST", "cluster/voter")]
        now[0] += RETRY_AFTER
        await core.step()
        assert len(client.calls) == 4 and raft.changes == []

    asyncio.run(rounds())


def test_a_dead_voter_demoted_is_replaced_in_the_same_round():
    raft, client, now = FakeRaft(), FakeClient(10_000), [100.0]
    raft.voters = [A, B, "10.0.0.9:6123"]
    dead = SimpleNamespace(id="10.0.0.9:6123", state="DEAD", declared_dead_at=1e9 - 120,
                           leaving=False, draining=False)
    raft.state.peers[dead.id] = dead

    async def change(add, node, timeout):
        raft.changes.append((add, node))
        raft.voters = raft.voters + [node] if add else [v for v in raft.voters if v != node]
    raft.change_member = change
    core = VotingCore(raft, 3, 60.0, 5.0, lambda n: "http://x:8081", client,
                      wall=lambda: 1e9, mono=lambda: now[0])
    asyncio.run(core.step())
    assert raft.changes == [(False, dead.id), (True, C)] and raft.voters == [A, B, C]
