"""Read models: pure functions from ClusterState to the REST API's JSON (kebab-case)."""
from __future__ import annotations

from typing import Any, Optional

from jm.wire.flinkerror import failure_cause
from raft import state as S
from raft.state import ClusterState, JobRecord


# the Flink REST API this cluster answers like (Flink's /overview and /config name it)
FLINK_REST_VERSION = "2.3.0"
FLINK_COMMIT = "jobmanager-cluster"


def _ms(t: Optional[float]) -> int:
    return -1 if t is None else int(t * 1000)


def overview(st: ClusterState, leader: Optional[str]) -> dict:
    alive = st.alive_peers()
    # from the counts the state keeps and the (short) placement queue: no walk over jobs
    by = st.status_counts
    counts = {"finished": by.get(S.FINISHED, 0), "failed": by.get(S.FAILED, 0),
              "cancelled": by.get(S.CANCELED, 0),
              "created": sum(1 for jid in st.pending if (j := st.jobs.get(jid)) is not None
                             and j.status == S.CREATED and j.node is None)}
    counts["running"] = len(st.jobs) - sum(counts.values())
    total = sum(p.slots for p in alive)
    used = sum(st.slots_used(p.id) for p in alive)
    return {"leader": leader, "peers": len(st.peers), "peers-alive": len(alive),
            "taskmanagers": len(alive), "flink-version": FLINK_REST_VERSION,
            "flink-commit": FLINK_COMMIT,
            "slots-total": total, "slots-available": max(0, total - used),
            "jobs-running": counts["running"], "jobs-waiting": counts["created"],
            "jobs-finished": counts["finished"], "jobs-failed": counts["failed"],
            "jobs-cancelled": counts["cancelled"],
            "protocol": st.protocol}  # the lowest its peers speak (raft/protocol.py)


def peer_state(st: ClusterState, p) -> str:
    """ALIVE, DEAD, DRAINING (jobs still on it), DRAINED or LEAVING (being removed)."""
    if p.state != S.ALIVE or not p.draining:
        return p.state
    if p.leaving:
        return "LEAVING"
    return "DRAINING" if st.jobs_of(p.id) else "DRAINED"


def _role(node: str, leader: Optional[str], members: Optional[list[str]]) -> Optional[str]:
    if members is not None and node not in members:
        return "non-voter"  # a non-voting member (jm/policy/members/voters.py)
    return "leader" if node == leader else "follower"


def non_voters(st: ClusterState, members: list[str]) -> list[dict]:
    """The non-voting members: peers registered or joining that are not Raft voters."""
    ids = (set(st.peers) | set(st.joining)) - set(members) - set(st.removed)
    return [{"id": n, "role": "non-voter",
             "state": peer_state(st, st.peers[n]) if n in st.peers else "JOINING"}
            for n in sorted(ids)]


ALL_TENANTS = object()  # nodes(): every tenant's job ids


def connect_endpoint(host: str, port: int) -> Optional[str]:
    """A peer's Spark Connect endpoint as clients name it (None: it serves none)."""
    if not port:
        return None
    return f"sc://[{host}]:{port}" if ":" in host else f"sc://{host}:{port}"


def nodes(st: ClusterState, leader: Optional[str], members: Optional[list[str]] = None,
          tenant: Any = ALL_TENANTS) -> dict:
    """The peers, with their Raft role ("leader", "follower", or "non-voter" for a peer
    that is not a Raft voter); members that have not registered yet are listed as
    JOINING. Each peer's job count, and the ids of its jobs of `tenant` (a tenant's
    caller; ALL_TENANTS: every job's)."""
    out = []
    for p in st.peers.values():
        ids = st.jobs_of(p.id)
        shown = ids if tenant is ALL_TENANTS else [
            j for j in ids if j in st.jobs and st.jobs[j].tenant == tenant]
        out.append({"id": p.id, "host": p.host, "rest-port": p.rest_port,
                    "raft-port": p.raft_port, "pid": p.pid, "leader": p.id == leader,
                    "raft-role": _role(p.id, leader, members),
                    "state": peer_state(st, p), "slots": p.slots,
                    "slots-used": st.slots_used(p.id), "weight": p.share_weight,
                    "ready": p.ready, "jobs": shown,
                    "job-count": len(ids),
                    "drain-deadline": p.drain_deadline,
                    "disk-low": p.disk_low or None, "protocol": p.protocol,
                    "connect-endpoint": connect_endpoint(p.host, p.connect_port),
                    "missing-os-users": list(p.lacks),
                    "registered-at": _ms(p.registered_at),
                    "declared-dead-at": _ms(p.declared_dead_at)})
    for node in sorted((set(members or ()) | set(st.joining)) - set(st.peers)
                       - set(st.removed)):
        host, _, raft = node.rpartition(":")
        rest = st.joining.get(node, "").split(":")
        out.append({"id": node, "host": host, "raft-port": int(raft),
                    "rest-port": int(rest[1]) if len(rest) == 3 else None, "pid": None,
                    "leader": node == leader, "raft-role": _role(node, leader, members),
                    "state": "JOINING", "slots": 0, "slots-used": 0, "weight": 0.0,
                    "ready": False, "jobs": [], "job-count": 0, "drain-deadline": None,
                    "disk-low": None, "connect-endpoint": None,
                    "protocol": None, "missing-os-users": [], "registered-at": _ms(None),
                    "declared-dead-at": _ms(None)})
    return {"nodes": out}


