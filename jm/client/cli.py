"""jm: the command-line client of a JobManager cluster; it talks to any peer's REST API.

    jm submit job.py --arg input=/data/in --wait      upload job.py, run job:main, wait
    jm submit --entry pkg.mod:main --pyfile /shared/pkg.zip
    jm submit --sql "SELECT 1"
    jm submit --spec spec.json
    jm list | status ID | cancel ID | exceptions ID | result ID
    jm savepoint ID | stop ID | submit ... --from-savepoint PATH
    jm cluster | rebalance | drain NODE [--undo] [--deadline D] | artifacts | upload FILE
    jm cluster add-peer HOST:REST-PORT:RAFT-PORT | remove-peer NODE [--deadline D]

Standard library only (argparse, urllib, json), so that it starts fast. Every error is
one line on stderr starting with "jm: "; exit codes: 0 ok, 1 API error (or a job that did
not finish), 2 usage error, 3 peer unreachable, 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Optional

from jm.client.cli_list import add_list
from jm.client.cli_members import add_cluster_args, cluster_action
from jm.client.cli_ops import add_commands
from jm.client.cli_run import add_run
from jm.client.cli_sql import add_sql
from jm.client.cli_spec import (IDENT_RE, build_spec, canonical_name, post_job,
                                print_submitted, upload)
from jm.client.cli_http import (DEFAULT_ADDRESS, masters_addresses, DEFAULT_TIMEOUT, EXIT_API, EXIT_INTERRUPTED,
                         EXIT_OK, EXIT_USAGE, TERMINAL, ApiError, CliError, Client, UsageError, _q,
                         compact, fmt_duration, fmt_time, one_line, out, print_json,
                         table, root_exception, end_error, interrupted)



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
            job = client.get(f"/jobs/{_q(job_id)}")
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
    job_id, state = job.get("jid"), job.get("state")
    root = root_exception(client, job_id) if state == "FAILED" else None
    if as_json:
        print_json(job)
    else:
        out(state)
        if state == "FINISHED" and expect == "FINISHED":
            out(compact(job.get("result")))
        elif root:
            out(str(root))
    if state == expect:
        return EXIT_OK
    raise end_error(job_id, state, root)


# ---- other commands -------------------------------------------------------------------

def cmd_status(client: Client, a: argparse.Namespace) -> int:
    job = client.get(f"/jobs/{_q(a.jobid)}")
    if a.json:
        print_json(job)
        return EXIT_OK
    spec = job.get("spec") or {}
    state = job.get("state")
    if job.get("spark-waiting"):
        state = f"{state}, waiting for Spark resources"
    fields = [("job", job.get("jid")), ("name", job.get("name")), ("state", state),
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
    if job.get("state") == "FINISHED":
        out("")
        out(f"result: {compact(job.get('result'))}")
    return EXIT_OK


def cmd_cancel(client: Client, a: argparse.Namespace) -> int:
    start = time.monotonic()
    try:
        res = client.request("PATCH", f"/jobs/{_q(a.jobid)}?mode=cancel")
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


def cmd_cluster(client: Client, a: argparse.Namespace) -> int:
    done = cluster_action(client, a)
    if done is not None:
        return done
    ov = client.get("/overview")
    nodes = client.get("/nodes").get("nodes", [])
    if a.json:
        print_json({"overview": ov, "nodes": nodes})
        return EXIT_OK
    out(f"leader:  {ov.get('leader') or '(none)'}")
    out(f"peers:   {ov.get('peers')} ({ov.get('peers-alive')} alive)")
    out(f"slots:   {ov.get('slots-available')} of {ov.get('slots-total')} available")
    out(f"jobs:    {ov.get('jobs-running')} running, {ov.get('jobs-waiting')} waiting, "
        f"{ov.get('jobs-finished')} finished, {ov.get('jobs-failed')} failed, "
        f"{ov.get('jobs-cancelled')} cancelled")
    out("")
    nodes = sorted(nodes, key=lambda n: str(n.get("id")))
    rows = [[n.get("id"), n.get("state"), n.get("raft-role") or "-",
             f"{client.base.split('://')[0]}://{n.get('host')}:{n.get('rest-port')}"
             if n.get("rest-port") else "-",
             f"{n.get('slots-used')}/{n.get('slots')}", len(n.get("jobs") or []),
             n.get("pid") or "-", fmt_time(n.get("registered-at"))]
            for n in nodes]
    out(table(["NODE", "STATE", "RAFT", "REST", "SLOTS", "JOBS", "PID", "REGISTERED"], rows))
    for n in nodes:
        if n.get("disk-low"):
            out(f"disk low on {n.get('id')}: {n['disk-low']}")
    return EXIT_OK


def cmd_exceptions(client: Client, a: argparse.Namespace) -> int:
    res = client.get(f"/jobs/{_q(a.jobid)}/exceptions")
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
    res = client.get(f"/jobs/{_q(a.jobid)}/result")
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

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, instead of usage + exit
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}")
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def _common() -> argparse.ArgumentParser:
    # SUPPRESS: the options may stand before or after the command without one
    # position's default overwriting the other's value
    p = _Parser(add_help=False)
    g = p.add_argument_group("connection and output")
    g.add_argument("--address", "-a", metavar="URL", default=argparse.SUPPRESS,
                   help="any peer's REST address (http://host:port or host:port), or several, "
                        "comma-separated: the next is tried when one does not answer "
                        "(default: $JM_ADDRESS, else the peers in $JM_CONF_DIR/masters or "
                        f"./conf/masters, else {DEFAULT_ADDRESS})")
    g.add_argument("--token", metavar="TOKEN", default=argparse.SUPPRESS,
                   help="the cluster's rest.auth.token (default: $JM_TOKEN)")
    g.add_argument("--ca", metavar="FILE", default=argparse.SUPPRESS,
                   help="CA certificates (PEM) to verify https peers with, e.g. the "
                        "cluster's rest.ssl.ca (default: $JM_CA_FILE, else the system's)")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the API's JSON instead of text")
    g.add_argument("--timeout", type=_positive_float, metavar="S", default=argparse.SUPPRESS,
                   help=f"give up after S seconds (default: {DEFAULT_TIMEOUT:g} s per "
                        "request; no limit while waiting for a job with --wait)")
    return p


EPILOG = ("exit codes: 0 ok, 1 API error or job not FINISHED, 2 usage error, "
          "3 peer unreachable, 130 interrupted")


def make_parser() -> argparse.ArgumentParser:
    common = _common()
    p = _Parser(prog="jm", description="Client of a JobManager cluster (talks to any peer).",
                epilog=EPILOG, parents=[common], allow_abbrev=False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, help_: str, func, **kw: Any) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_, parents=[common],
                            epilog=EPILOG, allow_abbrev=False, **kw)
        sp.set_defaults(func=func)
        return sp

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
    s.add_argument("--restart-strategy", metavar="TYPE|JSON",
                   help="none, fixed-delay, exponential-delay, failure-rate, or a JSON object "
                        "like '{\"type\": \"fixed-delay\", \"attempts\": 3, \"delay\": \"1 s\"}'")
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

    add_list(add)
    st = add("status", "show a job's details, attempts and result", cmd_status)
    st.add_argument("jobid", metavar="JOBID")
    c = add("cancel", "cancel a job", cmd_cancel)
    c.add_argument("jobid", metavar="JOBID")
    c.add_argument("--wait", action="store_true", help="wait until the job has ended")
    cl = add("cluster", "show the cluster overview and its peers (with their Raft roles); "
                        "add-peer / remove-peer change the membership", cmd_cluster)
    add_cluster_args(cl)
    e = add("exceptions", "show a job's exceptions", cmd_exceptions)
    e.add_argument("jobid", metavar="JOBID")
    r = add("result", "print a finished job's result (JSON)", cmd_result)
    r.add_argument("jobid", metavar="JOBID")
    add_commands(add, upload)
    add_run(add, upload)
    add_sql(add)
    comp = add("completion", "print a shell completion script: eval \"$(jm completion bash)\"",
               cmd_completion)
    comp.add_argument("shell", choices=("bash", "zsh"), help="bash or zsh")
    comp.set_defaults(offline=True)
    return p


def cmd_completion(client: Optional[Client], a: argparse.Namespace) -> int:
    from jm.client.completion import script
    out(script(make_parser(), a.shell).rstrip("\n"))
    return EXIT_OK


def run(argv: Optional[list[str]]) -> int:
    parser = make_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "command", None):
        raise UsageError("missing command; one of submit, run, list, status, cancel, savepoint, "
                         "stop, cluster, rebalance, drain, exceptions, result, artifacts, "
                         "upload, sql (see 'jm --help')")
    a.json = bool(getattr(a, "json", False))
    a.timeout = getattr(a, "timeout", None)
    if getattr(a, "offline", False):  # needs no peer
        return a.func(None, a)
    address = (getattr(a, "address", None) or os.environ.get("JM_ADDRESS")
               or masters_addresses() or DEFAULT_ADDRESS)
    token = getattr(a, "token", None) or os.environ.get("JM_TOKEN") or None
    ca = getattr(a, "ca", None) or os.environ.get("JM_CA_FILE") or None
    client = Client(address, a.timeout if a.timeout is not None else DEFAULT_TIMEOUT, token, ca)
    return a.func(client, a)


def main(argv: Optional[list[str]] = None) -> int:
    try:
        return run(argv)
    except SystemExit as exc:  # --help
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except CliError as exc:
        _err(str(exc))
        return exc.code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:  # stdout's reader went away (jm list | head): no noise at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_API
    except Exception as exc:  # never a traceback
        if os.environ.get("JM_DEBUG"):
            import traceback
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_API


def _err(message: str) -> None:
    try:
        print(f"jm: {one_line(message)}", file=sys.stderr, flush=True)
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
