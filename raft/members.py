"""Cluster membership in the replicated state (pure, like raft/state.py).

The Raft membership itself belongs to pysyncobj (one change at a time, made by the
leader). The state holds what the peers need to agree on around it:

* `joining`: members added with POST /cluster/peers that have not registered yet
  (node id -> "host:rest-port:raft-port"), so that every peer can show them;
  `joining_readers` names those that join as non-voting members (jm/policy/members/voters.py):
  the leader adds the others to the Raft voters;
* `removed`: tombstones (node id -> time) of peers taken out of the cluster; a removed
  peer cannot register again (it stops), and the leader takes every tombstoned node out
  of the Raft membership; `removed_dead` names those that were not alive when removed
  (declared dead or never registered): nothing waits for them to hear of it;
* a live peer being removed drains first (`leaving`): its streaming jobs move with
  savepoints, its batch jobs finish (or, after its drain deadline, restart elsewhere),
  and the leader retires it once it holds no job.
"""
from __future__ import annotations

from raft import commands as c, connect
from raft import sessions as sql
from raft.records import ALIVE, Result


def node_of(peer: str) -> str:
    """"host:rest-port:raft-port" -> the node id "host:raft-port"."""
    host, _rest, raft = peer.rsplit(":", 2)
    return f"{host}:{raft}"


def holds_jobs(state, node: str) -> bool:
    return bool(state.assigned.get(node)) or bool(state.incoming.get(node))


def admit(state, cmd: c.AdmitPeer) -> Result:
    node = node_of(cmd.peer)
    state.removed.pop(node, None)
    state.removed_dead.discard(node)
    if node not in state.peers:
        state.joining[node] = cmd.peer
        if cmd.voter:
            state.joining_readers.discard(node)
        else:
            state.joining_readers.add(node)
    return Result(True, node)


def remove(state, cmd: c.RemovePeer) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is not None and peer.state == ALIVE:
        peer.draining, peer.leaving = True, True
        if cmd.deadline is not None:
            peer.drain_deadline = float(cmd.deadline)
        for job_id in list(state.incoming.get(cmd.node, {})):  # moves planned onto it
            state._cancel_move(state.jobs[job_id])
        return Result(True, {"state": "LEAVING", "jobs": state.jobs_of(cmd.node)})
    # dead (its jobs moved when it was declared dead) or never registered: at once
    return _retire(state, cmd.node, cmd.time)


def retire(state, cmd: c.RetirePeer) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is not None and peer.state == ALIVE:
        if not peer.leaving:
            return Result.fail("conflict", f"peer {cmd.node} is not being removed")
        if holds_jobs(state, cmd.node):
            return Result.fail("conflict", f"peer {cmd.node} still holds jobs")
    return _retire(state, cmd.node, cmd.time)


def _retire(state, node: str, time: float) -> Result:
    if holds_jobs(state, node):  # never: a dead peer's jobs were requeued
        return Result.fail("conflict", f"peer {node} still holds jobs")
    peer = state.peers.get(node)
    if peer is None or peer.state != ALIVE:
        state.removed_dead.add(node)
    if peer is not None:
        state.peers[node].state = "REMOVED"  # for the session moves below: not live
        sql.move_sessions_of(state, node, time)
        connect.drop_sessions_of(state, node)
        del state.peers[node]
        state.refresh_protocol()  # (a peer of an older build gone: maybe a newer protocol)
    state.assigned.pop(node, None)
    state.incoming.pop(node, None)
    state.joining.pop(node, None)
    state.joining_readers.discard(node)
    state.removed[node] = time
    return Result(True, {"state": "REMOVED", "jobs": []})


HANDLERS = {
    c.AdmitPeer: admit,
    c.RemovePeer: remove,
    c.RetirePeer: retire,
}
