"""HTTP client, errors and output helpers of the `jm` CLI (standard library only)."""
from __future__ import annotations

import json
import time
from typing import Any, Optional

DEFAULT_ADDRESS = "http://127.0.0.1:8081"
DEFAULT_REST_PORT = 8081
DEFAULT_TIMEOUT = 30.0          # retry budget of one request, seconds
MAX_ATTEMPTS = 5                # per request, on connection errors and 503
ATTEMPT_TIMEOUT = 15.0          # socket timeout of one attempt
EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
from jm.policy.jobs.vocab import TERMINAL  # noqa: F401  (a job's ends: cli_jobs, cli_ops)


# ---- errors ---------------------------------------------------------------------------

class CliError(Exception):
    """Ends the command: one line on stderr and an exit code."""
    code = EXIT_API

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CliError):
    code = EXIT_USAGE


class Unreachable(CliError):
    code = EXIT_UNREACHABLE


class ApiError(CliError):
    """The peer answered with an HTTP error."""

    def __init__(self, status: int, errors: list, attempts: int = 1) -> None:
        self.status, self.errors, self.attempts = status, errors, attempts
        msg = "; ".join(str(e) for e in errors) or "error"
        super().__init__(f"{msg} (HTTP {status})")


def one_line(text: Any, limit: int = 2000) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


# ---- HTTP -------------------------------------------------------------------------------

def normalise_address(address: str) -> str:
    """'host:port', 'host' or 'http(s)://host[:port][/prefix]' -> base URL without a
    trailing slash. A bare host gets the default REST port."""
    from urllib.parse import urlsplit
    a = (address or "").strip()
    if not a:
        raise UsageError("the peer address is empty; use --address http://host:port")
    bare = "://" not in a
    if bare:
        a = "http://" + a
    try:
        parts = urlsplit(a)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"bad peer address {address!r}: {exc}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"bad peer address {address!r}: expected host:port or "
                         "http://host:port")
    if bare and port is None:
        a = f"{parts.scheme}://{parts.netloc}:{DEFAULT_REST_PORT}{parts.path}"
    return a.rstrip("/")


def _ssl_enabled(conf_dir: str) -> bool:
    """rest.ssl.enabled in <conf_dir>/config.yaml (read without a YAML library)."""
    import os
    import re
    try:
        with open(os.path.join(conf_dir, "config.yaml")) as f:
            text = f.read()
    except OSError:
        return False
    m = re.search(r"^rest\.ssl\.enabled\s*:\s*['\"]?(\w+)", text, re.M)
    return bool(m) and m.group(1).lower() in ("true", "yes", "on", "1")


def masters_addresses() -> Optional[str]:
    """The REST addresses of the peers in $JM_CONF_DIR/masters (or ./conf/masters), https
    when its config.yaml sets rest.ssl.enabled."""
    import os
    conf_dir = os.environ.get("JM_CONF_DIR") or "conf"
    scheme = "https" if _ssl_enabled(conf_dir) else "http"
    path = os.path.join(conf_dir, "masters")
    try:
        with open(path) as f:
            lines = [ln.split("#", 1)[0].strip() for ln in f]
    except OSError:
        return None
    out = []
    for ln in lines:
        parts = ln.split(":")
        if len(parts) == 3 and parts[0] and parts[1].isdigit():
            out.append(f"{scheme}://{parts[0]}:{parts[1]}")
    return ",".join(out) or None


