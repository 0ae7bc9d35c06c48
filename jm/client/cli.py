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
from typing import Any, Optional

from jm.client.cli_jobs import (add_submit, cmd_cancel, cmd_exceptions, cmd_result,
                                cmd_status)
from jm.client.cli_jobs import cmd_submit, report_end, wait_for_end  # noqa: F401
from jm.client.cli_list import add_list
from jm.client.cli_members import add_cluster_args, cluster_action
from jm.client.cli_pipelines import add_pipeline
from jm.client.cli_tenants import add_tenant
from jm.client.cli_tokens import add_token
from jm.client.cli_ops import add_commands
from jm.client.cli_run import add_run
from jm.client.cli_sql import add_sql
from jm.client.cli_spec import upload
from jm.client.cli_http import (DEFAULT_ADDRESS, DEFAULT_TIMEOUT, EXIT_API,
                                EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError, Client,
                                UsageError, client_for, fmt_time, one_line, out, print_json,
                                table)
from jm.client.completion import SHELLS, NoArgcomplete, complete_if_asked, script


# ---- cluster --------------------------------------------------------------------------

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
    nodes = sorted(nodes, key=lambda n: str(n.get("id")))
    older = [str(n.get("id")) for n in nodes if isinstance(n.get("protocol"), int)
             and n["protocol"] < max(x.get("protocol") or 0 for x in nodes)]
    out(f"protocol: {ov.get('protocol')}" + (f" (held back by {', '.join(older)}: newer "
                                              "features wait for them)" if older else ""))
    out("")
    rows = [[n.get("id"), n.get("state"), n.get("raft-role") or "-",
             f"{client.base.split('://')[0]}://{n.get('host')}:{n.get('rest-port')}"
             if n.get("rest-port") else "-",
             n.get("connect-endpoint") or "-",
             f"{n.get('slots-used')}/{n.get('slots')}",
             n.get("job-count", len(n.get("jobs") or [])),
             n.get("pid") or "-", fmt_time(n.get("registered-at"))]
            for n in nodes]
    out(table(["NODE", "STATE", "RAFT", "REST", "SPARK CONNECT", "SLOTS", "JOBS", "PID",
               "REGISTERED"], rows))
    for n in nodes:
        if n.get("disk-low"):
            out(f"disk low on {n.get('id')}: {n['disk-low']}")
        if n.get("missing-os-users"):
            out(f"no OS user on {n.get('id')} for tenant(s) "
                f"{', '.join(n['missing-os-users'])}: their jobs go to other peers")
    core = client.get("/cluster/peers").get("voting-core") or {} if len(nodes) > 1 else {}
    if core.get("note"):  # short of raft.voters, or a promotion under way
        out(f"voting core ({len(core.get('voters') or [])} voters): {core['note']}")
    return EXIT_OK


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

    add_submit(add)
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
    add_token(add)
    add_tenant(add)
    add_pipeline(add)
    comp = add("completion", "print a shell completion script (commands, options, job ids): "
                             "eval \"$(jm completion bash)\"; zsh alike; fish: "
                             "jm completion fish | source", cmd_completion)
    comp.add_argument("shell", choices=SHELLS, help=", ".join(SHELLS))
    comp.set_defaults(offline=True)
    return p


def cmd_completion(client: Optional[Client], a: argparse.Namespace) -> int:
    try:
        out(script(a.shell).rstrip("\n"))
    except NoArgcomplete as exc:
        raise UsageError(str(exc))
    return EXIT_OK


def run(argv: Optional[list[str]]) -> int:
    parser = make_parser()
    complete_if_asked(parser)  # (the shell asking for completions: answered, then exit)
    a = parser.parse_args(argv)
    if not getattr(a, "command", None):
        raise UsageError("missing command; one of submit, run, list, status, cancel, savepoint, "
                         "stop, cluster, rebalance, drain, exceptions, result, artifacts, "
                         "upload, sql, token (see 'jm --help')")
    a.json = bool(getattr(a, "json", False))
    a.timeout = getattr(a, "timeout", None)
    if getattr(a, "offline", False):  # needs no peer
        return a.func(None, a)
    return a.func(client_for(a, a.timeout), a)


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
