"""The words the REST layer and the peer share: the one error type REST answers with (and
its kin: a request to forward to a session's holder, an unknown session), who a request
is (Credential), what a SQL session and a page of results are, and the headers peers
send each other. Standard library only: rest/ and jm/cluster/ both import it, neither
imports the other for it (rest/gateway.py holds the protocols REST asks of a peer)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Optional


INDEX_HEADER = "X-JM-Index"          # answers: the Raft index this peer has applied
MIN_INDEX_HEADER = "X-JM-Min-Index"  # requests: answer only once you have applied this
FORWARDED = "X-JM-Forwarded"  # a request a peer passed on to the peer that carries it out


class ApiError(Exception):
    def __init__(self, status: int, *errors: str, headers: dict | None = None) -> None:
        super().__init__("; ".join(errors))
        self.status = status
        self.errors = list(errors)
        self.headers = headers or {}


class Forward(Exception):
    """The request is for a SQL session another peer holds: proxy it to `url`."""
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class UnknownSession(ApiError):
    """404 for a SQL session handle this peer has no record of (yet: rest/sql.py looks
    again after `catch_up()`, since it may have been opened through another peer an
    instant ago)."""


ROW_FORMATS = ("JSON", "PLAIN_TEXT")  # a fetch's rowFormat


@dataclass(frozen=True)
class SessionInfo:
    """A SQL session as its replicated record has it."""
    properties: Mapping[str, str]
    name: str
    node: Optional[str]
    url: Optional[str]         # its holder's REST URL, None while it has none
    state_statements: int      # statements that define it, replayed where it opens
    moves: int


@dataclass(frozen=True)
class ResultPage:
    """What a fetch of an operation's result gives (rest/sql.py shapes it as Flink's
    FetchResultsResponseBody). `ready` False: the statement still runs, ask for `token`
    again; otherwise the page of `token`, the last one if `end`."""
    token: int
    ready: bool
    is_query: bool             # a statement that reads (Flink's isQueryResult)
    has_content: bool = True   # SUCCESS_WITH_CONTENT, or SUCCESS (no columns, no rows)
    columns: tuple = ()        # Flink column infos
    rows: tuple = ()           # each a list of the columns' JSON values
    end: bool = False


@dataclass(frozen=True)
class Credential:
    """Who a request is (rest/middleware.py puts it on the request as CALLER): a named
    credential (POST /tokens) or a JWT, the root credential (ROOT), or anybody when the
    cluster has no rest.auth.token (ANYONE). `tenant` None: every tenant."""
    name: str
    role: str
    tenant: Optional[str]

    @property
    def sees_all(self) -> bool:
        """An admin, or a credential of no one tenant, sees every tenant's work."""
        return self.role == "admin" or self.tenant is None

    def may_see(self, tenant: Optional[str]) -> bool:
        """Whether work of `tenant` (None: the default tenant) is this caller's."""
        return self.sees_all or tenant == self.tenant


# the roles of named credentials, lowest first: read < submit < admin (rest/roles.py says
# which each route needs; the Spark Connect endpoint needs submit)
READ, SUBMIT, ADMIN = "read", "submit", "admin"
RANK = {READ: 1, SUBMIT: 2, ADMIN: 3}

ROOT = Credential("root", "admin", None)   # rest.auth.token
ANYONE = Credential("", "admin", None)     # no rest.auth.token: every caller is an admin


class Named(Enum):
    """What a route's path parameter names (its value is the parameter's name): the
    objects a tenant's caller may see only when they are its tenant's."""
    JOB = "job_id"
    BATCH = "batch_id"              # a Livy batch, by number
    LIVY_SESSION = "session_id"     # a Livy session, by number
    SQL_SESSION = "sh"              # a SQL gateway session, by handle
    ARTIFACT = "artifact_id"
    PIPELINE = "pipeline"
