"""The job commands of `jm`: submit (and waiting for a job's end), status, cancel,
exceptions and result."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Optional

from jm.client.cli_http import (EXIT_OK, TERMINAL, ApiError, CliError, Client, quote_id, compact,
                                end_error, fmt_duration, fmt_time, interrupted, one_line, out,
                                print_json, root_exception, table)
from jm.client.cli_spec import (IDENT_RE, build_spec, canonical_name, post_job,
                                print_submitted, upload)
from jm.policy.jobs.usertrace import frame_lines


# ---- submit ---------------------------------------------------------------------------

def cmd_submit(client: Client, a: argparse.Namespace) -> int:
    start = time.monotonic()
    spec, upload_path = build_spec(a)
    if upload_path:
        art = upload(client, upload_path)
        pyfiles = [art["pyfile"]] + list(spec.get("pyfiles") or [])
        spec["pyfiles"] = pyfiles
        if upload_path.endswith(".py") and not (a.entry and ":" in a.entry):
            name = canonical_name(client, art)
            stem = name[:-3] if name.endswith(".py") else name
            if not IDENT_RE.match(stem):
                raise CliError(f"the cluster keeps this file's content as {name!r}, which is "
                               "not an importable module name; change the file or use "
                               "--entry module:function")
            spec["entry"] = f"{stem}:{spec['entry'].split(':', 1)[1]}"
    res = post_job(client, spec)
    job_id = res["jobid"]
    if not a.wait:
        print_submitted(res, a.json)
        return EXIT_OK
    try:  # from here on, Ctrl-C leaves the submitted job running and says which it is
        if not a.json:
            out(job_id)
        deadline = None if a.timeout is None else start + a.timeout
        progress = not a.json and (a.progress or sys.stderr.isatty())
        job = wait_for_end(client, job_id, deadline, a.timeout, progress=progress)
    except KeyboardInterrupt:
        raise interrupted(job_id) from None
    return report_end(client, job, a.json, expect="FINISHED")


def wait_for_end(client: Client, job_id: str, deadline: Optional[float],
                 timeout: Optional[float], progress: bool = False) -> dict:
    """Poll until the job ends. With `progress`, print each change of state, peer or
    attempt to stderr with the time elapsed (stdout stays for the result)."""
    interval = 0.1
    start, seen = time.monotonic(), None
    try:
        while True:
            job = client.get(f"/jobs/{quote_id(job_id)}")
            state = job.get("state")
            now_seen = (state, job.get("node"), job.get("attempt"), job.get("spark-waiting"))
            if progress and now_seen != seen:
                seen = now_seen
                where = f" on {job.get('node')}" if job.get("node") else ""
                attempt = f" (attempt {job.get('attempt')})" if job.get("attempt") else ""
                note = (f", waiting for Spark resources: {job['spark-waiting']}"
                        if job.get("spark-waiting") else "")
                print(f"{time.monotonic() - start:7.1f} s  {state}{where}{attempt}{note}",
                      file=sys.stderr, flush=True)
            if state in TERMINAL:
                return job
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise CliError(f"job {job_id} is still {state} after {timeout:g} s; it keeps "
                               f"running (jm status {job_id})")
            pause = interval if deadline is None else min(interval, max(0.0, deadline - now))
            time.sleep(pause)
            interval = min(interval * 1.5, 1.0)
    except KeyboardInterrupt:
        raise interrupted(job_id) from None


def report_end(client: Client, job: dict, as_json: bool, expect: str) -> int:
    """The job's end: its state, then its result, or its failure short: the exception's
    line and the frames of the user's code (the whole text: jm exceptions, jm logs)."""
    job_id, state = job.get("jid"), job.get("state")
    root, frames = root_failure(client, job_id) if state == "FAILED" else (None, [])
    if as_json:
        print_json(job)
    else:
        out(state)
        if state == "FINISHED" and expect == "FINISHED":
            out(compact(job.get("result")))
        elif root:
            out(str(root))
            for line in frames:
                out(line)
    if state == expect:
        return EXIT_OK
    raise end_error(job_id, state, root)


def root_failure(client: Client, job_id: str) -> tuple[Optional[str], list[str]]:
    """A failed job's root exception and the frames of its traceback (no message)."""
    try:
        res = client.get(f"/jobs/{quote_id(job_id)}/exceptions")
    except ApiError:
        return root_exception(client, job_id), []
    root = res.get("root-exception")
    entry = next((e for e in res.get("all-exceptions") or [] if e.get("failure", True)
                  and e.get("exception") == root), None)
    return root, frame_lines(str((entry or {}).get("stacktrace") or ""))


# ---- status, cancel, exceptions, result -----------------------------------------------

