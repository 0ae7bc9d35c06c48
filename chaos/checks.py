"""Invariant checks of a chaos run (pure functions over what the run recorded).

Inputs:
  probes: {job_id: [(attempt, node, t), ...]} from the probe files;
  faults: [{"kind", "node", "start", "end", "jobs"}] (jobs = the peer's jobs at the fault);
  final:  {job_id: {"state", "attempt", "node", "name"}} from GET /jobs/overview at the end;
  acked:  [(request_id, job_id)] of load submissions answered 202.
"""
from __future__ import annotations

from collections import defaultdict

EPS = 0.05  # probe lines are written every 100 ms: allow clock jitter, not overlap


def attempt_spans(lines: list[tuple[int, str, float]]) -> dict[int, tuple[str, float, float]]:
    spans: dict[int, list] = {}
    for attempt, node, t in lines:
        s = spans.setdefault(attempt, [node, t, t])
        s[1], s[2] = min(s[1], t), max(s[2], t)
    return {a: (n, lo, hi) for a, (n, lo, hi) in spans.items()}


def check_no_loss(probe_jobs: list[str], final: dict, cancelled: set) -> list[str]:
    errors = []
    for job in probe_jobs:
        row = final.get(job)
        if row is None:
            errors.append(f"job {job} is missing")
        elif job in cancelled:
            if row["state"] not in ("CANCELED", "CANCELLING"):
                errors.append(f"job {job} was cancelled but is {row['state']}")
        elif row["state"] != "RUNNING":
            errors.append(f"job {job} should be RUNNING but is {row['state']}")
    return errors


def check_single_attempt(probes: dict) -> list[str]:
    """At most one attempt of a job ran at any instant."""
    errors = []
    for job, lines in probes.items():
        spans = sorted(attempt_spans(lines).items(), key=lambda kv: kv[1][1])
        for (a1, (n1, lo1, hi1)), (a2, (n2, lo2, hi2)) in zip(spans, spans[1:]):
            if lo2 < hi1 - EPS:
                errors.append(f"job {job}: attempt {a1} on {n1} ran until {hi1:.2f} but "
                              f"attempt {a2} on {n2} started at {lo2:.2f}")
    return errors


def _explained(faults: list[dict], node: str, t0: float, t1: float, slack: float) -> bool:
    """A fault of `node` overlapping [t0, t1] (with slack)."""
    return any(f["node"] == node and f["start"] - slack <= t1 and f["end"] + slack >= t0
               for f in faults)


def check_survivors_untouched(probes: dict, faults: list[dict], slack: float,
                              gap: float = 1.5) -> list[str]:
    """Every change of attempt follows a fault of the peer that ran the old attempt, and
    no attempt stalls (a restart in place, e.g. by fencing) without a fault of its peer."""
    errors = []
    for job, lines in probes.items():
        by_attempt: dict = {}
        for attempt, node, t in sorted(lines, key=lambda x: x[2]):
            by_attempt.setdefault((attempt, node), []).append(t)
        for (attempt, node), ts in by_attempt.items():
            for a, b in zip(ts, ts[1:]):
                if b - a > gap and not _explained(faults, node, a, b, slack):
                    errors.append(f"job {job}: attempt {attempt} on {node} stopped from "
                                  f"{a:.2f} to {b:.2f} without a fault of {node}")
        spans = sorted(attempt_spans(lines).items(), key=lambda kv: kv[1][1])
        for (a1, (n1, lo1, hi1)), (a2, (n2, lo2, hi2)) in zip(spans, spans[1:]):
            explained = any(f["node"] == n1 and f["start"] - slack <= hi1 + 1.0
                            and lo2 >= f["start"] - slack for f in faults)
            if not explained:
                errors.append(f"job {job}: attempt {a1} on {n1} was replaced by attempt {a2} "
                              f"on {n2} at {lo2:.2f} without a fault of {n1}")
    return errors


def check_failover_time(probes: dict, faults: list[dict], limit: float,
                        probe_jobs: list[str]) -> list[str]:
    """Probe jobs of a peer that was down longer than the limit run elsewhere within it."""
    errors = []
    watched = set(probe_jobs)
    for f in faults:
        if f["kind"] != "kill" and f["end"] - f["start"] < limit:
            continue  # a short pause or partition need not move anything
        for job in f.get("jobs", []):
            if job not in watched:
                continue  # a load job that ended before the fault
            later = [(t, node) for _, node, t in probes.get(job, [])
                     if t > f["start"] and node != f["node"]]
            if not later:
                errors.append(f"job {job} of {f['node']} ({f['kind']} at {f['start']:.2f}) "
                              "never ran elsewhere")
            elif min(later)[0] - f["start"] > limit:
                errors.append(f"job {job} of {f['node']} ran elsewhere only after "
                              f"{min(later)[0] - f['start']:.1f} s (limit {limit:.1f} s)")
    return errors


def check_acknowledged(acked: list[tuple[str, str]], final: dict) -> list[str]:
    """Jepsen-style: every job acknowledged with 202 exists, and exactly once."""
    errors = []
    by_name = defaultdict(list)
    for job, row in final.items():
        by_name[row.get("name")].append(job)
    for request_id, job in acked:
        if job not in final:
            errors.append(f"acknowledged job {job} (request {request_id}) is lost")
        if len(by_name.get(request_id, [])) > 1:
            errors.append(f"request {request_id} created {len(by_name[request_id])} jobs")
    return errors


def run_all(probes, faults, final, acked, probe_jobs, cancelled, limit, slack=0.5) -> dict:
    results = {
        "no-job-lost": check_no_loss(probe_jobs, final, cancelled),
        "single-attempt-at-a-time": check_single_attempt(probes),
        "survivors-not-restarted": check_survivors_untouched(probes, faults, slack),
        "failover-within-limit": check_failover_time(probes, faults, limit, probe_jobs),
        "acknowledged-writes-kept": check_acknowledged(acked, final),
    }
    return {name: {"ok": not errs, "errors": errs[:50], "count": len(errs)}
            for name, errs in results.items()}
