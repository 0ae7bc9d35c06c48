"""Shared test helpers: ports, config dirs, polling with a deadline, REST calls."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from typing import Any, Callable

from chaos.peers import parse_body, request
from jm.local.localcluster import local_lines, wait_until, write_conf  # noqa: F401
from jm.runtime.ports import free_ports  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The class-data archive of Spark's JVM (spark.class-archive, jm/runtime/classarchive.py)
# the Spark tests' JVMs map: made once at the start of a run with slow tests (conftest.py;
# git-ignored); a JVM started without it, or where it does not match, starts as before.
CLASS_ARCHIVE = os.path.join(ROOT, ".cache", "spark-classes.jsa")
# JVM options for the e2e tests' small queries: C1 only and the serial GC take about half
# the CPU of a Spark JVM's start and first queries (24 -> 13 s on 2 cores), the archive
# half again (13 -> 6 s; the peers of make_conf's clusters with Spark are given it). The
# e2e peer processes and the chaos runs pass them to every spark-submit
# (SPARK_SUBMIT_OPTS); executors on a standalone cluster get them as
# spark.executor.extraJavaOptions. Not in the in-process integration tests: there the SQL
# gateway's worker exited (code 255) under them, a job of its session then never ended
# (left to look into); those peers get the archive alone.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# (a standalone cluster's executors: the class path of a StandaloneCluster's workers is the
# jars alone, as the archive's)
EXECUTOR_JVM = f"{FAST_JVM} -XX:SharedArchiveFile={CLASS_ARCHIVE}"

@contextlib.contextmanager
def http_server(handler):
    """A threading HTTP server on a free loopback port serving `handler` (a
    BaseHTTPRequestHandler class or factory): its port; shut down and closed at the end."""
    import http.server
    import threading
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        t.join(10)


def make_conf(base: str, n: int, settings: dict | None = None) -> tuple[str, list[str]]:
    """Write conf/config.yaml and conf/masters for n local peers; return (conf dir, lines)."""
    lines = local_lines(n)
    settings = settings or {}
    spark = any(settings.get(k) for k in ("spark.connect.embedded", "spark.master",
                                          "spark.remote"))
    # (a test's teardown stops every peer: none drains first, jobmanager.stop.drain-deadline;
    # a zygote imports pyspark, pandas and pyarrow only for a cluster with Spark)
    values = {"spark.connect.embedded": False, "restart-strategy.type": "none",
              "jobmanager.stop.drain-deadline": 0,
              "jobmanager.executor.preload": "pyspark" if spark else "none",
              "spark.class-archive": CLASS_ARCHIVE if spark else ""}
    values.update(settings)
    return write_conf(base, lines, values), lines


# Read-your-writes across peers, as the CLI and the web UI do it: requests to the peers of
# one registered cluster carry the highest X-JM-Index seen so far (X-JM-Min-Index).
_SESSIONS: dict[str, list[int]] = {}  # "host:port" -> the shared [index] of its cluster
_TOKENS: dict[str, str] = {}  # "host:port" -> the rest.auth.token its cluster wants


def _netloc(url: str) -> str:
    from urllib.parse import urlsplit
    return urlsplit(url).netloc


def consistent_session(urls: list[str], token: str | None = None) -> None:
    """From now on, requests to these peers read what any of them acknowledged (and carry
    `token` as their bearer credential, unless they bring their own)."""
    cell = [0]
    for u in urls:
        _SESSIONS[_netloc(u)] = cell
        if token:
            _TOKENS[_netloc(u)] = token


def end_session(urls: list[str]) -> None:
    for u in urls:
        _SESSIONS.pop(_netloc(u), None)
        _TOKENS.pop(_netloc(u), None)


def _session_headers(url: str, headers: dict) -> list[int] | None:
    cell = _SESSIONS.get(_netloc(url))
    if cell is not None and cell[0] and "X-JM-Min-Index" not in headers:
        headers["X-JM-Min-Index"] = str(cell[0])
    token = _TOKENS.get(_netloc(url))
    if token and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {token}"
    return cell


def _saw(cell: list[int] | None, value: str | None) -> None:
    if cell is not None and value and value.isdigit():
        cell[0] = max(cell[0], int(value))


def poll(fn: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
         what: str = "condition") -> Any:
    """Call fn every `interval` s until it returns a truthy value (which is returned;
    errors mean "not up yet"); after `timeout` s fail the test with an AssertionError
    naming `what` and the last value or exception seen."""
    try:
        return wait_until(fn, timeout, what, interval)
    except TimeoutError as exc:
        raise AssertionError(f"timed out: {exc}") from None


async def apoll(fn: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
                what: str = "condition") -> Any:
    """`poll` for the test's event loop: fn may be a coroutine function."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if asyncio.iscoroutine(last):
                last = await last
            if last:
                return last
        except Exception as exc:
            last = exc
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out: {what}: not within {timeout:.0f} s (last: {last!r})")