def cmd_status(client: Client, a: argparse.Namespace) -> int:
    job = client.get(f"/jobs/{quote_id(a.jobid)}")
    if a.json:
        print_json(job)
        return EXIT_OK
    spec = job.get("spec") or {}
    state = job.get("state")
    if job.get("spark-waiting"):
        state = f"{state}, waiting for Spark resources"
    if job.get("waiting"):  # its tenant's slot quota holds it
        state = f"{state}: {job['waiting']}"
    fields = [("job", job.get("jid")), ("name", job.get("name")), ("state", state),
              ("tenant", job.get("tenant") or "default"),
              ("submitter", job.get("submitter") or "-"),
              ("node", job.get("node") or "-"), ("attempt", job.get("attempt")),
              ("restarts", job.get("restarts")),
              ("submitted", fmt_time(job.get("start-time"))),
              ("ended", fmt_time(job.get("end-time"))),
              ("duration", fmt_duration(job.get("duration")))]
    if spec.get("sql"):
        fields.append(("sql", one_line(spec["sql"], 200)))
    elif spec.get("script"):
        fields.append(("script", spec["script"]))
        fields.append(("argv", " ".join(spec.get("argv") or []) or "-"))
    else:
        fields.append(("entry", spec.get("entry")))
    fields.append(("spark mode", spec.get("spark-mode") or "connect"))
    if spec.get("spark-conf"):
        fields.append(("spark conf", compact(spec["spark-conf"])))
    if spec.get("pyfiles"):
        fields.append(("pyfiles", ", ".join(spec["pyfiles"])))
    if spec.get("args"):
        fields.append(("args", compact(spec["args"])))
    fields.append(("slots", spec.get("slots", 1)))
    fields.append(("type", job.get("job-type", "batch")))
    if job.get("moves"):
        fields.append(("moves", job["moves"]))
    if job.get("moving-to"):
        fields.append(("moving to", job["moving-to"]))
    if job.get("savepoint"):
        fields.append(("savepoint", job["savepoint"]))
    if job.get("cancel-requested"):
        fields.append(("cancel", "requested"))
    if job.get("failures"):
        fields.append(("failures", f"{job['failures']} (jm exceptions {job.get('jid')})"))
    width = max(len(k) for k, _ in fields) + 1
    for k, v in fields:
        out(f"{(k + ':').ljust(width)} {one_line('-' if v is None else v, 500)}")
    attempts = job.get("attempts") or []
    if attempts:
        out("")
        out(table(["ATTEMPT", "NODE", "START", "END", "END-REASON", "SPARK-APP"],
                  [[t.get("attempt"), t.get("node"), fmt_time(t.get("start-time")),
                    fmt_time(t.get("end-time")), t.get("end-reason"),
                    t.get("spark-app-id") or "-"] for t in attempts]))
        for t in attempts:
            if t.get("spark-waiting") and t.get("end-time", -1) < 0:
                out(f"attempt {t.get('attempt')}: {t['spark-waiting']}")
            if t.get("spark-ui") and t.get("end-time", -1) < 0:
                out(f"attempt {t.get('attempt')}: Spark UI {t['spark-ui']}")
    show_progress(job.get("progress"))
    if job.get("state") == "FINISHED":
        out("")
        out(f"result: {compact(job.get('result'))}")
    return EXIT_OK


def _num(v: object, digits: int = 1) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def show_progress(progress: Optional[dict]) -> None:
    """A streaming job's last progress, one row per query."""
    queries = (progress or {}).get("queries") or []
    if not queries:
        return
    out("")
    out(f"last progress ({fmt_time(progress.get('time'))}):")
    out(table(["QUERY", "BATCH", "LAST BATCH", "INPUT ROWS/S", "PROCESSED ROWS/S",
               "DURATION MS", "STATE ROWS"],
              [[q.get("name"), _num(q.get("batch")), fmt_time(q.get("time")),
                _num(q.get("input-rows-per-second")),
                _num(q.get("processed-rows-per-second")), _num(q.get("batch-duration-ms")),
                _num(q.get("state-rows"))] for q in queries]))


def cmd_cancel(client: Client, a: argparse.Namespace) -> int:
    start = time.monotonic()
    try:
        res = client.request("PATCH", f"/jobs/{quote_id(a.jobid)}?mode=cancel")
    except ApiError as exc:
        # a retried cancel whose first attempt did land may find the job already CANCELED
        if not (exc.status == 409 and exc.attempts > 1 and "CANCELED" in str(exc)):
            raise
        res = {}
    if not a.wait:
        if a.json:
            print_json(res if res is not None else {})
        else:
            out(f"cancel requested for job {a.jobid}")
        return EXIT_OK
    deadline = None if a.timeout is None else start + a.timeout
    job = wait_for_end(client, a.jobid, deadline, a.timeout)
    return report_end(client, job, a.json, expect="CANCELED")


