"""Second half of bin/quickstart.sh: wait for the local cluster, run the example word
count through REST, print its result and the REST addresses."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid

from jm.config import ConfigError, load_config, read_masters
from jm.local.localcluster import wait_until

from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in


def _call(method: str, url: str, data: bytes | None = None, ctype: str | None = None) -> dict:
    req = urllib.request.Request(url, data=data, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def _wait(what: str, fn, timeout: float) -> object:
    return wait_until(fn, timeout, what, interval=0.5,
                      errors=(OSError, ValueError, urllib.error.URLError))


SPARK_FAILED_AFTER = 2  # starts of a peer's Spark that ended: it cannot start, say why
SHOWN_LOG_LINES = 15
REPORT_EVERY = 10.0     # s between "still waiting" lines


class SparkCannotStart(Exception):
    pass


def _health(url: str) -> dict | None:
    try:
        return _call("GET", url + "/healthz")
    except (OSError, ValueError, urllib.error.URLError):
        return None  # (not up yet)


def _spark_log(log_dir: str, node_id: str) -> str:
    """The last lines of a peer's Spark Connect server log (where a JVM that cannot start
    says why: no Java, a port taken, too little memory)."""
    path = os.path.join(log_dir, node_id.replace(":", "_"), "spark-connect.log")
    try:
        with open(path, errors="replace") as f:
            lines = [ln.rstrip() for ln in f.readlines()[-200:]]
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    wanted = [ln for ln in lines if ln and not ln.startswith("[jm]")]
    return f"{path}:\n" + "\n".join("    " + ln for ln in wanted[-SHOWN_LOG_LINES:])


def wait_ready(peers: list, log_dir: str, timeout: float,
               clock=time.monotonic, pause=time.sleep, say=print) -> None:
    """Until every peer answers and its Spark is ready, saying every REPORT_EVERY s how
    long it has waited and for what; SparkCannotStart (with the end of the peer's Spark
    log) once a peer's Spark has failed to start SPARK_FAILED_AFTER times."""
    start = last = clock()
    while True:
        waiting = []
        for m in peers:
            h = _health(m.rest_url)
            if h is None:
                waiting.append(f"{m.node_id} (not answering yet)")
                continue
            restarts = max((e.get("restarts") or 0 for e in h.get("engines") or ()),
                           default=0)
            if restarts >= SPARK_FAILED_AFTER and not h.get("spark-ready"):
                raise SparkCannotStart(
                    f"the Spark Connect server of {m.node_id} cannot start (it ended "
                    f"{restarts} times); the end of its log, "
                    f"{_spark_log(log_dir, m.node_id)}")
            if not (h.get("ok") and h.get("spark-ready")):
                waiting.append(f"{m.node_id} ({'Spark starting' if h.get('ok') else 'joining'})")
        if not waiting:
            return
        now = clock()
        if now - start > timeout:
            raise TimeoutError(f"not ready after {timeout:.0f} s: {', '.join(waiting)}; "
                               f"see the logs in {log_dir}")
        if now - last >= REPORT_EVERY:
            say(f"    {now - start:.0f} s: waiting for {', '.join(waiting)}", flush=True)
            last = now
        pause(0.5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="quickstart")
    ap.add_argument("--conf-dir", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    try:
        masters = read_masters(os.path.join(args.conf_dir, "masters"))
    except ConfigError as exc:
        print(f"quickstart: {exc}", file=sys.stderr)
        return 2
    urls = [m.rest_url for m in masters]
    try:
        print(f"==> waiting for {len(urls)} peers and their Spark Connect servers "
              "(a first start takes a minute or two)", flush=True)
        wait_ready(masters, load_config(args.conf_dir).path("env.log.dir"), args.timeout)
        overview = _call("GET", urls[0] + "/overview")
        print(f"    leader {overview['leader']}, {overview['peers-alive']} peers alive, "
              f"{overview['slots-total']} slots")
        with open(args.example, "rb") as f:
            code = f.read()
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{os.path.basename(args.example)}\"\r\n\r\n").encode() + code + \
            f"\r\n--{boundary}--\r\n".encode()
        art = _call("POST", urls[1 % len(urls)] + "/artifacts", body,
                    f"multipart/form-data; boundary={boundary}")
        spec = {"name": "wordcount-example", "entry": "wordcount:main",
                "pyfiles": [art["pyfile"]], "args": {"input": args.input, "top": 5}}
        job = _call("POST", urls[-1] + "/jobs", json.dumps(spec).encode(), "application/json")
        jid = job["jobid"]
        print(f"==> submitted the word count as job {jid} (artifact {art['id'][:19]}...)")
        final = _wait(f"job {jid} to end", lambda: (lambda j: j if j["state"] in TERMINAL else None)(
            _call("GET", urls[0] + f"/jobs/{jid}")), args.timeout)
        print(f"==> job {jid} {final['state']} on {final['node']} in {final['duration']} ms")
        if final["state"] != "FINISHED":
            exc = _call("GET", urls[0] + f"/jobs/{jid}/exceptions")
            print(f"    {exc.get('root-exception')}")
            return 1
        print(json.dumps(final["result"], indent=2))
    except (TimeoutError, SparkCannotStart, OSError, urllib.error.URLError, ValueError,
            KeyError, ConfigError) as exc:
        print(f"quickstart: {exc}", file=sys.stderr)
        return 1
    print("==> REST addresses: " + "  ".join(urls))
    print("    try: .venv/bin/jm --address " + urls[0] + " cluster")
    print("    stop the cluster with: bin/stop-cluster.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
