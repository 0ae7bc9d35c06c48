"""Protocol versions: what a cluster of peers of different builds may replicate (pure).

During a rolling upgrade some Raft members run an older build. An older replica decodes a
command it does not know as nothing (it refuses it) and a field it does not know as its
default (msgpack keeps the fields by name; raft/commands.py drops the unknown ones). So a
newer replica that applied them whole would hold another state than the older ones: a
tenant's quota the old replicas never saw, a job's tenant they do not know.

Each build has a protocol number (PROTOCOL). Every peer registers with the protocol it
speaks (`RegisterPeer.protocol`: its build's, or `cluster.protocol-version` when an
operator holds it back, as Kafka's `inter.broker.protocol.version`); the cluster's
protocol is the lowest of its registered peers' (`effective`). A replica applies each
command as a replica of that protocol would (`masked`): a command type newer than it is
refused, a newer field is reset to its default, in nested commands too. Every replica of
the cluster then holds the same state, old or new. A peer refuses to send what would be
cut (`refusal`: a tenant's job, a pipeline, a quota) with a clear error instead of
letting it lose its meaning; what only informs (a submitter's name, a streaming job's
progress) is cut silently.

Once every peer has registered with protocol N, a peer of an older protocol cannot
register any more (its replica would not understand the state): the protocol never
goes down. A dead peer of an older build holds the cluster's protocol back until it
comes back upgraded or is removed, as etcd's cluster version does.

The commands and fields of protocol 1 (the builds before protocol numbers) are pinned in
tests/unit/protocol1_commands.json; tests/unit/test_protocol.py fails for a command or a
field added without an entry here.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Optional

BASELINE = 1   # what a peer that names no protocol speaks (the builds before this module)
PROTOCOL = 8   # this build's
RELAY = 8      # from here a follower relays its submissions to the leader (raft/relay.py)

# command types newer than the baseline -> the protocol they came with
COMMANDS: dict[str, int] = {"SetTenant": 2, "PutPipeline": 2, "DeletePipeline": 2,
                            "OpenConnectSession": 7, "CloseConnectSessions": 7}


def _always(value: Any) -> bool:
    return True


def _no_tenant(value: Any) -> bool:
    return value in (None, "", DEFAULT_TENANT)


def _nobody(value: Any) -> bool:
    return value in (None, "")


def _nobody_of(value: Any) -> bool:
    return value is None


def _no_limit(value: Any) -> bool:
    return value in (None, 0)


def _default_tenants(value: Any) -> bool:
    return all(t == DEFAULT_TENANT for t in value or ())


DEFAULT_TENANT = "default"  # raft/tenants.py DEFAULT: work of no tenant
# fields newer than the baseline -> (protocol, whether a value may be cut below it: a
# sender refuses to send a command whose value would lose its meaning)
FIELDS: dict[tuple[str, str], tuple[int, Callable[[Any], bool]]] = {
    ("SubmitJob", "tenant"): (2, _no_tenant),
    ("SubmitJob", "submitter"): (2, _always),
    ("AddArtifact", "tenants"): (2, _default_tenants),
    ("AddArtifact", "submitter"): (2, _always),
    ("OpenSqlSession", "tenant"): (2, _no_tenant),
    ("OpenSqlSession", "submitter"): (2, _always),
    ("OpenLivySession", "tenant"): (2, _no_tenant),
    ("OpenLivySession", "submitter"): (2, _always),
    ("OpenLivySession", "proxy_user"): (2, _nobody),
    ("DrainPeer", "by_stop"): (2, _always),      # a stop's drain is kept as an operator's
    ("StatusReport", "progress"): (2, _always),
    ("SetTenant", "os_user"): (3, _nobody),    # a tenant's work as its own OS user
    ("SetTenant", "memory"): (3, _no_limit),   # its engines' memory and CPU
    ("SetTenant", "cpu"): (3, _no_limit),
    # the tenants whose OS user a peer's host lacks (placement avoids it for their jobs;
    # cut, a job may land there and fail its attempt with UserNotFound, as before)
    ("Heartbeat", "lacks"): (4, _always),
    # a tenant's DELETE of an artifact takes its own claim only (cut, it would forget
    # every tenant's: refused instead)
    ("ForgetArtifacts", "tenant"): (5, _nobody),
    # the proxy users a tenant's work may run as (cut, a tenant would have none: refused)
    ("SetTenant", "proxy_users"): (5, _nobody_of),
    # the savepoint directories granted a tenant (cut, it would have none: refused)
    ("SetTenant", "savepoint_dirs"): (6, _nobody_of),
}
# an encoded command without these fields was sent by an older build: what they mean
ABSENT: dict[tuple[str, str], Any] = {("RegisterPeer", "protocol"): BASELINE}
# fields every replica of any protocol may read: they say which protocol a peer speaks,
# or where its Spark Connect endpoint is (an older replica drops them, and needs nothing
# from them; a cluster's first registration comes before it has a protocol)
ANNOUNCED: frozenset = frozenset({("RegisterPeer", "protocol"),
                                  ("RegisterPeer", "connect_port")})

# keys of a job's spec (SubmitJob.spec, kept whole by every replica) that an older peer
# would not honour if it ran the job -> the protocol that honours them
SPEC_KEYS: dict[str, int] = {"proxy-user": 2, "requirements": 6}

FEATURES = {"SetTenant": "tenants' quotas", "PutPipeline": "named pipelines",
            "DeletePipeline": "named pipelines", "tenant": "tenants' work",
            "tenants": "tenants' artifacts", "proxy_user": "proxy users",
            "proxy-user": "proxy users", "os_user": "tenants' OS users",
            "memory": "tenants' engine memory", "cpu": "tenants' engine CPU",
            "proxy_users": "tenants' proxy users",
            "savepoint_dirs": "tenants' savepoint directories",
            "requirements": "jobs' Python requirements",
            "OpenConnectSession": "Spark Connect endpoint sessions",
            "CloseConnectSessions": "Spark Connect endpoint sessions"}


NEWEST = max([*COMMANDS.values(), *(rule[0] for rule in FIELDS.values()),
              *SPEC_KEYS.values()], default=BASELINE)  # at or above: nothing to mask


def effective(peer_protocols: Iterable[int]) -> int:
    """The cluster's protocol: the lowest of its registered peers' (BASELINE for none:
    the same on every replica, whatever its build)."""
    return min((p for p in peer_protocols), default=BASELINE)


def keeps(command: str, field: str, protocol: int) -> bool:
    """Whether a cluster at `protocol` keeps `field` of the command type `command`."""
    return FIELDS.get((command, field), (BASELINE,))[0] <= protocol


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def masked(command: Any, protocol: int) -> Optional[Any]:
    """`command` as a replica of `protocol` applies it: None when its type is newer (an
    older replica cannot decode it), or a command nested in it (in a tuple) is; its newer
    fields at their defaults, in nested commands too."""
    if protocol >= NEWEST:
        return command
    name = type(command).__name__
    if COMMANDS.get(name, BASELINE) > protocol:
        return None
    changes = {}
    for f in dataclasses.fields(command):
        value = getattr(command, f.name)
        since = FIELDS.get((name, f.name))
        if since is not None and since[0] > protocol:
            default = _default(f)
            if default is not dataclasses.MISSING and value != default:
                changes[f.name] = default
        elif isinstance(value, tuple) and any(dataclasses.is_dataclass(v) for v in value):
            inner = tuple(masked(v, protocol) if dataclasses.is_dataclass(v) else v
                          for v in value)
            if any(v is None for v in inner):
                return None
            if inner != value:
                changes[f.name] = inner
    return dataclasses.replace(command, **changes) if changes else command


def refusal(command: Any, protocol: int) -> Optional[str]:
    """Why a peer must not send `command` to a cluster at `protocol` (None: it may; what
    its newer fields hold is cut when it is applied, and loses nothing)."""
    if protocol >= NEWEST:
        return None
    name = type(command).__name__
    since = COMMANDS.get(name, BASELINE)
    if since > protocol:
        return _why(FEATURES.get(name, name), since, protocol)
    for f in dataclasses.fields(command):
        value = getattr(command, f.name)
        rule = FIELDS.get((name, f.name))
        if rule is not None and rule[0] > protocol and not rule[1](value):
            return _why(FEATURES.get(f.name, f"{name}.{f.name}"), rule[0], protocol)
        if isinstance(value, dict) and f.name == "spec":
            for key, needs in SPEC_KEYS.items():
                if needs > protocol and value.get(key) not in (None, ""):
                    return _why(FEATURES.get(key, key), needs, protocol)
        if isinstance(value, tuple):
            for v in value:
                why = refusal(v, protocol) if dataclasses.is_dataclass(v) else None
                if why is not None:
                    return why
    return None


def _why(feature: str, needs: int, protocol: int) -> str:
    return (f"{feature}: every peer must speak protocol {needs} or later; the cluster "
            f"runs protocol {protocol} (a peer of an older build, or one held back by "
            "cluster.protocol-version, is registered: upgrade it, or remove a dead one)")


def registration_refusal(peer_protocol: int, cluster_protocol: int) -> Optional[str]:
    """Why a peer speaking `peer_protocol` may not register: the protocol never goes
    down (the state may hold what an older replica cannot read)."""
    if peer_protocol >= cluster_protocol:
        return None
    return (f"this peer speaks protocol {peer_protocol} and the cluster runs protocol "
            f"{cluster_protocol}: start it with this cluster's build (or a newer one), "
            "without an older cluster.protocol-version")
