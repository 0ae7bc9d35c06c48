"""A SQL gateway session seen from a client (standard library only): open it on any peer,
run statements, read their pages, cancel, close. `jm sql` and the DB-API module
(jm/client/dbapi.py) are built on it; any peer of `address` (comma-separated) serves any
session, so a client simply moves on to the next peer when one does not answer."""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterator, Optional
from urllib.parse import quote

from jm.client.cli_http import ApiError, Client
from jm.policy.sql.opid import op_of
from jm.policy.sql.sparkerror import short

API = "/v1"


class StatementFailed(Exception):
    """The statement ran and failed, or was cancelled: str() is one line (Spark's error
    class and message), `detail` the whole text the gateway gave (Spark's stack)."""

    def __init__(self, message: str, status: int = 400, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail or message

    @classmethod
    def of(cls, exc: ApiError) -> "StatementFailed":
        """The gateway's error answer: its first entry is the line to show (shortened
        here too, for a peer that sends Spark's whole text first), the rest the detail."""
        errors = [str(e) for e in exc.errors] or [str(exc)]
        return cls(short(errors[0]), exc.status, "\n".join(errors[1:]) or errors[0])


class Result:
    """One statement's outcome: its columns (Flink column infos) and an iterator over its
    rows, read from the gateway a page at a time."""

    def __init__(self, session: "SqlSession", op: str, first: dict) -> None:
        self.session = session
        self.op = op
        self.columns: list[dict] = (first.get("results") or {}).get("columns") or []
        self.kind = first.get("resultKind", "SUCCESS")
        self.is_query = bool(first.get("isQueryResult"))
        self._page = first
        self.done = False

    @property
    def names(self) -> list[str]:
        return [c.get("name") for c in self.columns]

    def rows(self) -> Iterator[list]:
        page = self._page
        while True:
            if page.get("resultType") in ("PAYLOAD", "EOS"):  # (EOS: a whole first page)
                for d in (page.get("results") or {}).get("data") or []:
                    yield d.get("fields")
            nxt = page.get("nextResultUri")
            if not nxt or page.get("resultType") == "EOS":
                self.done = True
                return
            page = self.session._get(nxt)
            if page.get("resultType") in ("PAYLOAD", "EOS") and not self.columns:
                self.columns = (page.get("results") or {}).get("columns") or []


class SqlSession:
    def __init__(self, client: Client, properties: Optional[dict] = None,
                 name: str = "") -> None:
        self.client = client
        # a session whose peer died is unavailable (503) until it has moved: keep trying
        # within the client's time budget
        client.max_attempts = client.max_attempts or 1000
        body: dict[str, Any] = {"properties": {k: str(v) for k, v in (properties or {}).items()}}
        if name:
            body["sessionName"] = name
        self.handle = client.request("POST", f"{API}/sessions", body)["sessionHandle"]
        self.running: Optional[str] = None   # the operation in flight (for a cancel)
        self.prefer_holder()

    def prefer_holder(self) -> None:
        """Talk to the peer holding the session first (any peer would forward there)."""
        url = (self.info().get("rest-url") or "").rstrip("/")
        if url:
            self.client.bases = [url] + [b for b in self.client.bases if b != url]
            self.client.base = url

    @property
    def _base(self) -> str:
        return f"{API}/sessions/{quote(self.handle, safe='')}"

    def _get(self, uri: str) -> dict:
        try:
            return self.client.get(uri)
        except ApiError as exc:
            raise StatementFailed.of(exc)

    def execute(self, statement: str, config: Optional[dict] = None) -> Result:
        """Run a statement; return once its first page (or its error) is there."""
        body: dict[str, Any] = {"statement": statement}
        if config:
            body["executionConfig"] = {k: str(v) for k, v in config.items()}
        # a retry after a lost answer must not run the statement twice: one request id
        # (which names its operation before the answer comes: a cancel meanwhile); the
        # answer carries the first page (rest/sql.py first_result_wait): a short query's
        # whole result in one round trip
        request_id = uuid.uuid4().hex
        self.running = op_of(self.handle, request_id)  # (a cancel before the answer)
        try:
            answer = self.client.request("POST", f"{self._base}/statements", body, headers={
                "X-Request-Id": request_id, "Prefer": "return=representation"})
            op = answer["operationHandle"]
            page = answer.get("result") or {"resultType": "NOT_READY"}  # (a peer before it)
            uri = f"{self._base}/operations/{quote(op, safe='')}/result/0?rowFormat=JSON"
            while page.get("resultType") == "NOT_READY":
                uri = page.get("nextResultUri") or uri
                page = self._get(uri)
            return Result(self, op, page)
        except ApiError as exc:
            if exc.status in (400, 409):  # it ran and failed, or it was cancelled
                raise StatementFailed.of(exc)
            raise
        except KeyboardInterrupt:  # Ctrl-C in `jm sql`: the statement stops too
            self.cancel()
            raise
        finally:
            self.running = None

    def cancel(self, op: Optional[str] = None) -> None:
        op = op or self.running
        if op:
            try:
                self.client.request("POST", f"{self._base}/operations/{quote(op, safe='')}/cancel",
                                    budget=5)
            except Exception:
                pass

    def close_operation(self, op: str) -> None:
        try:
            self.client.request("DELETE", f"{self._base}/operations/{quote(op, safe='')}/close",
                                budget=5)
        except Exception:
            pass

    def heartbeat(self) -> None:
        self.client.request("POST", f"{self._base}/heartbeat")

    def info(self) -> dict:
        return self.client.get(self._base)

    def close(self) -> None:
        try:
            self.client.request("DELETE", self._base, budget=5)
        except ApiError as exc:
            if exc.status != 404:
                raise


def timed(fn, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start
