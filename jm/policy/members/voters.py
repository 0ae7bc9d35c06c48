"""The voting core (pure): how many peers vote, and which role a starting peer takes.

A cluster of any size keeps a small voting core: `raft.voters` peers (default 3, odd) are
Raft members; they vote, hold the log durably and one of them leads. Every other peer is
a non-voting member: a pysyncobj read-only node that receives the replicated log from the
leader and applies it to its own replica (REST reads, JobMasters, the SQL gateway run on
it as on any peer), sends its writes to the leader, and never counts in a quorum. So a
commit, an election and the leader's fan-out cost the same at 25 peers as at 3.

Roles come from the Raft membership itself (the voters) and from the replicated state
(peers registered or admitted that are not voters), never from a peer's own say-so: a
starting peer asks the seeds (`GET /cluster/peers`) and takes the role they give it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

VOTER, NON_VOTING = "voter", "non-voter"
DEFAULT_VOTERS = 3


class VotersError(ValueError):
    """A bad `raft.voters`, or a peer the cluster does not know."""


def voter_count(configured: Optional[int], masters: int) -> int:
    """How many voters a cluster created from `masters` lines starts with.

    `configured` (raft.voters as set; None: not set) must be odd, at least 1 and at most
    the number of members; unset, it is the largest odd number up to 3 and the members
    (two peers make one voter and one non-voter: two voters would stop at either loss)."""
    if configured is None:
        n = min(DEFAULT_VOTERS, max(masters, 1))
        return n if n % 2 else n - 1
    if configured < 1:
        raise VotersError(f"raft.voters: {configured} must be at least 1")
    if configured % 2 == 0:
        raise VotersError(f"raft.voters: {configured} is even; an odd number of voters "
                          "survives as many losses as the next even one, with a smaller "
                          "quorum")
    if configured > masters:
        raise VotersError(f"raft.voters: {configured} is more than the {masters} members "
                          "of conf/masters")
    return configured


@dataclass(frozen=True)
class SeedMembers:
    """What a seed answered: the voters, the non-voting members, the removed peers (after
    a Raft barrier: a majority's committed state), and its cluster's id."""
    voters: tuple
    non_voters: tuple
    removed: tuple
    cluster_id: Optional[str] = None


def removal_proven(me: str, seed: SeedMembers, own_cluster: Optional[str]) -> bool:
    """Whether a seed's answer proves that this peer was removed, so that its Raft data
    may be set aside (it could never serve again): the answer names it among the removed
    and is of the cluster this data belongs to (its identity file). A peer of another
    cluster (a wrong conf/masters) or an answer without an id proves nothing."""
    return bool(own_cluster) and seed.cluster_id == own_cluster and me in seed.removed


def start_role(me: str, masters: list[str], seed: Optional[SeedMembers],
               saved: Optional[tuple[list[str], str]], voters: int) -> tuple[str, list[str]]:
    """-> (VOTER or NON_VOTING, the voters to connect to) for node `me`.

    A seed answered: a voter if it lists `me` among the voters, a non-voter if among the
    non-voters or if `me` is a line of conf/masters that was never removed; else
    VotersError (not a member: add it first). No seed answered: the role and voters this
    peer saved last time, else the cluster is being created: the first `voters` lines of
    conf/masters vote."""
    if seed is not None:
        if me in seed.voters:
            return VOTER, list(seed.voters)
        if me in seed.non_voters or (me in masters and me not in seed.removed):
            return NON_VOTING, list(seed.voters)
        raise VotersError(f"{me} is not a member of the cluster (voters: "
                          f"{', '.join(seed.voters)})")
    if saved is not None:
        return saved[1], list(saved[0])
    core = masters[:voters]
    return (VOTER if me in core else NON_VOTING), core


# ---- healing the core (the leader's rounds, jm/cluster/members/voting.py) ----------------
PROMOTE_MAX_LAG = 1000  # commands a non-voter may be behind the promoter to be promoted


@dataclass(frozen=True)
class PeerView:
    """What the core step needs of a registered peer."""
    id: str
    alive: bool
    dead_since: Optional[float]  # wall time it was declared dead (None: alive)
    leaving: bool = False
    draining: bool = False


def core_step(voters: list[str], peers: list[PeerView], target: int, now: float,
              replace_after: float, leader: Optional[str],
              held_off: frozenset = frozenset()) -> Optional[tuple[str, str]]:
    """One change to the voting core, or None: ("demote", voter) takes a voter dead for
    `replace_after` s out of the Raft voters (it stays a member: back, it is a non-voter)
    when a live non-voter can replace it; ("promote", peer) makes a live non-voter, not
    draining or leaving (nor in `held_off`: tried a moment ago), a voter while the core
    has fewer than `target`, keeping it odd."""
    by_id = {p.id: p for p in peers}
    candidates = sorted(p.id for p in peers if p.id not in voters and p.alive
                        and not p.leaving and not p.draining and p.id not in held_off)
    if not candidates:
        return None
    dead = sorted(v for v in voters if v != leader and v in by_id and not by_id[v].alive
                  and by_id[v].dead_since is not None
                  and now - by_id[v].dead_since >= replace_after)
    if dead:
        return "demote", dead[0]
    # short of the target: promote, but never to an even core for long (two voters stop
    # at either loss, one does not stop at the non-voter's): with an odd core, only when
    # a second candidate can follow at once
    if len(voters) < target and (len(voters) % 2 == 0 or len(candidates) >= 2):
        return "promote", candidates[0]
    return None


def promotion_refusal(node: str, voters: list[str], target: int, peer: Optional[PeerView]
                      ) -> Optional[tuple[int, str]]:
    """Why `node` cannot be promoted now: (HTTP status, message), or None."""
    if node in voters:
        return 409, f"{node} is a voter already"
    if peer is None:
        return 404, f"{node} is not a member of the cluster"
    if len(voters) >= target:
        return 409, (f"the voting core is full ({len(voters)} voters, raft.voters {target}): "
                     "remove a voter first")
    if not peer.alive:
        return 409, f"{node} is not alive"
    if peer.leaving or peer.draining:
        return 409, f"{node} is draining or being removed"
    return None


@dataclass(frozen=True)
class CoreAfterRemoval:
    """The voting core after a voter's removal: `settled` once the removed voter is out
    of the Raft voters and no promotion is to come (`whole`: as many voters as the
    target; else short, `note` says why)."""
    settled: bool
    whole: bool
    voters: tuple
    note: str


def core_after_removal(removed: str, voters: list[str], peers: list[PeerView], target: int,
                       now: float, leader: Optional[str]) -> CoreAfterRemoval:
    """Whether a removed voter's place is taken (pure): the answer to its removal waits
    for this, so that losing another voter right after it still leaves a majority."""
    if removed in voters:
        return CoreAfterRemoval(False, False, tuple(voters),
                                f"{removed} still counts among the Raft voters")
    nxt = core_step(voters, peers, target, now, float("inf"), leader)
    if nxt is not None and nxt[0] == "promote":
        return CoreAfterRemoval(False, False, tuple(voters),
                                f"non-voting member {nxt[1]} is to take its place")
    if len(voters) >= target:
        return CoreAfterRemoval(True, True, tuple(voters), "")
    return CoreAfterRemoval(True, False, tuple(voters), (
        f"the voting core is short: {len(voters)} voters of raft.voters {target}, and no "
        "live non-voting member can take the removed voter's place (add a peer: it is "
        "promoted)"))
