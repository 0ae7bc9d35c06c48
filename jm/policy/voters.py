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
    """What a seed answered: the voters, the non-voting members, the removed peers."""
    voters: tuple
    non_voters: tuple
    removed: tuple


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
