"""Heartbeats without a replicated write per peer: every peer sends its heartbeat to the
Raft leader (`POST /cluster/beat`; the leader's own goes straight in), and the leader
commits the heartbeats of all peers it heard from as one `LeaseRound` entry per `linger`
(half a heartbeat interval). A peer's lease is renewed, as before, from the send time of
a heartbeat once the entry holding it is committed and applied on the peer itself: the
leader answers the POST with that heartbeat's Result and its applied index after the
commit, and the peer waits until its own replica has applied that index. So the cluster
writes two entries a heartbeat interval whatever its size, instead of one per peer.

A peer whose own replica is stuck (a full disk, a wedged Raft thread) must not keep its
lease in the replicated state while it cannot keep it itself: it sends no heartbeat while
a round acknowledged to it longer than a lease ago is still unapplied here, so the leader
stops renewing it and declares it dead, and its jobs move (`stuck_round`).

Safety is the same as with one entry per heartbeat (docs/architecture.md, "Liveness"):
an acknowledgement still means a committed entry, which a leader cut off from the
majority cannot make; every replica applies the rounds, so a new leader's liveness clocks
come from its own apply times, as before."""
from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Callable, Optional

from jm.cluster.batcher import Batcher
from jm.cluster.peerclient import PeerClient, PeerUnreachable
from raft.commands import Heartbeat, LeaseRound
from raft.node import RaftUnavailable
from raft.state import Result

log = logging.getLogger("jm.cluster.beats")

MAX_DISK_NOTE = 512  # characters of a heartbeat's disk warning sent over HTTP
MAX_LACKS = 1000  # tenants a heartbeat may name as lacking their OS user
MAX_ACKS = 16  # acknowledged rounds remembered until applied (the oldest ones decide)


def beat_body(hb: Heartbeat, urgent: bool = False) -> dict:
    return {"node": hb.node, "time": hb.time, "ready": hb.ready, "disk-low": hb.disk_low,
            "lacks": list(hb.lacks), "urgent": urgent}


def parse_beat(body: Any) -> tuple[Heartbeat, bool]:
    """A heartbeat and its urgency from its JSON body; ValueError naming what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("a heartbeat is a JSON object")
    node, t = body.get("node"), body.get("time")
    ready, disk = body.get("ready", True), body.get("disk-low", "")
    urgent, lacks = body.get("urgent", False), body.get("lacks", [])
    if not isinstance(node, str) or not node:
        raise ValueError("node must be a peer's node id")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError("time must be a number")
    if not isinstance(ready, bool) or not isinstance(disk, str) or len(disk) > MAX_DISK_NOTE \
            or not isinstance(urgent, bool):
        raise ValueError("ready and urgent must be booleans and disk-low a short string")
    if not isinstance(lacks, list) or len(lacks) > MAX_LACKS or \
            not all(isinstance(t, str) and 0 < len(t) <= 200 for t in lacks):
        raise ValueError(f"lacks must be a list of at most {MAX_LACKS} tenant names")
    return Heartbeat(node, float(t), ready, disk, tuple(lacks)), urgent


def stuck_round(acks: tuple[tuple[int, float], ...], applied: int, now: float,
                within: float) -> tuple[tuple[tuple[int, float], ...], Optional[int]]:
    """The acknowledged rounds (index, when acknowledged) this replica has not applied yet,
    and the index of one acknowledged more than `within` s ago (None: none is): while
    there is one, this replica is stuck and sends no heartbeat."""
    left = tuple(a for a in acks if a[0] > applied)
    late = next((i for i, t in left if now - t > within), None)
    return left, late


class LeaseRounds:
    """On the leader: heartbeats in, one committed LeaseRound per `linger` out."""

    def __init__(self, raft: Any, linger: float, timeout: float) -> None:
        self.raft = raft
        self.batcher = Batcher(raft, lambda beats: LeaseRound(tuple(beats)), timeout,
                               retry=False, linger=linger)

    def start(self) -> None:
        self.batcher.start()

    async def accept(self, hb: Heartbeat, urgent: bool = False) -> Result:
        """The heartbeat's Result once its round is committed; RaftUnavailable when this
        peer is not the leader or the round was not committed in time. An urgent one (its
        sender missed renewals, or it tells a change) is committed without the linger."""
        if not self.raft.is_leader():
            raise RaftUnavailable("this peer is not the Raft leader")
        return await self.batcher.submit(hb, urgent)

    async def close(self) -> None:
        await self.batcher.close()


class BeatSender:
    """This peer's side: a heartbeat goes to the leader's rounds, over HTTP unless this
    peer leads. `leader_url(node)` is the REST base URL of a peer (None: not known)."""

    def __init__(self, raft: Any, node: str, rounds: LeaseRounds,
                 leader_url: Callable[[str], Optional[str]], client: PeerClient) -> None:
        self.raft, self.node, self.rounds = raft, node, rounds
        self.leader_url = leader_url
        self.client = client
        self._acks: tuple[tuple[int, float], ...] = ()  # rounds acknowledged, not applied

    async def send(self, hb: Heartbeat, timeout: float, urgent: bool = False) -> Result:
        loop = asyncio.get_running_loop()
        self._acks, late = stuck_round(self._acks, self.raft.applied_index(), loop.time(),
                                       timeout)
        if late is not None:
            raise RaftUnavailable(f"this replica has not applied index {late} (a lease round "
                                  f"acknowledged over {timeout:g} s ago): no heartbeat until "
                                  "it has")
        leader = self.raft.leader()
        if leader is None:
            raise RaftUnavailable("no Raft leader at the moment")
        if leader == self.node:
            return await asyncio.wait_for(self.rounds.accept(hb, urgent), timeout)
        url = self.leader_url(leader)
        if url is None:
            raise RaftUnavailable(f"the leader {leader} has not registered yet")
        deadline = loop.time() + timeout
        try:
            answer = await self.client.call("POST", url + "/cluster/beat", timeout,
                                            json=beat_body(hb, urgent))
        except PeerUnreachable as exc:
            raise RaftUnavailable(f"heartbeat to the leader {leader}: {exc}") from None
        body = answer.body
        if answer.status != 200 or not isinstance(body, dict):
            raise RaftUnavailable(f"heartbeat to the leader {leader}: {answer.status} "
                                  f"{answer.errors()}")
        if not body.get("ok"):
            return Result.fail(str(body.get("code") or "invalid"), str(body.get("error") or ""))
        # renewed only once this replica has applied the round too: a peer whose own Raft
        # is stuck (a full disk, a wedged thread) cannot see moves or cancels, and must
        # lose its lease as it did when it committed its heartbeats itself
        index = body.get("index")
        if isinstance(index, int) and len(self._acks) < MAX_ACKS:
            self._acks += ((index, loop.time()),)
        if isinstance(index, int) and not await self.raft.wait_applied(
                index, max(0.0, deadline - loop.time())):
            raise RaftUnavailable(f"this replica has not applied index {index} (the "
                                  "leader's lease round) in time")
        return Result(True)
