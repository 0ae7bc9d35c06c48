"""A job's own Python requirements (pure): which sets are valid, one spelling and one key
per set, and which cached environments make room.

A job names pip requirement specifiers (its spec's `requirements`, `jm run --requirements
FILE`, Livy's `spark.jm.requirements`). The peer builds one environment per distinct set
and Python version (jm/cluster/jobs/envs.py), layered over its own: pyspark, py4j and this
project stay the peer's, so a set that names them is refused here. A set is normalised
(names canonical as pip compares them, each entry once, sorted) so that two jobs that
ask for the same thing in other words share one environment.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jm.policy.jobs.reqfile import RequirementsError

MAX_REQUIREMENTS = 200           # entries in one set
MAX_REQUIREMENT = 1000           # characters of one entry
# what stays the peer's: a job's environment layers over it (its runtime, its Spark client)
PEER_OWNED = frozenset({"pyspark", "py4j", "pyspark-connect", "pyspark-client",
                        "jm-cluster"})
URL_SCHEMES = ("https",)         # a requirement given as `name @ URL`


@dataclass(frozen=True)
class RequirementSet:
    requirements: tuple[str, ...]  # normalised, sorted, each once

    def key(self, python: str) -> str:
        """The environment's name: the set and the Python version (`3.11`) it is for."""
        text = "\n".join((f"python {python}",) + self.requirements)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def text(self) -> str:
        """As a requirements file pip reads."""
        return "".join(r + "\n" for r in self.requirements)


def _one(raw: Any, where: str) -> tuple[Optional[str], Optional[str]]:
    """(the normalised entry, None) or (None, what is wrong with it)."""
    if not isinstance(raw, str) or not raw.strip():
        return None, f"{where}: a requirement is a non-empty string, not {raw!r}"
    if len(raw) > MAX_REQUIREMENT:
        return None, f"{where}: longer than {MAX_REQUIREMENT} characters"
    try:
        req = Requirement(raw.strip())
    except InvalidRequirement as exc:
        return None, f"{where}: {raw.strip()!r} is not a pip requirement ({exc})"
    name = canonicalize_name(req.name)
    if name in PEER_OWNED:
        return None, (f"{where}: {req.name} is the peers' own (a job's environment layers "
                      f"over theirs and keeps their {name}); leave it out")
    if req.url is not None:
        scheme = urlsplit(req.url).scheme.lower()
        if scheme not in URL_SCHEMES:
            return None, (f"{where}: {req.name} @ {req.url}: only "
                          f"{', '.join(s + '://' for s in URL_SCHEMES)} URLs (no paths or "
                          f"{scheme or 'relative'} URLs: a peer's files are not a job's)")
    extras = f"[{','.join(sorted(canonicalize_name(e) for e in req.extras))}]" \
        if req.extras else ""
    spelled = f"{name}{extras} @ {req.url}" if req.url else \
        f"{name}{extras}{req.specifier}"
    if req.marker is not None:
        spelled += f"; {req.marker}"
    return spelled, None


def requirement_set(raw: Any, field: str = "requirements") -> RequirementSet:
    """The set a spec's `requirements` (a list of specifiers) names; RequirementsError
    naming each bad entry by its place."""
    if not isinstance(raw, (list, tuple)):
        raise RequirementsError([f"{field} must be a list of pip requirements "
                                 f"(\"name==1.2\", \"name>=1,<2\", \"name @ https://...\")"])
    if len(raw) > MAX_REQUIREMENTS:
        raise RequirementsError([f"{field}: at most {MAX_REQUIREMENTS} requirements, not "
                                 f"{len(raw)}"])
    out, errors = set(), []
    for i, entry in enumerate(raw):
        spelled, why = _one(entry, f"{field}[{i}]")
        if why:
            errors.append(why)
        else:
            out.add(spelled)
    if errors:
        raise RequirementsError(errors)
    return RequirementSet(tuple(sorted(out)))


# ---- the cache ------------------------------------------------------------------------
@dataclass(frozen=True)
class CachedEnv:
    key: str
    size: int         # bytes on disk
    last_used: float  # when a job last asked for it
    in_use: int       # jobs running with it now


def to_evict(envs: Iterable[CachedEnv], max_size: int) -> list[str]:
    """The environments to delete, least recently used first, until the rest fit in
    `max_size` bytes; one in use is never deleted (the cache may stay over its bound)."""
    envs = sorted(envs, key=lambda e: e.last_used)
    total = sum(e.size for e in envs)
    out = []
    for e in envs:
        if total <= max_size:
            break
        if e.in_use:
            continue
        out.append(e.key)
        total -= e.size
    return out
