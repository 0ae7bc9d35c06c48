"""The cluster's side of a peer's REST gateway: membership (jm/cluster/members/membership.py,
raft/members.py), promotions (jm/cluster/members/voting.py), heartbeats to the leader
(jm/cluster/members/beats.py), drains and rebalancing."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Optional

from jm.cluster.members.beats import parse_beat
from jm.cluster.api.apiwrites import Writes, api_errors
from jm.cluster.members.resourcemanager import rebalance_round, to_command
from jm.cluster.members.voting import PromotionRefused, peer_views
from jm.config import ConfigError, parse_peer
from jm.policy.members.voters import CoreAfterRemoval, core_after_removal
from jm.wire import views
from raft.commands import AdmitPeer, DrainPeer, RemovePeer

if TYPE_CHECKING:
    from jm.cluster.members.beats import LeaseRounds
    from jm.cluster.members.lease import Lease
    from jm.cluster.members.voting import VoterCandidate, VotingCore
    from jm.config import Config
    from raft.node import RaftHost
from jm.api import ApiError


class ClusterApi:
    """The cluster as REST asks it: its members, a peer's identity, promotions, drains,
    heartbeats to the leader, rebalancing."""

    def __init__(self, *, node: str, conf: "Config", raft: "RaftHost", writes: Writes,
                 lease: "Lease", rounds: "LeaseRounds", voting: "VotingCore",
                 candidate: "VoterCandidate", had_data: bool) -> None:
        self.node, self.conf, self.raft, self.writes = node, conf, raft, writes
        self.lease = lease          # this peer's (its registration, for identity())
        self.rounds = rounds        # the leader's heartbeat rounds
        self.voting = voting        # promotions of non-voters
        self.candidate = candidate  # this peer becoming a voter
        self.had_data = had_data    # it started with Raft data (a member before)

    def identity(self) -> dict:
        """What this replica knows of the cluster, without a leader (a starting peer whose
        Raft data is missing asks this: jm/policy/members/identity.py): its id and the peers
        registered in it (not removed). Until this peer's own registration is applied
        here, its replica may still be replaying the log (a restarted member applies its
        journal only once a leader tells it what is committed): it is `starting`, and
        cannot say yet whom the cluster knows; `has-data`: it started with Raft data (it
        belongs to a cluster, even before it can name it)."""
        with self.raft.read() as st:
            return {"cluster-id": st.cluster_id, "node": self.node,
                    "known": sorted(st.peers), "applied-index": self.raft.applied_index(),
                    "starting": not self.lease.registered.is_set(),
                    "has-data": self.had_data or bool(st.cluster_id)}

    @api_errors
    async def drain_node(self, node: str, drain: bool, deadline: Optional[float] = None
                         ) -> dict:
        jobs = await self.writes.write(DrainPeer(node, drain, time.time(), deadline))
        with self.raft.read() as st:
            state = views.peer_state(st, st.peers[node])
        return {"node": node, "state": state, "jobs": jobs}

    # ---- membership (jm/cluster/members/membership.py, raft/members.py) ------------------------

    @api_errors
    async def members(self) -> dict:
        """The Raft members, with their roles, after a Raft barrier: every committed
        change is in (a starting peer asks this to learn whether it is a member)."""
        await self.writes.barrier()
        leader = self.writes.leader()
        members = self.raft.membership.members()
        with self.raft.read() as st:
            pending = views.membership_pending(st, members)
            readers = views.non_voters(st, members)
            removed = sorted(st.removed)
            cluster_id = st.cluster_id
        return {"leader": leader, "cluster-id": cluster_id, "members": [
            {"id": m, "role": "leader" if m == leader else "follower", "self": m == self.node}
            for m in members],
            "non-voters": [dict(r, self=r["id"] == self.node) for r in readers],
            "voters-target": self.voting.target, "pending": pending, "removed": removed,
            "voting-core": _core_json(self._core_after("", members))}

    def _core_after(self, removed: str, voters: Optional[list] = None) -> CoreAfterRemoval:
        with self.raft.read() as st:
            peers = peer_views(st)
        voters = self.raft.membership.members() if voters is None else voters
        return core_after_removal(removed, voters, peers, self.voting.target, time.time(),
                                  self.writes.leader())

    async def _core_settled(self, removed: str) -> CoreAfterRemoval:
        """Until the removed voter's place is taken (or cannot be): a non-voter promoted
        and committed, by the leader's rounds; at most VOTER_WAIT s."""
        deadline = time.monotonic() + VOTER_WAIT
        core = self._core_after(removed)
        while not core.settled and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # polling the leader's rounds' changes, with a deadline
            core = self._core_after(removed)
        return core

    @api_errors
    async def promote_peer(self, node: str) -> dict:
        """POST /cluster/peers/{node}/promote: a non-voting member becomes a voter
        (jm/cluster/members/voting.py): 409 if the core is full or it is not caught up."""
        self.writes.writable()
        try:
            return await self.voting.promote(node)
        except PromotionRefused as exc:
            raise ApiError(exc.status, str(exc))

    async def prepare_voter(self, body: Any) -> dict:
        """POST /cluster/voter (peers only): start this peer's voting node."""
        voters = body.get("voters") if isinstance(body, dict) else None
        if not isinstance(voters, list) or not voters or \
                not all(isinstance(v, str) for v in voters):
            raise ApiError(400, 'the body must be {"voters": ["HOST:RAFT-PORT", ...]}')
        try:
            applied = self.candidate.begin(voters)
        except ValueError as exc:
            raise ApiError(409, str(exc))
        return {"node": self.node, "applied": applied}

    async def abandon_voter(self) -> dict:
        """DELETE /cluster/voter (peers only): stop a voting node not added after all."""
        return {"node": self.node, "abandoned": self.candidate.abandon()}

    @api_errors
    async def beat(self, body: Any) -> dict:
        """POST /cluster/beat on the leader: a peer's heartbeat, answered once the lease
        round holding it is committed (jm/cluster/members/beats.py); 503 if this is not the
        leader (the peer asks the new one)."""
        try:
            hb, urgent = parse_beat(body)
        except ValueError as exc:
            raise ApiError(400, str(exc))
        res = await self.rounds.accept(hb, urgent)
        # the round is applied here: the sender renews only once its replica has too
        return {"ok": res.ok, "code": res.code, "error": res.error,
                "index": self.raft.applied_index()}

    @api_errors
    async def add_peer(self, peer: str) -> dict:
        """Admit the peer in the state as a non-voting member (committed before the
        answer); once it runs, the leader promotes it if the voting core is short."""
        try:
            addr = parse_peer(peer, "peer")
        except ConfigError as exc:
            raise ApiError(400, str(exc))
        node = addr.node_id
        with self.raft.read() as st:
            known = node in st.peers or node in st.joining
        if node in self.raft.membership.members() or known:
            raise ApiError(409, f"{node} is a member already")
        self.writes.writable()
        with self.raft.read() as st:
            ports = {addr.rest_port, addr.raft_port}
            taken = [p.id for p in st.peers.values()
                     if p.host == addr.host and ports & {p.rest_port, p.raft_port}]
        if taken:
            raise ApiError(409, f"{peer} uses a port of peer {taken[0]}")
        res = await self.writes.submit(AdmitPeer(str(addr), time.time(), False))
        if not res.ok:
            raise ApiError(409, res.error)
        # a non-voting member first: the leader promotes it once it runs, if the voting
        # core is short of raft.voters (jm/cluster/members/voting.py)
        return {"id": node, "peer": str(addr), "role": "non-voter",
                "members": self.raft.membership.members(),
                "next": f"bin/jobmanager.sh start {addr}"}

    @api_errors
    async def remove_peer(self, node: str, deadline: Optional[float]) -> dict:
        """A live peer drains and leaves; a dead or never started one leaves at once."""
        if node.count(":") == 2:  # HOST:REST-PORT:RAFT-PORT
            try:
                node = parse_peer(node, "peer").node_id
            except ConfigError as exc:
                raise ApiError(400, str(exc))
        members = self.raft.membership.members()
        with self.raft.read() as st:
            known = node in st.peers or node in st.joining
        if node not in members and not known:
            raise ApiError(404, f"{node} is not a member of the cluster")
        if members == [node]:
            raise ApiError(409, f"{node} is the last member; stop the cluster instead")
        res = await self.writes.write(RemovePeer(node, time.time(), deadline))
        out = {"node": node, "state": res["state"], "jobs": res["jobs"]}
        if node in members and res["state"] == "REMOVED":
            # a voter out at once (dead, never started): answered once its place is taken,
            # so that losing another voter right after this answer leaves a majority
            out["voting-core"] = _core_json(await self._core_settled(node))
        elif node in members:
            out["voting-core"] = _core_json(self._core_after(node))  # (a drain first)
        return out

    @api_errors
    async def rebalance(self) -> dict:
        """One rebalance round now, planned from this peer's replica (the state machine
        re-checks every move when it commits)."""
        self.writes.writable()
        with self.raft.read() as st:
            moves = rebalance_round(st, self.conf["rebalance.threshold"],
                                    self.conf["rebalance.max-moves-per-round"])
        planned = [{"job": m.job_id, "from": m.source, "to": m.target} for m in moves]
        if not moves:
            return {"moves": [], "refused": []}
        res = await self.writes.submit(to_command(moves, "rebalance", time.time()))
        done = [p for p, r in zip(planned, res.value) if r.ok]
        refused = [dict(p, reason=r.error) for p, r in zip(planned, res.value) if not r.ok]
        return {"moves": done, "refused": refused}


VOTER_WAIT = 10.0  # s the removal of a voter waits for a non-voter to take its place (within
# a client's attempt: jm's is 15 s)


def _core_json(core: CoreAfterRemoval) -> dict:
    return {"voters": list(core.voters), "settled": core.settled, "whole": core.whole,
            "note": core.note}
