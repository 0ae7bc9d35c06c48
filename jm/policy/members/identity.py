"""Amnesia guard (pure): may a peer whose Raft data is what it is start as a voter?

Raft's safety rests on every member remembering what it acknowledged and whom it voted
for. A member whose data dir was wiped (a replaced disk, an operator's `rm -rf`) but that
starts under its old identity could vote for a candidate missing entries it had helped
commit, and those entries would be lost. So each peer keeps an identity file next to its
journal (the cluster's id and its own node id, written once it has registered), and at
start-up it asks the seeds (conf/masters) what they know, from their own replicas:

* it has Raft data: it starts; unless its identity names another node (a data dir copied
  from another peer) or another cluster than the seeds': then it must not start at all;
* it has none, and the cluster knows it (a registered member that was never removed): its
  data was lost. It starts only with `--rejoin`, and then as a non-voter (it answers no
  vote request and never campaigns) until it has applied everything the leader had
  committed when it first heard from it: a learner, in Raft's terms;
* it has none and nobody knows it: a new peer (a new cluster, or one added with
  `jm cluster add-peer`); it starts as usual.
* it has none and cannot tell (fail closed): no seed answered, or the only answers are of
  seeds still starting that have a cluster's data (they cannot say yet whom it knows).
  It waits for a better answer (`WAIT`) and, once `final`, refuses to start. Seeds that
  are starting too, with no data of any cluster (no Raft data at all: a seed restarted
  before it wrote its identity file has data all the same), are a new cluster being
  created: every
  starting peer answers GET /cluster/identity before its Raft starts
  (jm/cluster/members/identity.py), so the peers of a new cluster find each other.
`--rejoin` always makes the peer start as a non-voter until caught up (the safe way to
start a peer whose data is gone when no seed can answer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

VOTER, NON_VOTER = "voter", "non-voter"
WAIT = "wait"  # not decided yet: ask the seeds again (decide(..., final=False) only)


@dataclass(frozen=True)
class SeedView:
    """What one seed answered (GET /cluster/identity)."""
    cluster_id: Optional[str]
    known: tuple  # node ids registered in its replica and not removed
    starting: bool = False  # still starting: `known` is not read yet (its Raft is not up)
    has_data: bool = False  # it has Raft data (of a cluster, even if it cannot name it yet)


def decide(has_data: bool, identity: Optional[dict], node: str, views: list[SeedView],
           rejoin: bool, final: bool = True, seeds: bool = True) -> tuple[Optional[str], str]:
    """-> (mode (VOTER or NON_VOTER; WAIT unless `final`) or None: must not start, the
    reason / what to log). `views`: the seeds that answered; `seeds`: whether there are
    any (conf/masters lists other peers)."""
    clusters = {v.cluster_id for v in views if v.cluster_id}
    if has_data:
        if identity is not None:
            if identity.get("node") not in (None, node):
                return None, (f"this data dir belongs to peer {identity.get('node')}, not {node} "
                              "(copied from another peer?); give each peer its own "
                              "jobmanager.data-dir")
            mine = identity.get("cluster-id")
            others = clusters - {mine}
            if mine and others:
                return None, (f"this peer's data belongs to cluster {mine}, but its seeds "
                              f"(conf/masters) are cluster {', '.join(sorted(others))}; check "
                              "conf/masters and jobmanager.data-dir")
        if rejoin:
            return NON_VOTER, "--rejoin: not voting until it has caught up with the leader"
        return VOTER, "its Raft data is here"
    knowing = [v for v in views if node in v.known]
    if rejoin:
        return NON_VOTER, ("--rejoin: its Raft data is gone; not voting until it has caught up "
                           "with the leader")
    if knowing:
        return None, (f"the data dir of {node} holds no Raft data, but cluster "
                      f"{knowing[0].cluster_id or '?'} knows it as a member: its data was lost. "
                      f"Start it with --rejoin (bin/jobmanager.sh start ... --rejoin) to catch "
                      f"up before it votes, or remove it (jm cluster remove-peer {node}) and add "
                      "it again")
    if not seeds:
        return VOTER, "a new single-peer cluster (conf/masters lists no other peer)"
    if any(not v.starting for v in views):
        return VOTER, "a new peer"
    if views and not clusters and not any(v.has_data for v in views):
        return VOTER, "a new peer of a new cluster (its seeds are starting too, without data)"
    if not final:
        return WAIT, "no seed can say yet whether it knows this peer"
    return None, (f"the data dir of {node} holds no Raft data and no seed of conf/masters "
                  f"could say whether the cluster knows it ("
                  f"{'none answered' if not views else 'the seeds that answered are starting'}"
                  f"): a member whose data was lost must not vote. Start the other peers "
                  f"first; if this peer's data was lost, start it with --rejoin")
