"""What the REST layer may ask of a peer, and the one error type it answers with.
`rest/` imports nothing else of ours: the peer's implementation is jm/cluster/gateway.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Protocol


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


ROOT = Credential("root", "admin", None)   # rest.auth.token
ANYONE = Credential("", "admin", None)     # no rest.auth.token: every caller is an admin


class SqlGatewayApi(Protocol):
    """The SQL gateway of a peer (Flink SQL Gateway's REST API, rest/sql.py). Methods on
    a session raise Forward when another peer holds it (`forwarded`: the request came
    from a peer already, so it is not forwarded again). Handles and statuses are
    strings (Flink's OperationStatus names)."""
    async def open_session(self, body: dict, who: Credential) -> str: ...
    def session_info(self, handle: str) -> SessionInfo: ...
    async def heartbeat(self, handle: str, forwarded: bool) -> None: ...
    async def close_session(self, handle: str) -> str: ...
    async def execute(self, handle: str, body: dict, forwarded: bool,
                      request_id: str = "") -> str: ...
    def status(self, handle: str, op_id: str, forwarded: bool) -> str: ...
    async def cancel(self, handle: str, op_id: str, forwarded: bool) -> str: ...
    async def close_operation(self, handle: str, op_id: str, forwarded: bool) -> str: ...
    async def fetch(self, handle: str, op_id: str, token: int, row_format: str,
                    forwarded: bool) -> ResultPage:
        """`row_format` (one of ROW_FORMATS) is checked before any wait; the rows are
        the same in either (rest/sql.py writes PLAIN_TEXT's)."""
        ...
    async def complete(self, handle: str, body: dict, forwarded: bool) -> list:
        """Flink's complete-statement: the candidates at body's position."""

    def move_wait(self) -> float:
        """How long a request for a session whose holder cannot be reached waits for the
        session to move (seconds)."""
        ...

    async def wait_moved(self, handle: str, holder_url: str, deadline: float) -> bool:
        """Until the session is held elsewhere than `holder_url` (True) or the loop's
        time reaches `deadline` (False)."""
        ...

    def proxy_read_timeout(self) -> float:
        """How long a request proxied to a session's holder may go without an answer."""
        ...

    async def catch_up(self) -> None:
        """Until this peer has applied everything committed before now."""
        ...




class Gateway(Protocol):
    """What the REST layer may ask of a peer."""
    async def credential(self, bearer: str) -> Optional[Credential]:
        """The credential a bearer (not the root one) is, or None; an exception with
        `bearer_refused` set and a text saying why for a JWT that is none (401)."""
    async def create_token(self, name: Any, role: Any, tenant: Any) -> dict: ...
    def list_tokens(self) -> list: ...
    async def revoke_token(self, name: str) -> None: ...
    async def submit_job(self, spec: Any, request_id: str, names: Optional[dict] = None,
                         who: Credential = ANYONE) -> dict:
        """`who`: the caller, whose tenant the job is (a spec's `tenant` another's: 403)."""
    async def cancel_job(self, job_id: str) -> str: ...
    async def trigger_savepoint(self, job_id: str, trigger_id: str, target: Optional[str],
                                stop: bool, who: Credential = ANYONE) -> dict:
        """`who`: the caller (a tenant's target-directory only where it was granted)."""
    async def drain_node(self, node: str, drain: bool, deadline: Optional[float] = None
                         ) -> dict: ...
    async def members(self) -> dict: ...
    async def beat(self, body: Any) -> dict: ...
    async def promote_peer(self, node: str) -> dict: ...
    async def prepare_voter(self, body: Any) -> dict: ...
    async def abandon_voter(self) -> dict: ...
    def identity(self) -> dict: ...
    def readiness(self) -> dict: ...
    async def livy_submit(self, body: Any, request_id: str, who: Credential) -> dict: ...
    async def livy_log(self, job_id: str, start: Optional[int], size: Optional[int]) -> dict: ...
    async def add_peer(self, peer: str) -> dict: ...
    async def remove_peer(self, node: str, deadline: Optional[float]) -> dict: ...
    async def rebalance(self) -> dict: ...
    async def job_logs(self, job_id: str, attempt: Optional[int], offset: int,
                       tail: Optional[int], local: bool) -> dict: ...
    async def add_artifact(self, filename: str, data: bytes, who: Credential) -> dict: ...
    def artifact_file(self, artifact_id: str) -> str | None: ...
    async def delete_artifact(self, artifact_id: str, who: Credential = ANYONE) -> dict: ...
    # views of the replicated state; None: no such job (or savepoint request, batch)
    def overview(self) -> dict: ...
    def job_detail(self, job_id: str) -> Optional[dict]: ...
    def job_exceptions(self, job_id: str) -> Optional[dict]: ...
    def job_result(self, job_id: str) -> Optional[dict]: ...
    def job_savepoints(self, job_id: str) -> Optional[dict]: ...
    def savepoint_status(self, job_id: str, request_id: str) -> Optional[dict]: ...
    def livy_version(self) -> dict: ...
    def livy_batches(self, start: int, size: int, who: Credential) -> dict: ...
    def livy_batch(self, number: int) -> Optional[tuple[str, dict]]: ...
    def list_page(self, name: str, query: Mapping[str, str], who: Credential) -> dict: ...
    async def jobs_overview(self, query: Mapping[str, str],
                            id_ok: Optional[Callable[[str], bool]], who: Credential
                            ) -> list[bytes]: ...
    # tenants (lists above show only what `who` may see)
    def visible(self, param: str, value: str, who: Credential) -> Optional[bool]:
        """Whether `who` may see the job, batch, session, pipeline or artifact a path
        parameter names (another tenant's: the same 404 as for none); None when this
        replica does not know it."""
    async def set_tenant(self, name: str, body: Any) -> dict: ...
    # named pipelines (jm/cluster/pipelines.py)
    async def put_pipeline(self, name: str, body: Any, who: Credential) -> tuple[int, dict]:
        """(status, answer): 201 created, 200 unchanged or upgraded, 202 upgrading."""
    def pipelines(self, who: Credential) -> dict: ...
    def pipeline(self, name: str) -> Optional[dict]: ...
    async def delete_pipeline(self, name: str) -> dict: ...
    def tenants(self, who: Credential) -> dict: ...
    def audit(self, entry: Mapping[str, Any]) -> None: ...
    async def audit_entries(self, query: Mapping[str, str]) -> dict: ...
    def health(self) -> dict: ...
    def applied_index(self) -> int: ...
    sql: SqlGatewayApi
    async def wait_applied(self, index: int, timeout: float) -> bool: ...