def cmd_exceptions(client: Client, a: argparse.Namespace) -> int:
    res = client.get(f"/jobs/{quote_id(a.jobid)}/exceptions")
    if a.json:
        print_json(res)
        return EXIT_OK
    entries = res.get("all-exceptions") or []
    if not entries:
        out(f"job {a.jobid} has no exceptions")
        return EXIT_OK
    out(f"root exception: {res.get('root-exception')}")
    for e in entries:
        final = ", final" if e.get("final") else ""
        reason = f", {e['reason']}" if e.get("reason") else ""
        out("")
        out(f"--- attempt {e.get('attempt')} on {e.get('node')} at "
            f"{fmt_time(e.get('timestamp'))}{reason}{final}")
        out(str(e.get("exception")))
        trace = (e.get("stacktrace") or "").rstrip()
        if trace:
            for line in trace.splitlines():
                out("    " + line)
    if res.get("truncated"):
        out("")
        out("(older exceptions were dropped)")
    return EXIT_OK


def cmd_result(client: Client, a: argparse.Namespace) -> int:
    res = client.get(f"/jobs/{quote_id(a.jobid)}/result")
    state = res.get("state")
    if a.json:
        print_json(res)
    elif state == "FINISHED":
        out(compact(res.get("result")))
    if state == "FINISHED":
        return EXIT_OK
    if state == "FAILED":
        failure = res.get("failure")
        raise CliError(f"job {a.jobid} ended FAILED" + (f": {one_line(failure, 300)}"
                                                        if failure else ""))
    if state in TERMINAL:
        raise CliError(f"job {a.jobid} ended {state}; it has no result")
    raise CliError(f"job {a.jobid} is {state}; no result yet")


# ---- argument parsing -----------------------------------------------------------------

def add_submit(add: Callable[..., argparse.ArgumentParser]) -> None:
    s = add("submit", "submit a job (uploads a local .py/.zip first)", cmd_submit,
            formatter_class=argparse.RawDescriptionHelpFormatter)
    s.description = ("submit a job; prints its id.\n\n"
                     "  jm submit job.py [--entry FUNC]             upload job.py, run job:FUNC "
                     "(default main)\n"
                     "  jm submit lib.zip --entry pkg.mod:FUNC      upload a zip, run "
                     "pkg.mod:FUNC\n"
                     "  jm submit --entry pkg.mod:FUNC --pyfile /abs/path.zip\n"
                     "  jm submit --sql \"SELECT ...\"\n"
                     "  jm submit --spec spec.json                  a JSON job spec as is "
                     "('-' reads stdin)")
    s.add_argument("path", nargs="?", metavar="PATH", help="a .py, .zip or .egg file to upload")
    s.add_argument("--entry", metavar="FUNC|MODULE:FUNC",
                   help="the function to run: a name in PATH.py, else module:function")
    s.add_argument("--pyfile", action="append", default=[], metavar="PATH|artifact:ID",
                   help="code every peer can read (absolute .py/.zip/.egg path, directory/ "
                        "or artifact:sha256:...); repeatable")
    s.add_argument("--sql", metavar="TEXT", help="run a Spark SQL text instead of code")
    s.add_argument("--spec", metavar="FILE", help="submit this JSON job spec ('-' for stdin); "
                                                  "other options given override its fields")
    s.add_argument("--name", help="the job's name")
    s.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a job argument (a string); repeatable")
    s.add_argument("--args-json", metavar="JSON", help="job arguments as a JSON object "
                                                       "(--arg entries override)")
    s.add_argument("--slots", type=int, metavar="N", help="slots the job takes (default 1)")
    s.add_argument("--proxy-user", metavar="USER", help="run the job as this OS user "
                   "(jobmanager.executor.proxy-users must allow it)")
    s.add_argument("--tenant", metavar="T", help="the job's tenant (default: the "
                   "credential's; an admin may name any)")
    s.add_argument("--restart-strategy", metavar="TYPE|JSON",
                   help="none, fixed-delay, exponential-delay, failure-rate, or a JSON object "
                        "like '{\"type\": \"fixed-delay\", \"attempts\": 3, \"delay\": \"1 s\"}'")
    s.add_argument("--requirements", metavar="FILE",
                   help="a requirements.txt: the job's code and UDFs import exactly these "
                        "versions (an environment the peer builds once and caches)")
    s.add_argument("--jobid", metavar="ID", help="a fixed job id")
    s.add_argument("--from-savepoint", "--savepoint-path", dest="savepoint_path", metavar="PATH",
                   help="resume a streaming job from this savepoint (implies --streaming)")
    s.add_argument("--streaming", action="store_true",
                   help="a streaming job: it may be moved (rebalance, drain) and take "
                        "savepoints; it resumes from ctx.checkpoint_dir")
    s.add_argument("--wait", action="store_true",
                   help="wait for the job to end; print its state and result; exit 0 only "
                        "if it FINISHED")
    s.add_argument("--progress", action="store_true",
                   help="with --wait: print each change of state, peer and attempt to stderr "
                        "(the default on a terminal)")