def http(method: str, url: str, body: Any = None, headers: dict | None = None,
         raw: bytes | None = None, timeout: float = 10.0,
         with_headers: bool = False) -> tuple:
    """One request (a JSON `body` or `raw` bytes) -> (status, body: JSON, else text), and
    the answer's headers with `with_headers`. Peers of a consistent_session get the
    session's X-JM-Min-Index and bearer token."""
    hdrs = dict(headers or {})
    cell = _session_headers(url, hdrs)
    status, parsed, answer = request(method, url, body, hdrs, raw, timeout)
    _saw(cell, answer.get("X-JM-Index"))
    return (status, parsed, answer) if with_headers else (status, parsed)


def multipart(filename: str, content: bytes, field: str = "file") -> tuple[bytes, str]:
    boundary = "----jmtestboundary7f3a"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
            f"filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    body += content + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


async def ahttp(method: str, url: str, body: Any = None, headers: dict | None = None,
                raw: bytes | None = None, timeout: float = 10.0,
                with_headers: bool = False) -> tuple:
    """`http` for in-process tests (the peers share the test's event loop)."""
    import aiohttp
    hdrs = dict(headers or {})
    cell = _session_headers(url, hdrs)
    data = raw
    if body is not None and raw is None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.request(method, url, data=data, headers=hdrs) as resp:
            _saw(cell, resp.headers.get("X-JM-Index"))
            parsed = parse_body(await resp.read())
            return (resp.status, parsed, resp.headers) if with_headers else (resp.status, parsed)


async def awrite(method: str, url: str, body: Any = None, headers: dict | None = None,
                 timeout: float = 60.0) -> tuple:
    """A write as a client sends it: a 503 (a write in flight when the leadership moved:
    LEADER_CHANGED, or no leader for a moment on a busy machine) is sent again with the
    same X-Request-Id, which the cluster accepts only once. -> (status, body) of the first
    answer that is not a 503."""
    import uuid
    hdrs = {"X-Request-Id": str(uuid.uuid4()), **(headers or {})}

    async def attempt():
        s, b = await ahttp(method, url, body, headers=hdrs)
        return None if s == 503 else (s, b)
    return await apoll(attempt, timeout, what=f"an answer to {method} {url} other than 503")


async def asubmit(url: str, spec: dict, timeout: float = 60.0) -> str:
    """POST /jobs as a client does (`awrite`) -> the job id."""
    s, b = await awrite("POST", url + "/jobs", spec, timeout=timeout)
    assert s == 202, b
    return b["jobid"]


async def asubmit_to(cluster: Any, spec: dict, peer: int = 0) -> str:
    """POST /jobs to peer `peer` of an in-process cluster (jm.testing) -> the job id."""
    return await asubmit(cluster.url(peer), spec)


async def aended(url: str, jid: str, timeout: float = 60.0) -> dict:
    """The job once it is FINISHED, FAILED or CANCELED (GET /jobs/{id} on `url`)."""
    from jm.policy.jobs.vocab import TERMINAL

    async def check():
        s, b = await ahttp("GET", url + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in TERMINAL else None
    return await apoll(check, timeout, what=f"job {jid} ended")


async def spawned(executor: Any, params: Any) -> Any:
    """The job process an executor's spawn started (it must have started one)."""
    from jm.runtime.executor import Started
    out = await executor.spawn(params)
    assert isinstance(out, Started), out
    return out.process


def make_pki(d: str, ips: tuple = ("127.0.0.1",)) -> dict:
    """A CA and a certificate for `ips` (the first its common name) and localhost signed
    by it (PEM files in d)."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, key, signer, ca, sans=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jm test CA")])
    ca = cert(ca_name, ca_name, ca_key, ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    srv = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ips[0])]), ca_name,
               key, ca_key, False, [*(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
                                    x509.DNSName("localhost")])
    paths = {"ca": os.path.join(d, "ca.pem"), "cert": os.path.join(d, "peer.pem"),
             "key": os.path.join(d, "peer.key")}
    with open(paths["ca"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["cert"], "wb") as f:
        f.write(srv.public_bytes(serialization.Encoding.PEM))
    with open(paths["key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths
