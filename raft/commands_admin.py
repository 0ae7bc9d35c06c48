"""The commands of who may do what and of named pipelines (re-exported by
raft/commands.py, which lists every command): named credentials (raft/tokens.py),
tenants' quotas (raft/tenants.py) and pipelines (raft/pipelines.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class CreateToken:
    """A named credential: `digest` is the SHA-256 (hex) of its secret."""
    name: str
    role: str
    tenant: Optional[str]
    digest: str
    time: float


@dataclass(frozen=True)
class RevokeToken:
    name: str
    time: float


@dataclass(frozen=True)
class PutPipeline:
    """Create, keep or upgrade the named pipeline (raft/pipelines.py); `job_id`: the id of
    the job a new version gets."""
    name: str
    spec: dict
    job_id: str
    time: float
    tenant: Optional[str] = None
    submitter: str = ""


@dataclass(frozen=True)
class DeletePipeline:
    name: str
    time: float


@dataclass(frozen=True)
class SetTenant:
    """A tenant's quotas (raft/tenants.py): None leaves one as it is, 0 is no limit; its
    OS user (None: as it is, "": none); memory (bytes) and CPU weight of each of its
    engines (None: as it is, 0: none)."""
    name: str
    slots: Optional[int]
    sessions: Optional[int]
    time: float
    os_user: Optional[str] = None  # (protocol 3)
    memory: Optional[int] = None   # (protocol 3)
    cpu: Optional[int] = None      # (protocol 3)
    # the OS users its jobs and Livy sessions may run as (their proxy user; None: as it
    # is, (): none) (protocol 5)
    proxy_users: Optional[tuple] = None
    # the directories (paths or URIs) its savepoints may be written to and restored from,
    # besides state.savepoints.dir (None: as it is, (): none) (protocol 6)
    savepoint_dirs: Optional[tuple] = None