def membership_pending(st: ClusterState, members: list[str]) -> list[dict]:
    """Raft membership changes the leader has still to make: removed peers that are still
    members (they count in the quorum until then) and added ones that are not yet."""
    out = [{"id": n, "change": "remove", "since": _ms(st.removed[n]),
            "waits-for-peer": n not in st.removed_dead}
           for n in sorted(set(members) & set(st.removed))]
    out += [{"id": n, "change": "add", "peer": st.joining[n]}
            for n in sorted(set(st.joining) - set(members) - st.joining_readers)]
    return out


def _duration(job: JobRecord, now: float) -> int:
    end = job.end_time if job.end_time is not None else now
    return int((end - job.submitted_at) * 1000)


# Flink's ExecutionState names (JobDetails' "tasks"); a job is one task here: its process
TASK_STATES = ("created", "scheduled", "deploying", "running", "finished", "canceling",
               "canceled", "failed", "reconciling", "initializing")
_TASK_OF = {S.CREATED: "created", S.INITIALIZING: "deploying", S.RUNNING: "running",
            S.RESTARTING: "scheduled", S.CANCELLING: "canceling", S.CANCELED: "canceled",
            S.FAILED: "failed", S.FINISHED: "finished"}


def tasks(job: JobRecord) -> dict:
    """Flink's JobDetails "tasks": the total and a count per ExecutionState."""
    out = {s: 0 for s in TASK_STATES}
    out[_TASK_OF.get(job.status, "created")] = 1
    out["total"] = 1
    return out


def last_modification(job: JobRecord) -> int:
    """Flink's JobDetails "last-modification": the latest status change (ms)."""
    times = [t for t in (job.submitted_at, job.end_time, *job.timestamps.values())
             if isinstance(t, (int, float))]
    return _ms(max(times))


def job_row(job: JobRecord, now: float) -> dict:
    return {"jid": job.id, "name": job.name or job.id, "state": job.status,
            "node": job.node or job.last_node, "attempt": job.epoch, "restarts": job.restarts,
            "start-time": _ms(job.submitted_at), "end-time": _ms(job.end_time),
            "duration": _duration(job, now), "last-modification": last_modification(job),
            "tasks": tasks(job), "pending-operators": 0,
            "jobType": "STREAMING" if job.streaming else "BATCH", "schedulerType": "Default"}


def jobs_overview(st: ClusterState, now: float) -> dict:
    return {"jobs": [job_row(j, now) for j in st.jobs.values()]}


def spark_waiting(job: JobRecord) -> Optional[str]:
    """What the job's live attempt waits for on the Spark cluster, if anything."""
    a = job.attempts[-1] if job.attempts else None
    if a is None or a.end is not None or job.status in S.TERMINAL or not a.spark:
        return None
    return a.spark[-1].get("waiting")


def job_detail(job: JobRecord, now: float) -> dict:
    out = job_row(job, now)
    note = spark_waiting(job)
    if note:
        out["spark-waiting"] = note
    out.update({
        "spec": job.spec.wire(),
        "timestamps": {k: _ms(v) for k, v in job.timestamps.items()},
        "attempts": [_attempt(a) for a in job.attempts],
        "cancel-requested": job.cancel_requested,
        "failures": job.failure_count,
        "result": job.result,
        "job-type": job.spec.job_type,
        "moves": job.moves,
        "moving-to": job.move_to,
        "stop-request": job.stop_trigger,
        "savepoint": job.savepoint_location,
        "tenant": job.tenant, "submitter": job.submitter,
    })
    return out


def _attempt(a) -> dict:
    out = {"attempt": a.epoch, "node": a.node, "start-time": _ms(a.start),
           "end-time": _ms(a.end), "end-reason": a.reason}
    apps = getattr(a, "spark", None)
    if apps:  # the latest Spark application of the attempt, and all of them
        latest = apps[-1]
        out["spark-app-id"] = latest.get("spark-app-id")
        out["spark-ui"] = latest.get("spark-ui")
        if latest.get("waiting"):
            out["spark-waiting"] = latest["waiting"]
        out["spark-apps"] = [dict(app) for app in apps]
    return out


