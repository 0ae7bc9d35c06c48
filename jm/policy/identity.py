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
`--rejoin` always makes the peer start as a non-voter until caught up (the safe way to
start a peer whose data is gone when no seed answers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

VOTER, NON_VOTER = "voter", "non-voter"


@dataclass(frozen=True)
class SeedView:
    """What one seed answered (GET /cluster/identity)."""
    cluster_id: Optional[str]
    known: tuple  # node ids registered in its replica and not removed


def decide(has_data: bool, identity: Optional[dict], node: str, views: list[SeedView],
           rejoin: bool) -> tuple[Optional[str], str]:
    """-> (mode (VOTER or NON_VOTER) or None: must not start, the reason / what to log)."""
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
    return VOTER, ("a new peer" if views else
                   "a new peer (no seed answered; after a lost disk, start with --rejoin)")
