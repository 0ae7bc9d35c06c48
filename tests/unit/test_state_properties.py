"""Property tests for raft/state.py: random command sequences keep the invariants."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from jm.policy.members.placement import PeerLoad, Waiting, place
from raft import commands as c
from raft import state as S
from raft.state import ClusterState, Result

NODES = ["n0", "n1", "n2", "n3"]
NODE_SLOTS = {"n0": 1, "n1": 2, "n2": 3, "n3": 4}  # a peer always re-registers with its slots
JOBS = [f"j{i}" for i in range(7)]
STATUSES = sorted(S.REPORTABLE) + [S.CREATED, S.CANCELLING, "BOGUS"]

i = hs.integers(min_value=0, max_value=1000)
_ASSIGN_OK = hs.tuples(hs.just("assign_ok"), hs.lists(hs.tuples(i, i), min_size=1, max_size=4))
_REPORT_OK = hs.tuples(hs.just("report_ok"), i, hs.sampled_from(STATUSES), hs.booleans())
_SUBMIT = hs.tuples(hs.just("submit"), i, hs.integers(1, 3),
                    hs.sampled_from(["", "", "r1", "r2", "r3"]))
_SAVEPOINT = hs.tuples(hs.just("savepoint"), i, hs.sampled_from(["t1", "t2", "t3"]),
                       hs.booleans())
_COMPLETE = hs.tuples(hs.just("complete"), i, hs.sampled_from(["t1", "t2", "t3"]),
                      hs.booleans(), hs.integers(-1, 0))
ACTION = hs.one_of(
    # the common, meaningful moves are listed more than once to weight them up
    _ASSIGN_OK, _ASSIGN_OK, _REPORT_OK, _REPORT_OK, _REPORT_OK, _SUBMIT,
    hs.tuples(hs.just("place")),
    hs.tuples(hs.just("register"), i, i),
    hs.tuples(hs.just("heartbeat"), i, i),
    hs.tuples(hs.just("dead"), i),
    hs.tuples(hs.just("assign_any"), hs.lists(hs.tuples(i, i, hs.integers(-1, 4)), max_size=4)),
    hs.tuples(hs.just("report_any"), i, i, hs.integers(-1, 5), hs.sampled_from(STATUSES)),
    hs.tuples(hs.just("report_near"), i, hs.integers(-2, 2), i, hs.sampled_from(STATUSES)),
    hs.tuples(hs.just("report_near"), i, hs.integers(-2, 2), i, hs.sampled_from(STATUSES)),
    hs.tuples(hs.just("dead"), i),
    hs.tuples(hs.just("cancel"), i),
    hs.tuples(hs.just("junk"), hs.sampled_from([None, 1, "x", c.Assignment("j0", "n0", 0)])),
    hs.tuples(hs.just("move"), i, i), hs.tuples(hs.just("move"), i, i),
    hs.tuples(hs.just("move"), i, i),
    hs.tuples(hs.just("release"), i, hs.integers(-1, 1)),
    hs.tuples(hs.just("release"), i, hs.just(0)),
    hs.tuples(hs.just("drain"), i, hs.booleans()),
    _SAVEPOINT, _SAVEPOINT, _COMPLETE, _COMPLETE, _COMPLETE,
    # tenants' quotas and named pipelines (their records in snapshots too)
    hs.tuples(hs.just("tenant"), hs.sampled_from(["a", "b"]), hs.integers(0, 3),
              hs.integers(0, 2)),
    hs.tuples(hs.just("pipeline"), hs.sampled_from(["p1", "p2"]), i, hs.integers(0, 2)),
)
# a sequence starts with some peers and jobs, so that the interesting moves happen
SEQUENCE = hs.builds(
    lambda nodes, jobs, rest: [("register", NODES.index(n), 1) for n in nodes] + jobs + rest,
    hs.lists(hs.sampled_from(NODES), min_size=1, max_size=4, unique=True),
    hs.lists(_SUBMIT, min_size=1, max_size=6),
    hs.lists(ACTION, min_size=10, max_size=60),
)


def _pick(seq, k):
    return seq[k % len(seq)] if seq else None


def to_command(st: ClusterState, action, t: float):
    """Turn an abstract action into a concrete command, looking at the current state
    (so that 'plausible' commands are plausible). Pure with respect to `st`."""
    kind = action[0]
    if kind == "register":
        node = _pick(NODES, action[1])
        return c.RegisterPeer(node, "h", 8000, 9000, action[2], NODE_SLOTS[node], t)
    if kind == "heartbeat":
        return c.Heartbeat(_pick(NODES + ["ghost"], action[1]), t - (action[2] % 3))
    if kind == "dead":
        return c.DeclarePeerDead(_pick(NODES + ["ghost"], action[1]), t)
    if kind == "submit":
        job = _pick(JOBS, action[1])
        kind = "streaming" if JOBS.index(job) % 2 == 0 else "batch"
        return c.SubmitJob(job, {"slots": action[2], "job-type": kind}, t, action[3])
    if kind == "assign_ok":
        pending = [j for j in st.pending]
        alive = [p.id for p in st.alive_peers()]
        out = []
        for a, b in action[1]:
            job, node = _pick(pending, a), _pick(alive, b)
            if job is not None and node is not None:
                out.append(c.Assignment(job, node, st.jobs[job].epoch))
        return c.AssignJobs(tuple(out), t)
    if kind == "assign_any":
        return c.AssignJobs(tuple(c.Assignment(_pick(JOBS + ["ghost"], a),
                                               _pick(NODES + ["ghost"], b), e)
                                  for a, b, e in action[1]), t)
    if kind == "place":
        waiting = [Waiting(j, st.jobs[j].slots, st.jobs[j].epoch) for j in st.pending]
        peers = [PeerLoad(p.id, p.slots, st.slots_used(p.id)) for p in st.schedulable_peers()]
        return c.AssignJobs(tuple(c.Assignment(j, n, e) for j, n, e in place(waiting, peers)), t)
    if kind == "report_ok":
        owned = [j for j in st.jobs.values() if j.node is not None]
        job = _pick(owned, action[1])
        if job is None:
            return c.ReportStatuses(())
        failure = {"exception": "E", "traceback": "T"} if action[3] else None
        return c.ReportStatuses((c.StatusReport(job.id, job.epoch, job.node, action[2], t,
                                                {"r": 1}, failure),))
    if kind == "report_near":
        # a report about an owned job from a nearby epoch and/or another node
        owned = [j for j in st.jobs.values() if j.node is not None]
        job = _pick(owned, action[1])
        if job is None:
            return c.ReportStatuses(())
        return c.ReportStatuses((c.StatusReport(job.id, job.epoch + action[2],
                                                _pick(NODES, action[3]), action[4], t),))
    if kind == "report_any":
        return c.ReportStatuses((c.StatusReport(_pick(JOBS, action[1]), action[3],
                                                _pick(NODES, action[2]), action[4], t),))
    if kind == "cancel":
        return c.CancelJob(_pick(JOBS + ["ghost"], action[1]), t)
    owned = [j for j in st.jobs.values() if j.node is not None]
    if kind == "move":
        job = _pick(owned, action[1])
        target = _pick(sorted(st.peers), action[2])
        if job is None or target is None:
            return c.MoveJobs((), "test", t)
        return c.MoveJobs((c.Move(job.id, job.node, target, job.epoch),), "test", t)
    if kind == "release":
        job = _pick([j for j in owned if j.move_to] or owned, action[1])
        if job is None:
            return c.ReleaseJob("ghost", 0, "n0", t)
        return c.ReleaseJob(job.id, job.epoch + action[2], job.node, t)
    if kind == "drain":
        return c.DrainPeer(_pick(NODES + ["ghost"], action[1]), action[2], t)
    if kind == "savepoint":
        return c.TriggerSavepoint(_pick(JOBS + ["ghost"], action[1]), action[2], None,
                                  action[3], t)
    if kind == "complete":
        job = _pick([j for j in owned if j.pending_savepoints()] or owned, action[1])
        if job is None:
            return c.CompleteSavepoint("ghost", 0, "n0", action[2], "/sp", None, t)
        pending = [sp.id for sp in job.pending_savepoints()]
        return c.CompleteSavepoint(job.id, job.epoch + action[4], job.node,
                                   _pick(pending, 0) or action[2],
                                   None if action[3] else "/sp", "E" if action[3] else None, t)
    if kind == "tenant":
        return c.SetTenant(action[1], action[2] or None, action[3] or None, t)
    if kind == "pipeline":
        spec = {"entry": "m:f", "job-type": "streaming", "args": {"v": action[3]}}
        return c.PutPipeline(action[1], spec, _pick(JOBS, action[2]), t, "a")
    return action[1]  # junk


def check_invariants(st: ClusterState, prev_epochs: dict) -> None:
    # the counts and the ended index the state keeps match its jobs
    counts: dict[str, int] = {}
    for job in st.jobs.values():
        counts[job.status] = counts.get(job.status, 0) + 1
    assert st.status_counts == counts
    assert set(st.ended) == {j.id for j in st.jobs.values() if j.status in S.TERMINAL}
    owners: dict[str, list[str]] = {}
    for node, owned in st.assigned.items():
        assert node in st.peers, f"assigned index has unknown node {node}"
        for job_id, slots in owned.items():
            owners.setdefault(job_id, []).append(node)
            job = st.jobs[job_id]
            assert job.node == node, f"index says {job_id} on {node}, job says {job.node}"
            assert slots == job.slots
    for job in st.jobs.values():
        # at most one owner, and the index agrees with job.node
        assert len(owners.get(job.id, [])) <= 1
        assert owners.get(job.id, [None])[0] == job.node
        if job.node is not None:
            peer = st.peers.get(job.node)
            assert peer is not None and peer.state == S.ALIVE, \
                f"{job.id} owned by {job.node} which is {peer and peer.state}"
        # epochs never go back
        assert job.epoch >= prev_epochs.get(job.id, 0)
        prev_epochs[job.id] = job.epoch
        # terminal jobs own no slot and have an end time
        if job.status in S.TERMINAL:
            assert job.node is None and job.id not in owners
            assert job.end_time is not None
            assert job.id not in st.pending
        # waiting jobs are exactly the non-terminal unowned ones
        assert (job.id in st.pending) == (job.node is None and job.status not in S.TERMINAL)
        if job.node is None and job.status not in S.TERMINAL:
            assert job.status == S.CREATED
        # an open attempt exactly while owned; attempts numbered by epoch
        open_attempts = [a for a in job.attempts if a.end is None]
        assert len(open_attempts) == (1 if job.node is not None else 0)
        if job.node is not None:
            assert job.attempts[-1].end is None and job.attempts[-1].node == job.node
        # (the first and the last K: K smaller once the job ended, records.compact_ended)
        keep = S.ENDED_ATTEMPTS_KEPT if job.status in S.TERMINAL else S.MAX_ATTEMPTS_KEPT
        assert [a.epoch for a in job.attempts] == (
            list(range(1, job.epoch + 1)) if job.epoch <= keep + 1
            else [1] + list(range(job.epoch - keep + 1, job.epoch + 1)))
        # cancel semantics
        if job.status == S.CANCELLING:
            assert job.cancel_requested and job.node is not None
        if job.cancel_requested and job.status not in S.TERMINAL:
            assert job.status == S.CANCELLING
        assert len(job.failures) <= (S.ENDED_FAILURES_KEPT if job.status in S.TERMINAL
                                     else S.MAX_FAILURES_KEPT)
        assert job.failure_count >= len(job.failures)
        # planned moves: a reservation exactly while a streaming job is on its way
        if job.move_to is not None:
            assert job.node is not None and job.status not in S.TERMINAL and job.streaming
            assert st.incoming.get(job.move_to, {}).get(job.id) == job.slots
            assert not job.cancel_requested and job.move_to != job.node
        # savepoints: a stop in progress has its request; ended jobs have none pending
        if job.stop_trigger is not None:
            sp = job.savepoints[job.stop_trigger]
            assert sp.stop and sp.status == S.IN_PROGRESS and job.status not in S.TERMINAL
        if job.status in S.TERMINAL:
            assert job.pending_savepoints() == [] and job.move_to is None
        assert len(job.savepoints) <= S.MAX_SAVEPOINTS_KEPT + len(job.pending_savepoints())
    for node, moving in st.incoming.items():
        for job_id in moving:
            assert st.jobs[job_id].move_to == node
            peer = st.peers[node]
            assert peer.state == S.ALIVE and not peer.draining
    for node, peer in st.peers.items():
        used = st.slots_used(node)
        assert used <= peer.slots, f"{node} uses {used} of {peer.slots} slots"
        if peer.state == S.DEAD:
            assert used == 0
    assert set(st.pending) <= set(st.jobs)
    for rid, job_id in st.request_ids.items():
        assert job_id in st.jobs and st.jobs[job_id].request_id == rid


def state_snapshot(st: ClusterState) -> dict:
    return copy.deepcopy(vars(st))


SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(SEQUENCE)
def test_invariants_hold_after_every_command_and_apply_is_deterministic(actions):
    st = ClusterState()
    prev_epochs: dict = {}
    commands, results = [], []
    for n, action in enumerate(actions):
        cmd = to_command(st, action, float(n + 1))
        before = None
        if action[0] in ("report_any", "report_near") and cmd.reports:
            r = cmd.reports[0]
            job = st.jobs.get(r.job_id)
            if job is not None and (job.node is None or (r.epoch, r.node) != (job.epoch, job.node)):
                before = copy.deepcopy(job)
        res = st.apply(cmd)  # must never raise
        assert isinstance(res, Result)
        if res.ok is False:
            assert res.code in ("exists", "not-found", "conflict", "stale", "invalid")
        if action[0] == "place":
            # the placement policy fed from the same state is never refused
            assert res.ok and res.value["refused"] == []
        if action[0] == "assign_ok" and res.ok:
            # plausible assignments are refused only for capacity or a repeated job
            for job_id in res.value["refused"]:
                job = st.jobs[job_id]
                repeated = sum(a.job_id == job_id for a in cmd.assignments) > 1
                assert repeated or job.node is None
        if before is not None:
            # a report that is not from the current owner's epoch changes nothing
            assert res.value[0].code == "stale"
            assert st.jobs[before.id] == before
        commands.append(cmd)
        results.append(res)
        check_invariants(st, prev_epochs)

    a, b = ClusterState(), ClusterState()
    ra = [a.apply(cmd) for cmd in commands]
    rb = [b.apply(cmd) for cmd in commands]
    assert ra == rb == results
    assert state_snapshot(a) == state_snapshot(b) == state_snapshot(st)


@SETTINGS
@given(SEQUENCE)
def test_replay_through_codec_gives_same_state(actions):
    """Every peer decodes the log before applying: encode/decode must not change outcomes."""
    st = ClusterState()
    commands = []
    for n, action in enumerate(actions):
        cmd = to_command(st, action, float(n + 1))
        st.apply(cmd)
        if type(cmd).__name__ in c.COMMAND_TYPES:
            commands.append(cmd)
    direct, decoded = ClusterState(), ClusterState()
    for cmd in commands:
        r1 = direct.apply(cmd)
        r2 = decoded.apply(c.decode(c.encode(cmd)))
        assert r1 == r2
    assert state_snapshot(direct) == state_snapshot(decoded)


@SETTINGS
@given(SEQUENCE, hs.integers(0, 1000))
def test_declare_dead_touches_only_that_peer(actions, k):
    st = ClusterState()
    for n, action in enumerate(actions):
        st.apply(to_command(st, action, float(n + 1)))
    node = _pick(NODES, k)
    before = copy.deepcopy(st.jobs)
    was_alive = node in st.peers and st.peers[node].state == S.ALIVE
    res = st.apply(c.DeclarePeerDead(node, 10_000.0))
    if node not in st.peers:
        assert res.code == "not-found"
        return
    assert res.ok
    for job_id, old in before.items():
        new = st.jobs[job_id]
        if old.node == node and was_alive:
            assert new.node is None
            assert new.attempts[-1].reason == "peer-lost"
            assert new.attempts[-1].end == 10_000.0
            if old.cancel_requested:
                assert new.status == S.CANCELED and job_id not in res.value
            else:
                assert new.status == S.CREATED and job_id in res.value
                assert job_id in st.pending
            assert new.epoch == old.epoch
        else:
            if old.move_to == node and was_alive:  # a move onto the dead peer is withdrawn
                assert new.move_to is None and new.node == old.node
                old.move_to = None
            assert new == old, f"{job_id} changed though it was not on {node}"
