"""A real S3 API server for tests: moto's server on 127.0.0.1 (a free port), with one
bucket, stopped by pid. Used where savepoints go to s3:// (tests/integration/
test_remote_savepoints.py, tests/e2e/test_flink_cli.py)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Iterator

from tests.helpers import free_ports, poll

BUCKET = "savepoints"
KEY = SECRET = "test"
REGION = "us-east-1"


def peer_settings(endpoint: str) -> dict:
    """The peers' s3.* keys (Flink's names) for this server."""
    return {"s3.endpoint": endpoint, "s3.access-key": KEY, "s3.secret-key": SECRET,
            "s3.region": REGION}


@contextlib.contextmanager
def api_server(argv: list[str], log_path: str, ready: Callable[[], Any],
               what: str) -> Iterator[None]:
    """A server process (its own session, output in `log_path`) until `ready()` answers;
    killed with its group at the end."""
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def up() -> Any:
            if proc.poll() is not None:
                raise RuntimeError(f"the {what} ended: {open(log_path).read()[-2000:]}")
            return ready() or True
        poll(up, 60, what=what)
        yield
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
        log.close()


@contextlib.contextmanager
def s3_server(log_path: str) -> Iterator[tuple[str, object]]:
    """-> (endpoint URL, a boto3 client of it); the bucket BUCKET exists."""
    import boto3
    port = free_ports(1)[0]
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name=REGION)
    with api_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                    log_path, client.list_buckets, "moto S3 server"):
        client.create_bucket(Bucket=BUCKET)
        yield endpoint, client


def keys(client, prefix: str = "") -> list[str]:
    """The object keys under `prefix` in BUCKET."""
    out = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for o in out.get("Contents", []))