def _savepoint(sp) -> dict:
    out: dict[str, Any] = {"request-id": sp.id, "status": {"id": sp.status},
                           "stop": sp.stop, "trigger-time": _ms(sp.requested)}
    if sp.status == S.COMPLETED:
        out["completion-time"] = _ms(sp.completed)
        if sp.failure is None:
            out["operation"] = {"location": sp.location}
        else:
            # "serialized-throwable": the only field Flink's clients read (a Java object)
            out["operation"] = {"failure-cause": {
                "class": "SavepointFailed", "stack-trace": sp.failure,
                "serialized-throwable": failure_cause("SavepointFailed", str(sp.failure))}}
    return out


def job_savepoints(job: JobRecord) -> dict:
    return {"savepoints": [_savepoint(sp) for sp in reversed(job.savepoints.values())],
            "latest-location": job.savepoint_location}


def savepoint_status(job: JobRecord, request_id: str) -> Optional[dict]:
    sp = job.savepoints.get(request_id)
    return None if sp is None else _savepoint(sp)


def _waits(job: JobRecord) -> list[dict]:
    """Each time an attempt's Spark application waited for executors, as an exception
    entry that is not a failure (Flink shows NoResourceAvailableException likewise)."""
    out = []
    for a in job.attempts:
        for app in a.spark or []:
            waited = app.get("waited") if isinstance(app.get("waited"), dict) else {}
            note = app.get("waiting") or waited.get("note")
            if not note:
                continue
            entry = {"attempt": a.epoch, "node": a.node,
                     "timestamp": _ms(app.get("waiting-since", waited.get("since"))),
                     "exception": "SparkResourcesUnavailable: " + note, "stacktrace": "",
                     "final": False, "reason": None, "failure": False,
                     "spark-app-id": app.get("spark-app-id")}
            if not app.get("waiting"):
                entry["reason"] = "executors granted later"
                entry["resolved-at"] = _ms(waited.get("until"))
            out.append(entry)
    return out


def job_exceptions(job: JobRecord) -> dict:
    entries = [{"attempt": f.get("attempt"), "node": f.get("node"),
                "timestamp": _ms(f.get("time")), "exception": f.get("exception"),
                "stacktrace": f.get("traceback", ""), "final": bool(f.get("final")),
                "reason": f.get("reason"), "failure": True} for f in reversed(job.failures)]
    # newest first; a failure before a note of the same moment
    entries = sorted(entries + _waits(job), key=lambda e: (e["timestamp"], e["failure"]),
                     reverse=True)
    if job.status in S.TERMINAL:  # how it ended, not what it once waited for
        root = next((e for e in entries if e["failure"]), None)
    else:
        root = entries[0] if entries else None
    return {"root-exception": root["exception"] if root else None,
            "timestamp": root["timestamp"] if root else None,
            "all-exceptions": entries, "truncated": job.failure_count > len(entries)}


def job_result(job: JobRecord) -> dict[str, Any]:
    status = "COMPLETED" if job.status in S.TERMINAL else "IN_PROGRESS"
    out: dict[str, Any] = {"status": {"id": status}, "state": job.status}
    if job.status == S.FINISHED:
        out["result"] = job.result
    elif job.status == S.FAILED and job.failures:
        out["failure"] = job.failures[-1].get("exception")
    return out


def artifacts(st: ClusterState, tenant: Optional[str] = None) -> dict:
    """The artifacts (`tenant`: those that tenant uploaded; None: every one)."""
    return {"artifacts": [{"id": a.id, "name": a.name, "size": a.size, "nodes": list(a.nodes),
                           "created": _ms(a.created), "tenants": list(a.tenants)}
                          for a in st.artifacts.values()
                          if tenant is None or tenant in a.tenants]}


SESSION_KINDS = ("sql", "livy", "connect")


def sessions(st: ClusterState, tenant: Any = ALL_TENANTS, kind: Optional[str] = None
             ) -> dict:
    """Every open session of the cluster, of every kind: the SQL gateway's (`sql`),
    Livy's (`livy`, by its number) and the Spark Connect endpoints' (`connect`), with
    their tenant, who opened them and the peer that serves them; only `tenant`'s
    for a tenant's caller (ALL_TENANTS: every tenant's), only `kind`'s if given."""
    rows = []
    for s in st.sessions.values():
        k = "livy" if s.livy is not None else "sql"
        rows.append({"id": str(s.livy.id) if s.livy is not None else s.handle, "kind": k,
                     "tenant": s.tenant, "submitter": s.submitter, "node": s.node,
                     "name": s.name, "created": _ms(s.created), "endpoint": None})
    for c in st.connect.values():
        peer = st.peers.get(c.node)
        rows.append({"id": c.session_id, "kind": "connect", "tenant": c.tenant,
                     "submitter": c.submitter, "node": c.node, "name": c.user_id,
                     "created": _ms(c.created),
                     "endpoint": connect_endpoint(peer.host, peer.connect_port)
                     if peer is not None else None})
    rows = [r for r in rows if (kind is None or r["kind"] == kind)
            and (tenant is ALL_TENANTS or r["tenant"] == tenant)]
    rows.sort(key=lambda r: (r["created"] or 0, r["id"]))
    return {"sessions": rows, "total": len(rows)}
