"""jm run: submit a PySpark application the way spark-submit does. Standard library only.

    jm run APP.py [ARGS...] [--conf K=V]... [--py-files A.py,B.zip] [--name N]
           [--mode classic|connect] [--streaming] [--wait]

What is local (the application, its --py-files) is uploaded first; s3://, gs:// and
hdfs:// URIs are copied by the peer. jm's options may
stand before APP or anywhere after it; everything after `--` goes to the application
as it is (for an application option that has the name of one of jm's).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from jm.client.cli_http import (EXIT_OK, Client, UsageError, end_error, interrupted,
                                print_json, root_exception)
from jm.client.cli_ops import follow_logs
from jm.client.cli_spec import (parse_pairs, parse_restart, post_job, print_submitted,
                                read_requirements)
from jm.policy.jobs.fsuri import is_remote_ref
from jm.policy.jobs.submitopts import FILE_PROPERTIES, SUBMIT_OPTIONS, entries, split_alias

# jm run's options after APP: name -> takes a value
RUN_OPTIONS = {"--conf": True, "--py-files": True, "--requirements": True, "--name": True,
               "--mode": True,
               "--jobid": True, "--slots": True, "--restart-strategy": True,
               **{option: True for option in SUBMIT_OPTIONS},
               "--proxy-user": True, "--tenant": True,
               "--streaming": False, "--wait": False, "--progress": False,
               "--address": True, "-a": True, "--token": True, "--timeout": True,
               "--json": False}
APP_SUFFIXES = (".py", ".zip")


def split_app_args(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(jm's options, the application's arguments) from what follows APP (pure)."""
    ours: list[str] = []
    app: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            app.extend(tokens[i + 1:])
            break
        name = tok.split("=", 1)[0]
        if name in RUN_OPTIONS:
            ours.append(tok)
            if RUN_OPTIONS[name] and "=" not in tok:
                if i + 1 >= len(tokens):
                    raise UsageError(f"{tok} needs a value")
                ours.append(tokens[i + 1])
                i += 1
        else:
            app.append(tok)
        i += 1
    return ours, app


def parse_conf(pairs: list[str]) -> dict:
    return parse_pairs(pairs, "--conf")


def _code(client: Client, path: str, upload: Callable[..., dict],
          what: str, code: bool = True) -> str:
    """An artifact id for a local file (uploaded), or the reference as given (an
    artifact id, or a URI of a remote file system the peer copies from, as spark-submit
    downloads s3://... applications)."""
    if path.startswith("artifact:") or is_remote_ref(path):
        return path
    if not os.path.isfile(path):
        raise UsageError(f"{what} {path}: no such file")
    return (upload(client, path) if code else upload(client, path, False))["pyfile"]


def _submit_options(client: Client, a: argparse.Namespace,
                    upload: Callable[[Client, str], dict]) -> dict:
    """spark-submit's --jars, --files, --archives, --packages, --driver-memory ... as
    their Spark properties; local files uploaded (an archive's '#name' kept)."""
    out = {}
    for option, prop in SUBMIT_OPTIONS.items():
        value = getattr(a, _dest(option), None)
        if value is None:
            continue
        if prop in FILE_PROPERTIES:
            shipped = []
            for entry in entries(value):
                ref, alias = split_alias(entry)
                if not ref.startswith(("https://", "http://")):
                    ref = _code(client, ref, upload, option, code=False)
                shipped.append(ref if alias is None else f"{ref}#{alias}")
            value = ",".join(shipped)
        out[prop] = value
    return out


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def build_run_spec(a: argparse.Namespace) -> dict:
    """The job spec from jm run's options, before anything is uploaded (pure checks)."""
    if not (a.app.startswith("artifact:") or a.app.endswith(APP_SUFFIXES)):
        raise UsageError(f"{a.app}: the application must be a .py file or a .zip with a "
                         "__main__.py")
    spec: dict[str, Any] = {"argv": list(a.app_args)}
    conf = parse_conf(a.conf)
    if conf:
        spec["spark-conf"] = conf
    if a.mode:
        spec["spark-mode"] = a.mode
    spec["name"] = a.name or (os.path.basename(a.app) if not a.app.startswith("artifact:")
                              else None)
    if spec["name"] is None:
        del spec["name"]
    if a.streaming:
        spec["job-type"] = "streaming"
    if a.jobid:
        spec["jobid"] = a.jobid
    if a.slots is not None:
        spec["slots"] = a.slots
    if a.restart_strategy:
        spec["restart-strategy"] = parse_restart(a.restart_strategy)
    for field in ("proxy-user", "tenant"):
        value = getattr(a, field.replace("-", "_"), None)
        if value:
            spec[field] = value
    if a.requirements:
        spec["requirements"] = read_requirements(a.requirements)
    return spec


