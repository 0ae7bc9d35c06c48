"""A real Google Cloud Storage API server for tests: gcp-storage-emulator on 127.0.0.1 (a
free port, in memory), with one bucket, stopped by pid. The peers reach it through
pyarrow.fs's GCS client (`gs.endpoint`, `gs.anonymous`): tests/integration/
test_remote_savepoints.py."""
from __future__ import annotations

import contextlib
import json
import sys
import urllib.request
from typing import Iterator

from tests.helpers import free_ports
from tests.s3server import api_server

BUCKET = "gs-savepoints"


def peer_settings(endpoint: str) -> dict:
    return {"gs.endpoint": endpoint, "gs.anonymous": True}


def _json(endpoint: str, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def names(endpoint: str, prefix: str = "") -> list[str]:
    """The object names under `prefix` in BUCKET."""
    from urllib.parse import quote
    out = _json(endpoint, "GET", f"/storage/v1/b/{BUCKET}/o?prefix={quote(prefix, safe='')}")
    return sorted(o["name"] for o in out.get("items", []))


def put(endpoint: str, name: str, data: bytes) -> None:
    from urllib.parse import quote
    req = urllib.request.Request(
        f"{endpoint}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={quote(name, safe='')}",
        data=data, method="POST", headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req, timeout=10).read()


@contextlib.contextmanager
def gcs_server(log_path: str) -> Iterator[str]:
    """-> the endpoint URL; the bucket BUCKET exists."""
    port = free_ports(1)[0]
    endpoint = f"http://127.0.0.1:{port}"
    with api_server([sys.executable, "-m", "gcp_storage_emulator", "start", "--host",
                     "127.0.0.1", "--port", str(port), "--in-memory"], log_path,
                    lambda: _json(endpoint, "GET", "/storage/v1/b?project=test"),
                    "GCS emulator"):
        _json(endpoint, "POST", "/storage/v1/b?project=test", {"name": BUCKET})
        yield endpoint
