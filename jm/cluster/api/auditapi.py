"""The audit log as REST asks it: an entry for each request this peer took (a refusal
for want of credentials counted per source instead: RefusedTally) and `GET /audit`, this
peer's entries merged with every other live peer's (jm/cluster/api/audit.py keeps them)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from jm.api import ApiError
from jm.cluster.api.audit import AuditLog, RefusedTally, merge_newest, syslog_sink
from jm.cluster.peerclient import PeerUnreachable
from jm.cluster.api.tenancy import int_or_none
from raft.records import ALIVE

if TYPE_CHECKING:
    from jm.cluster.peerclient import PeerClient
    from jm.config import Config
    from raft.node import RaftHost

log = logging.getLogger("jm.audit")


AUDIT_WAIT = 5.0  # s GET /audit waits for each other peer's entries


class PeerAudit:
    def __init__(self, *, node: str, conf: "Config", raft: "RaftHost", log_dir: str,
                 url_of: Callable[[str, int], str], peer_client: "PeerClient") -> None:
        self.node, self.conf, self.raft, self.log_dir = node, conf, raft, log_dir
        self.url_of, self.peer_client = url_of, peer_client
        self._audit_log: Optional[AuditLog] = None  # made at the first entry
        self._refused = RefusedTally()

    def _audit(self) -> AuditLog:
        if self._audit_log is None:
            sink, address = None, self.conf["rest.audit.syslog"]
            if address:
                try:
                    sink = syslog_sink(address)
                except OSError as exc:
                    log.error("audit entries not sent to syslog %s: %s", address, exc)
            self._audit_log = AuditLog(self.log_dir, self.conf["rest.audit.max-files"], sink)
        return self._audit_log

    def record(self, entry: Mapping[str, Any]) -> None:
        """An entry of a request this peer took; one refused for want of credentials (401)
        is counted per source instead (RefusedTally)."""
        audit_log, now = self._audit(), time.monotonic()
        if entry.get("status") == 401:
            counts, entries = self._refused.refused(entry.get("remote"), now), []
        else:
            counts, entries = self._refused.due(now), [entry]
        for e in [{"time": entry.get("time"), **c} for c in counts] + entries:
            audit_log.write({"peer": self.node, **e})

    async def entries(self, query: Mapping[str, str]) -> dict:
        """The newest entries of every live peer's audit log (`local`: this peer's only),
        and which peers answered; a peer that does not answer in AUDIT_WAIT s is named
        in `unreachable` (its entries are left out, the answer is still a 200)."""
        limit = int_or_none(query.get("limit", "100"))
        if limit is None or limit < 1:
            raise ApiError(400, "limit must be a positive integer")
        wanted = {k: v for k, v in query.items() if k in ("job", "who", "tenant")}

        def keep(e: dict) -> bool:
            return all(str(e.get(k) or "") == v or (k == "job" and v in e.get("ids", {})
                                                    .values()) for k, v in wanted.items())
        own = await asyncio.to_thread(self._audit().read, limit, keep)  # (files: off the loop)
        with self.raft.read() as st:
            others = [] if "local" in query else sorted(
                (p.id, self.url_of(p.host, p.rest_port)) for p in st.peers.values()
                if p.state == ALIVE and p.id != self.node)
        params = {**wanted, "limit": str(limit), "local": "1"}
        answers = await asyncio.gather(*(self._peer_audit(url, params) for _, url in others))
        logs = [own] + [a for a in answers if a is not None]
        return {"peers": [self.node] + [n for (n, _), a in zip(others, answers)
                                        if a is not None],
                "unreachable": [n for (n, _), a in zip(others, answers) if a is None],
                "entries": merge_newest(logs, limit)}

    async def _peer_audit(self, url: str, params: Mapping[str, str]) -> Optional[list]:
        try:
            answer = await self.peer_client.call("GET", url + "/audit", AUDIT_WAIT,
                                                 params=params)
        except PeerUnreachable:
            return None
        entries = answer.body.get("entries") if isinstance(answer.body, dict) else None
        if answer.status != 200 or not isinstance(entries, list):
            return None
        return [e for e in entries if isinstance(e, dict)]

