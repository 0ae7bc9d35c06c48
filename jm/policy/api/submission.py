"""A submission parsed, not validated (pure): `prepare_submission(raw, who, limits)` turns
what a client sent into a frozen JobSpec owned by its tenant, or a refusal listing every
problem with its HTTP status. The I/O a submission needs after that (remote files copied
into artifacts, a script, artifacts and a savepoint checked) is the resolver's
(jm/cluster/api/resolver.py), which hands on the spec it resolved."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional, Union

from jm.api import ApiError, Credential
from jm.policy.api.tenancy import tenant_for
from jm.policy.jobs.spec import SpecError, SpecLimits, proxy_refusal, remote_refs, validate_spec
from raft.jobspec import JobSpec


@dataclass(frozen=True)
class SubmitLimits:
    spec: SpecLimits                      # jobmanager.spec.max-*-size
    max_slots: int                        # the largest peer's slots
    proxy_users: tuple[str, ...]          # jobmanager.executor.proxy-users
    tenant_proxy_users: Callable[[Optional[str]], tuple]  # a tenant's (the state's)


@dataclass(frozen=True)
class Submission:
    spec: JobSpec
    remote: tuple[tuple[str, str], ...]  # (field, URI) of code to copy into artifacts


@dataclass(frozen=True)
class Refused:
    status: int  # 400, 403 (a tenant or proxy user not allowed), 413 (too large)
    errors: tuple[str, ...]


def prepare_submission(raw: Any, who: Credential, limits: SubmitLimits,
                       names: Optional[Mapping[str, str]] = None
                       ) -> Union[Submission, Refused]:
    """`raw` as a job of `who`'s tenant: its spec (defaults filled in, references in one
    spelling, a job id), or why not. `names`: what the client calls the fields (Livy's
    proxyUser), for its errors."""
    try:
        spec = validate_spec(raw, limits.max_slots, limits.spec)
        tenant = tenant_for(who, spec.pop("tenant", None))
    except SpecError as exc:
        return Refused(exc.status, tuple(exc.errors))
    except ApiError as exc:
        return Refused(exc.status, tuple(exc.errors))
    if tenant is not None:
        spec["tenant"] = tenant
    user = spec.get("proxy-user")
    if user:
        refusal = proxy_refusal(user, limits.proxy_users,
                                (names or {}).get("proxy-user", "proxy-user"),
                                tenant=tenant, tenant_users=limits.tenant_proxy_users(tenant))
        if refusal:
            return Refused(403, (refusal,))
    return Submission(JobSpec.from_wire(spec), tuple(remote_refs(spec)))


def with_artifact(spec: JobSpec, uri: str, ref: str) -> JobSpec:
    """`spec` naming the artifact `ref` where it named the remote file `uri`."""
    return replace(spec, script=ref if spec.script == uri else spec.script,
                   pyfiles=tuple(ref if p == uri else p for p in spec.pyfiles))
