"""Paging and filters of the list routes (pure): a typed query parsed from the URL's
parameters, and the selection of one page of records from the replica's state.

Parameters (every list route; a value out of range is a 400 naming it):
* `limit` (1..MAX_LIMIT; a bounded default where the route has one) and `offset` (>= 0);
* `state`: job states, comma-separated, case-insensitive (`?state=running,failed`);
* `name`: a case-insensitive part of the job's name or id;
* `since`: epoch milliseconds: jobs changed at or after it (their last modification);
* `node`: jobs on (or last on) that peer.
Jobs come newest first (reverse submission order), so that the first page is the recent
work and walking a page costs what it returns, not what the cluster holds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional

from raft import state as S

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
JOB_FILTERS = ("state", "name", "since", "node")
JOB_STATES = (S.CREATED, S.INITIALIZING, S.RUNNING, S.RESTARTING, S.CANCELLING, S.CANCELED,
              S.FAILED, S.FINISHED)


@dataclass(frozen=True)
class PageQuery:
    limit: Optional[int] = None            # None: every match (Flink's complete overview)
    offset: int = 0
    states: Optional[frozenset[str]] = None
    name: Optional[str] = None             # lower case
    since_ms: Optional[int] = None
    node: Optional[str] = None

    @property
    def filtered(self) -> bool:
        return any(v is not None for v in (self.states, self.name, self.since_ms, self.node))


class BadQuery(ValueError):
    """A parameter out of range: the message names it."""


def _int(query: Mapping[str, str], key: str, lo: int, hi: Optional[int]) -> Optional[int]:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadQuery(f"{key} must be an integer, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise BadQuery(f"{key} must be {bounds}, got {value}")
    return value


def parse(query: Mapping[str, str], default_limit: Optional[int] = DEFAULT_LIMIT,
          jobs: bool = True) -> PageQuery:
    """The page a request asks for; BadQuery when a parameter is out of range."""
    limit = _int(query, "limit", 1, MAX_LIMIT)
    offset = _int(query, "offset", 0, None) or 0
    if not jobs:
        unknown = [k for k in JOB_FILTERS if query.get(k)]
        if unknown:
            raise BadQuery(f"{unknown[0]} filters jobs only, not this list")
        return PageQuery(limit if limit is not None else default_limit, offset)
    states = None
    if query.get("state"):
        states = frozenset(s.strip().upper() for s in query["state"].split(",") if s.strip())
        unknown = sorted(states - set(JOB_STATES))
        if unknown:
            raise BadQuery(f"state must be among {', '.join(JOB_STATES)}, got "
                           f"{', '.join(unknown)}")
    name = query.get("name") or None
    node = query.get("node") or None
    return PageQuery(limit if limit is not None else default_limit, offset, states,
                     name.lower() if name else None, _int(query, "since", 0, None), node)


def job_matches(q: PageQuery, job: Any, last_modified_ms: Callable[[Any], int]) -> bool:
    if q.states is not None and job.status not in q.states:
        return False
    if q.node is not None and (job.node or job.last_node) != q.node:
        return False
    if q.name is not None and q.name not in (job.name or "").lower() \
            and q.name not in job.id.lower():
        return False
    return q.since_ms is None or last_modified_ms(job) >= q.since_ms


def page_of(q: PageQuery, records: Iterable[Any], keep: Callable[[Any], bool],
            total_known: Optional[int] = None) -> tuple[list[Any], int]:
    """(the records of the page, how many match in all). Without filters `total_known`
    (the number of records) saves counting past the page."""
    out: list[Any] = []
    end = None if q.limit is None else q.offset + q.limit
    matched = 0
    for rec in records:
        if not keep(rec):
            continue
        if matched >= q.offset and (end is None or matched < end):
            out.append(rec)
        matched += 1
        if total_known is not None and end is not None and matched >= end:
            return out, total_known
    return out, matched


def envelope(q: PageQuery, key: str, rows: list, total: int) -> dict:
    """The answer: the rows under `key`, the total matching, and where the next page
    starts (None: this is the last)."""
    nxt = q.offset + len(rows)
    return {key: rows, "total": total, "offset": q.offset, "limit": q.limit,
            "next-offset": nxt if q.limit is not None and nxt < total else None}