def cmd_run(client: Client, a: argparse.Namespace, upload: Callable[[Client, str], dict]
            ) -> int:
    spec = build_run_spec(a)
    pyfiles = [p for group in a.py_files for p in group.split(",") if p.strip()]
    spec["script"] = _code(client, a.app, upload, "application")
    spec["pyfiles"] = [_code(client, p, upload, "--py-files") for p in pyfiles]
    submitted = _submit_options(client, a, upload)
    if submitted:
        spec["spark-conf"] = {**submitted, **spec.get("spark-conf", {})}
    res = post_job(client, spec)
    job_id = res["jobid"]
    if not a.wait:
        print_submitted(res, a.json)
        return EXIT_OK
    print(f"[jm] job {job_id} submitted; its driver's output follows", file=sys.stderr,
          flush=True)
    try:
        job = follow_logs(client, job_id, sys.stdout.write, lost_ok=True,
                          announce=lambda n, node: print(f"[jm] attempt {n} on {node}",
                                                         flush=True))
    except KeyboardInterrupt:
        raise interrupted(job_id) from None
    if a.json:
        print_json(job)
    if job.get("state") == "FINISHED":
        return EXIT_OK
    root = root_exception(client, job_id) if job.get("state") == "FAILED" else None
    raise end_error(job_id, job.get("state"), root)


def add_run(add: Callable[..., argparse.ArgumentParser],
            upload: Callable[[Client, str], dict]) -> None:
    p = add("run", "run a PySpark application as spark-submit does (uploads it first)",
            lambda client, a: cmd_run(client, _merge(p, a), upload),
            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.description = (
        "run a PySpark application, as spark-submit does; prints its job id.\n\n"
        "  jm run app.py ARG... --conf spark.executor.memory=2g --py-files lib.zip --wait\n\n"
        "jm's options may stand before APP or after it; after '--' everything goes to the\n"
        "application. The application is its own Spark application (--mode classic, the\n"
        "default) or a session on its peer's Spark Connect server (--mode connect).")
    p.add_argument("app", metavar="APP", help="the application: a .py file or a .zip with a "
                                              "__main__.py (local, or artifact:sha256:...)")
    p.add_argument("app_args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the application's arguments (its sys.argv[1:])")
    _run_options(p)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", action="append", default=[], metavar="K=V",
                   help="a Spark property of the job's application; repeatable")
    p.add_argument("--py-files", action="append", default=[], metavar="A.py,B.zip",
                   help="modules for the driver and the executors (comma-separated; "
                        "local files are uploaded); repeatable")
    for option, prop in SUBMIT_OPTIONS.items():
        many = prop in FILE_PROPERTIES or prop in ("spark.jars.packages",
                                                   "spark.jars.repositories",
                                                   "spark.jars.excludes")
        p.add_argument(option, dest=_dest(option), metavar="A,B" if many else "VALUE",
                       help=f"as spark-submit's: sets {prop}"
                       + ("; local files are uploaded" if prop in FILE_PROPERTIES else ""))
    p.add_argument("--requirements", metavar="FILE",
                   help="a requirements.txt: the job's driver and UDFs import exactly these "
                        "versions (an environment the peer builds once per set, over its own)")
    p.add_argument("--name", help="the job's name (and spark.app.name; default: APP's name)")
    p.add_argument("--mode", choices=("classic", "connect"),
                   help="classic: its own Spark application (default); connect: a session "
                        "on the peer's Spark Connect server")
    p.add_argument("--streaming", action="store_true",
                   help="a streaming application: moved with savepoints, checkpoint in "
                        "$JM_CHECKPOINT_DIR")
    p.add_argument("--jobid", metavar="ID", help="a fixed job id")
    p.add_argument("--slots", type=int, metavar="N", help="slots the job takes (default 1)")
    p.add_argument("--proxy-user", metavar="USER", help="run the job as this OS user (as "
                   "spark-submit's --proxy-user; jobmanager.executor.proxy-users must allow "
                   "it)")
    p.add_argument("--tenant", metavar="T", help="the job's tenant (default: the "
                   "credential's; an admin may name any)")
    p.add_argument("--restart-strategy", metavar="TYPE|JSON",
                   help="none, fixed-delay, exponential-delay, failure-rate or a JSON object")
    p.add_argument("--wait", action="store_true",
                   help="print the driver's output as it comes; exit 0 only if the job "
                        "FINISHED")
    p.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)


class _OptionsAfterApp(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise UsageError(f"{message} (see 'jm run --help')")


def _merge(parser: argparse.ArgumentParser, a: argparse.Namespace) -> argparse.Namespace:
    """jm's options found after APP, merged into those given before it."""
    ours, app = split_app_args(a.app_args)
    a.app_args = app
    if not ours:
        return a
    for opt in ("--address", "-a", "--token", "--timeout"):
        if any(t.split("=", 1)[0] == opt for t in ours):
            raise UsageError(f"{opt} must stand before APP (see 'jm run --help')")
    mini = _OptionsAfterApp(prog="jm run", add_help=False, allow_abbrev=False)
    _run_options(mini)
    mini.add_argument("--json", action="store_true")
    later = mini.parse_args(ours)
    a.conf = list(a.conf) + later.conf
    a.py_files = list(a.py_files) + later.py_files
    for key in ("name", "mode", "jobid", "slots", "restart_strategy", "proxy_user",
                "tenant", "requirements", *(_dest(o) for o in SUBMIT_OPTIONS)):
        if getattr(later, key) is not None:
            setattr(a, key, getattr(later, key))
    for key in ("streaming", "wait", "json"):
        if getattr(later, key):
            setattr(a, key, True)
    return a
