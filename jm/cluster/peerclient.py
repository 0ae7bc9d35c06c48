"""The one HTTP client a peer talks to the other peers with (heartbeats to the leader,
promotions, log and artifact fetches, the seeds asked at start): one pooled aiohttp
session, opened on first use on the running loop, that shows the peer credential and
verifies peers with the cluster's TLS context."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import aiohttp

from jm.api import INDEX_HEADER, MIN_INDEX_HEADER


class PeerUnreachable(Exception):
    """The peer did not answer in time, the connection failed, or the answer was not
    what a peer sends (a JSON body)."""


@dataclass(frozen=True)
class PeerAnswer:
    status: int
    body: Any                      # the JSON body (None when empty), or bytes for read()
    retry_after: Optional[str] = None
    index: Optional[int] = None    # the Raft index the peer had applied (X-JM-Index)

    def errors(self) -> list[str]:
        """The peer's {"errors": [...]}, or one line naming the status."""
        errs = self.body.get("errors") if isinstance(self.body, dict) else None
        return [str(e) for e in errs] if isinstance(errs, list) and errs else \
            [f"HTTP {self.status}"]


_FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError)


def _index(raw: Optional[str]) -> Optional[int]:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class PeerClient:
    def __init__(self, headers: Mapping[str, str], ssl: Any = True) -> None:
        self.headers = dict(headers)  # the peer credential (Authorization), if any
        self.ssl = ssl                # True, or the SSLContext of rest.ssl.* for https
        self._http: Optional[aiohttp.ClientSession] = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(headers=self.headers)
        return self._http

    async def call(self, method: str, url: str, timeout: float, json: Any = None,
                   params: Optional[Mapping[str, str]] = None,
                   min_index: Optional[int] = None) -> PeerAnswer:
        """One request; its JSON answer whatever the status. `min_index`: the peer
        answers once it has applied that Raft index (X-JM-Min-Index). PeerUnreachable
        when no JSON answer came within `timeout` s."""
        headers = {MIN_INDEX_HEADER: str(min_index)} if min_index is not None else None
        try:
            async with self._session().request(
                    method, url, json=json, params=params, headers=headers, ssl=self.ssl,
                    timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return PeerAnswer(resp.status, await resp.json(content_type=None),
                                  resp.headers.get("Retry-After"),
                                  _index(resp.headers.get(INDEX_HEADER)))
        except _FAILURES as exc:
            raise PeerUnreachable(str(exc) or type(exc).__name__) from None

    async def read(self, url: str, timeout: float) -> PeerAnswer:
        """GET a body as bytes (an artifact's content)."""
        try:
            async with self._session().get(url, ssl=self.ssl,
                                           timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return PeerAnswer(resp.status, await resp.read())
        except _FAILURES as exc:
            raise PeerUnreachable(str(exc) or type(exc).__name__) from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