class _Transient(Exception):
    """A failed attempt that may be retried: no connection, or 503."""

    def __init__(self, message: str, status: Optional[int] = None, errors: Optional[list] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.status, self.errors, self.retry_after = status, errors or [], retry_after


def _parse_body(payload: bytes) -> Any:
    if not payload:
        return None
    try:
        return json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return payload.decode("utf-8", "replace")


def _errors_of(body: Any) -> list:
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        return [one_line(e, 500) for e in body["errors"]] or ["error"]
    if isinstance(body, str) and body.strip():
        return [one_line(body, 200)]
    return []


class Client:
    """A tiny REST client. Retries connection failures and 503 with a short backoff
    (honouring Retry-After) within a time budget; a retried request is sent unchanged,
    so callers make writes idempotent (X-Request-Id for POST /jobs)."""

    def __init__(self, address: str, timeout: float = DEFAULT_TIMEOUT,
                 token: Optional[str] = None, ca_file: Optional[str] = None) -> None:
        # several peers (comma-separated): a peer that does not answer (or has no leader)
        # makes the client move on to the next one
        self.bases = [normalise_address(a) for a in address.split(",") if a.strip()] or \
            [normalise_address(address)]
        self.base = self.bases[0]
        self.timeout = timeout
        self.token = token
        self.ca_file = ca_file     # CA bundle for https peers with a private CA
        self.attempts = 0          # attempts made by the last request
        self.min_index = 0         # the highest X-JM-Index seen: every peer asked later
        self._opener = None        # answers with at least that much applied
        # attempts per request (default: MAX_ATTEMPTS, or two rounds of the peers); the
        # time budget bounds them anyway
        self.max_attempts: Optional[int] = None

    def _saw_index(self, headers: Any) -> None:
        try:
            self.min_index = max(self.min_index, int(headers.get("X-JM-Index", "")))
        except (AttributeError, TypeError, ValueError):
            pass

    def _open(self, method: str, url: str, data: Optional[bytes], headers: dict,
              timeout: float) -> tuple[int, Any]:
        import http.client
        import urllib.error
        import urllib.request
        if self._opener is None:
            handlers = []
            if self.ca_file:
                import ssl
                try:
                    ctx = ssl.create_default_context(cafile=self.ca_file)
                except (OSError, ssl.SSLError) as exc:
                    raise UsageError(f"--ca {self.ca_file}: {one_line(exc)}")
                handlers.append(urllib.request.HTTPSHandler(context=ctx))
            self._opener = urllib.request.build_opener(*handlers)
        if self.min_index:
            headers = dict(headers, **{"X-JM-Min-Index": str(self.min_index)})
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                self._saw_index(resp.headers)
                return resp.status, _parse_body(resp.read())
        except urllib.error.HTTPError as exc:
            self._saw_index(exc.headers)
            try:
                body = _parse_body(exc.read())
            except (OSError, http.client.HTTPException):
                body = None
            finally:
                exc.close()
            if exc.code == 503:
                retry_after = None
                try:
                    retry_after = float(exc.headers.get("Retry-After", ""))
                except (TypeError, ValueError):
                    pass
                errs = _errors_of(body) or ["service unavailable"]
                raise _Transient("; ".join(errs), 503, errs, retry_after)
            return exc.code, body
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, OSError) and reason.strerror:
                reason = reason.strerror
            raise _Transient(one_line(reason) or "connection failed")
        except (OSError, http.client.HTTPException) as exc:  # resets, timeouts, bad status
            raise _Transient(one_line(exc) or type(exc).__name__)

    def request(self, method: str, path: str, body: Any = None, *, raw: Optional[bytes] = None,
                content_type: Optional[str] = None, headers: Optional[dict] = None,
                budget: Optional[float] = None) -> Any:
        """Send a request; return the decoded JSON body of a 2xx answer or raise
        ApiError / Unreachable."""
        hdrs = {"Accept": "application/json", "User-Agent": "jm-cli"}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        hdrs.update(headers or {})
        data = raw
        if body is not None and raw is None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        elif content_type:
            hdrs["Content-Type"] = content_type
        start = time.monotonic()
        deadline = start + (self.timeout if budget is None else budget)
        delay = 0.2
        self.attempts = 0
        while True:
            self.attempts += 1
            remaining = deadline - time.monotonic()
            try:
                status, out = self._open(method, self.base + path, data, hdrs,
                                         max(0.5, min(ATTEMPT_TIMEOUT, remaining)))
            except _Transient as exc:
                if len(self.bases) > 1:  # the next peer may answer
                    self.base = self.bases[(self.bases.index(self.base) + 1) % len(self.bases)]
                wait = delay if exc.retry_after is None else min(max(exc.retry_after, 0.1), 5.0)
                cap = self.max_attempts or max(MAX_ATTEMPTS, 2 * len(self.bases))
                if (self.attempts >= cap
                        or time.monotonic() + wait > deadline):
                    tries = (f" (after {self.attempts} attempts)" if self.attempts > 1 else "")
                    if exc.status == 503:
                        raise ApiError(503, [m + tries for m in exc.errors[:1]] + exc.errors[1:],
                                       self.attempts)
                    raise Unreachable(f"cannot reach {self.base}: {exc}{tries}")
                time.sleep(wait)
                delay = min(delay * 2, 2.0)
                continue
            if status >= 400:
                raise ApiError(status, _errors_of(out) or [f"{method} {path} failed"],
                               self.attempts)
            if isinstance(out, str):
                raise CliError(f"unexpected answer from {self.base}{path} (not JSON): "
                               f"{one_line(out, 200)}")
            return out

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)


def client_for(a: Any, timeout: Optional[float] = None) -> Client:
    """The client of a command's options (--address, --token, --ca; their environment
    variables, conf/masters, the default address)."""
    import os
    address = (getattr(a, "address", None) or os.environ.get("JM_ADDRESS")
               or masters_addresses() or DEFAULT_ADDRESS)
    token = getattr(a, "token", None) or os.environ.get("JM_TOKEN") or None
    ca = getattr(a, "ca", None) or os.environ.get("JM_CA_FILE") or None
    return Client(address, timeout if timeout is not None else DEFAULT_TIMEOUT, token, ca)


def savepoint_location(raw: str) -> str:
    """A savepoint location as given on the command line: a URI (file://, s3://, hdfs://,
    ...) as it is, the peers check it; a path made absolute here."""
    import os
    import re
    return raw if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", raw) else os.path.abspath(raw)


def quote_id(job_id: str) -> str:
    from urllib.parse import quote
    return quote(job_id, safe="")


# ---- output helpers -----------------------------------------------------------------

def out(line: str = "") -> None:
    print(line, flush=True)


def print_json(obj: Any) -> None:
    out(json.dumps(obj, indent=2))


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[one_line("-" if v is None or v == "" else v, 80) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def fmt_time(ms: Any) -> str:
    if not isinstance(ms, (int, float)) or ms < 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000.0))


def fmt_duration(ms: Any) -> str:
    if not isinstance(ms, (int, float)) or ms < 0:
        return "-"
    s = ms / 1000.0
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def fmt_size(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GiB"


def compact(obj: Any) -> str:
    return json.dumps(obj)


# ---- how a watched job ended -------------------------------------------------------------

def root_exception(client: "Client", job_id: str) -> Any:
    """A failed job's root exception, or None if it cannot be read."""
    try:
        return client.get(f"/jobs/{quote_id(job_id)}/exceptions").get("root-exception")
    except ApiError:
        return None


def end_error(job_id: str, state: Any, root: Any) -> CliError:
    """The one-line error for a job that did not end as the command expected."""
    if state == "FAILED":
        return CliError(f"job {job_id} ended FAILED" + (f": {one_line(root, 300)}" if root
                                                        else "")
                        + f" (details: jm exceptions {job_id})")
    return CliError(f"job {job_id} ended {state}")


def interrupted(job_id: str) -> CliError:
    return CliError(f"interrupted; job {job_id} keeps running (stop it with: "
                    f"jm cancel {job_id})", EXIT_INTERRUPTED)
