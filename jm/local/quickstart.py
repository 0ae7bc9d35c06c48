"""Second half of bin/quickstart.sh: wait for the local cluster, run the example word
count through REST, print its result and the REST addresses."""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid

from jm.config import ConfigError, read_masters
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
        print(f"==> waiting for {len(urls)} peers and their Spark Connect servers")
        for url in urls:
            _wait(f"{url} ready", lambda u=url: (lambda h: h.get("ok") and h.get("spark-ready"))(
                _call("GET", u + "/healthz")), args.timeout)
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
    except (TimeoutError, OSError, urllib.error.URLError, ValueError, KeyError) as exc:
        print(f"quickstart: {exc}", file=sys.stderr)
        return 1
    print("==> REST addresses: " + "  ".join(urls))
    print("    try: .venv/bin/jm --address " + urls[0] + " cluster")
    print("    stop the cluster with: bin/stop-cluster.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
