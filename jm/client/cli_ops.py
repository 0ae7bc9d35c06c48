"""jm commands beyond submitting and watching jobs: savepoint, stop, rebalance, drain,
artifacts, upload."""
from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any, Callable, Optional

from jm.client.cli_http import (EXIT_INTERRUPTED, EXIT_OK, TERMINAL, ApiError, CliError, Client,
                                UsageError, quote_id, savepoint_location, fmt_size, fmt_time, out,
                                print_json, table)


def _target(a: argparse.Namespace) -> Optional[str]:
    if a.target is None:
        return None
    if not a.target.strip():
        raise UsageError("--target is empty")
    return savepoint_location(a.target)


def poll_until(fn: Callable[[], Any], what: str, timeout: Optional[float]) -> Any:
    """Call fn until it returns something truthy; CliError after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    interval = 0.1
    try:
        while True:
            res = fn()
            if res:
                return res
            if deadline is not None and time.monotonic() >= deadline:
                raise CliError(f"{what} did not complete within {timeout:g} s")
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)
    except KeyboardInterrupt:
        raise CliError(f"interrupted while waiting for {what}; it goes on", EXIT_INTERRUPTED)


def _savepoint_request(client: Client, a: argparse.Namespace, stop: bool) -> int:
    body: dict = {"triggerId": a.trigger_id or uuid.uuid4().hex}  # retries stay idempotent
    target = _target(a)
    if target:
        body["target-directory"] = target
    path = f"/jobs/{quote_id(a.jobid)}/{'stop' if stop else 'savepoints'}"
    rid = client.request("POST", path, body)["request-id"]
    if a.detached:
        if a.json:
            print_json({"request-id": rid})
        else:
            out(f"request {rid}; check it with: jm savepoint {a.jobid} --status {rid}")
        return EXIT_OK
    return _show_status(client, a.jobid, rid, a.json, a.wait_timeout)


def _show_status(client: Client, jobid: str, rid: str, as_json: bool,
                 timeout: Optional[float], wait: bool = True) -> int:
    path = f"/jobs/{quote_id(jobid)}/savepoints/{quote_id(rid)}"

    def done() -> Any:
        res = client.get(path)
        return res if (res.get("status") or {}).get("id") == "COMPLETED" or not wait else None
    res = poll_until(done, f"savepoint {rid} of job {jobid}", timeout)
    if as_json:
        print_json(res)
    op = res.get("operation") or {}
    if "failure-cause" in op:
        cause = (op["failure-cause"] or {}).get("stack-trace") or "unknown cause"
        raise CliError(f"savepoint {rid} of job {jobid} failed: {cause}")
    if not as_json:
        if "location" in op:
            what = "stopped with savepoint" if res.get("stop") else "savepoint"
            out(f"{what}: {op['location']}")
        else:
            out(f"savepoint {rid}: {res.get('status', {}).get('id')}")
    return EXIT_OK


def cmd_savepoint(client: Client, a: argparse.Namespace) -> int:
    if a.status:
        return _show_status(client, a.jobid, a.status, a.json, None, wait=False)
    return _savepoint_request(client, a, stop=False)


def cmd_stop(client: Client, a: argparse.Namespace) -> int:
    return _savepoint_request(client, a, stop=True)


def cmd_rebalance(client: Client, a: argparse.Namespace) -> int:
    res = client.request("POST", "/cluster/rebalance")
    if a.json:
        print_json(res)
        return EXIT_OK
    moves, refused = res.get("moves") or [], res.get("refused") or []
    if not moves and not refused:
        out("balanced: nothing to move")
        return EXIT_OK
    rows = [[m.get("job"), m.get("from"), m.get("to"), "moving"] for m in moves]
    rows += [[m.get("job"), m.get("from"), m.get("to"), f"refused: {m.get('reason')}"]
             for m in refused]
    out(table(["JOB", "FROM", "TO", "STATE"], rows))
    return EXIT_OK


def cmd_drain(client: Client, a: argparse.Namespace) -> int:
    path = f"/nodes/{quote_id(a.node)}/drain"
    if a.undo:
        res = client.request("DELETE", path)
        print_json(res) if a.json else out(f"{a.node}: {res.get('state')} (takes work again)")
        return EXIT_OK
    body = None
    if a.deadline is not None:
        from jm.client.cli_members import parse_seconds
        body = {"deadline": parse_seconds(a.deadline)}
    res = client.request("POST", path, body)
    if a.wait and res.get("state") != "DRAINED":
        def drained() -> Any:
            for n in client.get("/nodes").get("nodes", []):
                if n.get("id") == a.node:
                    return n if n.get("state") in ("DRAINED", "DEAD") else None
            raise CliError(f"peer {a.node} is gone")
        node = poll_until(drained, f"the drain of {a.node}", a.wait_timeout)
        res = {"node": a.node, "state": node.get("state"), "jobs": node.get("jobs")}
    if a.json:
        print_json(res)
    else:
        jobs = res.get("jobs") or []
        out(f"{a.node}: {res.get('state')}" + (f", {len(jobs)} job(s) still on it" if jobs
                                               else ""))
    return EXIT_OK


def cmd_artifacts(client: Client, a: argparse.Namespace) -> int:
    if a.delete:  # artifact:sha256:... (as listed) or sha256:...
        art_id = a.delete[len("artifact:"):] if a.delete.startswith("artifact:") else a.delete
        res = client.request("DELETE", f"/artifacts/{quote_id(art_id)}")
        if a.json:
            print_json(res)
        else:
            out(f"deleted artifact:{art_id}")
        return EXIT_OK
    res = client.get("/artifacts")
    if a.json:
        print_json(res)
        return EXIT_OK
    arts = sorted(res.get("artifacts", []), key=lambda x: x.get("created") or 0)
    if not arts:
        out("no artifacts")
        return EXIT_OK
    out(table(["PYFILE", "NAME", "SIZE", "NODES", "CREATED"],
              [[f"artifact:{x.get('id')}", x.get("name"), fmt_size(x.get("size")),
                len(x.get("nodes") or []), fmt_time(x.get("created"))] for x in arts]))
    return EXIT_OK


def cmd_logs(client: Client, a: argparse.Namespace) -> int:
    """Print an attempt's log; with -f, follow the job (into its next attempts) until it
    ends."""
    path = f"/jobs/{quote_id(a.jobid)}/logs"
    attempt = a.attempt
    announce = lambda n, node: out(f"--- attempt {n} on {node}")  # noqa: E731
    if a.follow and attempt is None and \
            not client.get(f"/jobs/{quote_id(a.jobid)}").get("attempts"):
        try:  # not placed yet (no slot free): wait for its first attempt
            follow_logs(client, a.jobid, sys.stdout.write, announce=announce)
        except KeyboardInterrupt:
            pass
        return EXIT_OK
    query = f"?tail={a.tail}" if a.tail is not None else "?offset=0"
    if attempt is not None:
        query += f"&attempt={attempt}"
    res = client.get(path + query)
    if a.json and not a.follow:
        print_json(res)
        return EXIT_OK
    sys.stdout.write(res.get("text", ""))
    sys.stdout.flush()
    if not a.follow:
        return EXIT_OK
    try:
        follow_logs(client, a.jobid, sys.stdout.write, res.get("attempt"),
                    res.get("next-offset", 0), announce=announce)
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def follow_logs(client: Client, job_id: str, write: Callable[[str], Any],
                attempt: Optional[int] = None, offset: int = 0,
                announce: Callable[[int, str], Any] = lambda n, node: None,
                lost_ok: bool = False, sleep: Callable[[float], None] = time.sleep) -> dict:
    """Write a job's output from `attempt` (default: its first) at `offset`, attempt after
    attempt (`announce` names each next one), until the job has ended; return the job.
    With `lost_ok`, an attempt whose peer cannot serve its log is noted and skipped."""
    pause = 0.1
    while True:
        if attempt is None:
            job = client.get(f"/jobs/{quote_id(job_id)}")
            if job.get("attempts"):
                attempt = job["attempts"][0]["attempt"]
            elif job.get("state") in TERMINAL:
                return job
            else:
                sleep(pause)
                pause = min(pause * 1.5, 1.0)
                continue
        try:
            res = client.get(f"/jobs/{quote_id(job_id)}/logs?attempt={attempt}&offset={offset}")
        except ApiError as exc:
            if not lost_ok:
                raise
            write(f"[jm] the output of attempt {attempt} is not reachable: {exc}\n")
            res = {"text": "", "ended": True, "next-offset": offset}
        if res.get("text"):
            write(res["text"])
            pause = 0.1
        offset = res.get("next-offset", offset)
        if res.get("truncated"):
            continue  # more is there already
        if res.get("ended"):
            job = client.get(f"/jobs/{quote_id(job_id)}")
            newer = [t for t in job.get("attempts") or [] if t.get("attempt", 0) > attempt]
            if newer:
                nxt = min(newer, key=lambda t: t["attempt"])
                attempt, offset = nxt["attempt"], 0
                announce(attempt, nxt["node"])
                continue
            if job.get("state") in TERMINAL:
                return job
        try:
            sys.stdout.flush()
        except Exception:
            pass
        sleep(pause)
        pause = min(pause * 1.5, 1.0)


def add_commands(add: Callable[..., argparse.ArgumentParser],
                 upload: Callable[[Client, str], dict]) -> None:
    """Register the commands on the jm parser (`add(name, help, func)`)."""

    def cmd_upload(client: Client, a: argparse.Namespace) -> int:
        res = upload(client, a.file)
        if a.json:
            print_json(res)
        else:
            out(res["pyfile"])
        return EXIT_OK
    lg = add("logs", "print a job's log (stdout and stderr of its attempt)", cmd_logs)
    lg.add_argument("jobid", metavar="JOBID")
    lg.add_argument("--attempt", type=int, metavar="N", help="this attempt (default: latest)")
    lg.add_argument("--tail", type=int, metavar="LINES", help="only the last LINES lines")
    lg.add_argument("-f", "--follow", action="store_true",
                    help="keep printing new output, into later attempts, until the job ends")
    ar = add("artifacts", "list the uploaded artifacts (or delete one no job names)",
             cmd_artifacts)
    ar.add_argument("--delete", metavar="PYFILE",
                    help="forget this artifact (artifact:sha256:...) on every peer")
    u = add("upload", "upload a .py/.zip/.egg artifact; prints its pyfile id", cmd_upload)
    u.add_argument("file", metavar="FILE")
    for name, func, help_ in (
            ("savepoint", cmd_savepoint, "take a savepoint of a streaming job (it keeps "
                                         "running); prints the savepoint's path"),
            ("stop", cmd_stop, "stop a streaming job with a savepoint; prints its path")):
        p = add(name, help_, func)
        p.add_argument("jobid", metavar="JOBID")
        p.add_argument("--target", metavar="DIR",
                       help="where to write it (default: state.savepoints.dir)")
        p.add_argument("--trigger-id", metavar="ID",
                       help="your own request id (a retry with the same id is safe)")
        p.add_argument("--detached", action="store_true",
                       help="print the request id instead of waiting")
        p.add_argument("--wait-timeout", type=float, metavar="S",
                       help="give up waiting after S seconds (default: no limit)")
        if name == "savepoint":
            p.add_argument("--status", metavar="REQUEST-ID",
                           help="show the state of an earlier request instead")
    add("rebalance", "run one rebalancing round now; prints the planned moves", cmd_rebalance)
    d = add("drain", "move every streaming job off a peer; it gets no new work", cmd_drain)
    d.add_argument("node", metavar="NODE", help="the peer's id (host:raft-port, see jm cluster)")
    d.add_argument("--undo", action="store_true", help="end the drain: the peer takes work again")
    d.add_argument("--wait", action="store_true", help="wait until the peer is DRAINED")
    d.add_argument("--deadline", metavar="D",
                   help="batch jobs still running after D (e.g. 90s, 5m) restart elsewhere "
                        "(default: they finish where they are)")
    d.add_argument("--wait-timeout", type=float, metavar="S",
                   help="give up waiting after S seconds (default: no limit)")
