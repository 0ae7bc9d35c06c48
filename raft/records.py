"""The records of the replicated state (peers, jobs, attempts, savepoints, artifacts),
the result of applying a command, and the constants they use (Flink's job states).
Plain data: ClusterState in raft/state.py holds them and changes them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from raft.jobspec import JobSpec

# Flink's job states
CREATED = "CREATED"
INITIALIZING = "INITIALIZING"
RUNNING = "RUNNING"
RESTARTING = "RESTARTING"
CANCELLING = "CANCELLING"
CANCELED = "CANCELED"
FAILED = "FAILED"
FINISHED = "FINISHED"

TERMINAL = frozenset({CANCELED, FAILED, FINISHED})
REPORTABLE = frozenset({INITIALIZING, RUNNING, RESTARTING, CANCELED, FAILED, FINISHED})

ALIVE = "ALIVE"
DEAD = "DEAD"

MAX_FAILURES_KEPT = 20
MAX_SAVEPOINTS_KEPT = 20       # requests kept per job (completed ones are evicted first)
MAX_PENDING_SAVEPOINTS = 10    # requests in progress per job; more are refused (409)
MAX_ATTEMPTS_KEPT = 20         # a job keeps its first attempt and its last 20
MAX_SAVEPOINT_TARGET = 4096    # characters of a savepoint's target directory (PATH_MAX)

# an ended job's record keeps what its list row and its page show (issue 27 item 4)
ENDED_FAILURES_KEPT = 5     # its last failures (failure_count keeps the number)
ENDED_ATTEMPTS_KEPT = 5     # its first attempt and its last ones
ENDED_TRACE_CHARS = 2048    # of each failure's traceback but the last: the end

STREAMING = "streaming"
BATCH = "batch"

# savepoint request states (Flink's async operation status)
IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"


@dataclass
class Result:
    ok: bool
    value: Any = None
    error: Optional[str] = None
    code: Optional[str] = None  # "exists", "not-found", "conflict", "stale", "invalid"

    @staticmethod
    def fail(code: str, error: str) -> "Result":
        return Result(False, None, error, code)


@dataclass
class PeerRecord:
    id: str
    host: str
    rest_port: int
    raft_port: int
    pid: int
    slots: int
    state: str = ALIVE
    registered_at: float = 0.0
    last_heartbeat: float = 0.0
    declared_dead_at: Optional[float] = None
    weight: float = 0.0     # 0: proportional to slots
    ready: bool = True      # its Spark is up
    draining: bool = False  # gets no new work; its jobs move away
    drain_deadline: Optional[float] = None  # s: then its batch jobs restart elsewhere
    drain_by_stop: bool = False  # its own stop's drain (DrainPeer.by_stop), not an operator's
    leaving: bool = False   # removed from the cluster once it holds no job
    # heartbeats and registrations applied so far: what a dead-declaration compares (a
    # count kept by the log itself; the senders' time stamps come from their own clocks)
    beats: int = 0
    disk_low: str = ""  # its last heartbeat's free-space warning (jobmanager.disk.min-free)
    lacks: tuple = ()   # tenants whose os-user its host lacks (its last heartbeat's)
    protocol: int = 1   # the protocol it registered with (raft/protocol.py; 1: BASELINE)
    connect_port: int = 0  # its Spark Connect endpoint's port (0: none)

    @property
    def share_weight(self) -> float:
        return self.weight if self.weight > 0 else float(self.slots)


@dataclass
class AttemptRecord:
    epoch: int
    node: str
    start: float
    end: Optional[float] = None
    reason: Optional[str] = None  # finished, failed, cancelled, stopped, peer-lost, moved
    spark: Optional[list] = None  # the attempt's Spark applications, one per restart
    # s its peer was heard from after the attempt started, when it ended with the peer's
    # loss (raft/state.py peer_losses); a class default: older snapshots load
    peer_heard: Optional[float] = None
    beats_at_start: int = -1  # its peer's heartbeat count when the attempt was placed
    reported: bool = False    # its peer reported on it


@dataclass(frozen=True)
class PeerLoss:
    """An attempt that ended with its peer's loss right after it started (raft/state.py
    peer_losses): the peer and when the loss was applied (the leader's clock)."""
    node: str
    end: float


@dataclass
class SavepointRecord:
    id: str
    stop: bool
    target: Optional[str]
    requested: float
    status: str = IN_PROGRESS
    location: Optional[str] = None
    failure: Optional[str] = None
    completed: Optional[float] = None


@dataclass
class JobRecord:
    id: str
    name: str
    spec: JobSpec  # (a wire form given is read into one: tests, older snapshots)
    submitted_at: float
    request_id: str = ""
    status: str = CREATED
    node: Optional[str] = None       # current owner (None while unassigned)
    last_node: Optional[str] = None  # where it ran last, kept after it ends
    epoch: int = 0
    restarts: int = 0
    timestamps: dict = field(default_factory=dict)  # status -> first time entered
    end_time: Optional[float] = None
    result: Any = None
    failures: list = field(default_factory=list)
    failure_count: int = 0
    attempts: list = field(default_factory=list)
    cancel_requested: bool = False
    move_to: Optional[str] = None        # a planned move in progress (target peer)
    moves: int = 0
    savepoints: dict = field(default_factory=dict)  # trigger id -> SavepointRecord
    stop_trigger: Optional[str] = None   # a stop-with-savepoint in progress
    savepoint_location: Optional[str] = None  # the last completed savepoint
    report_seq: int = 0  # the highest StatusReport.seq applied in this epoch
    number: int = 0      # 1, 2, ... in submission order (Livy's batch ids); 0: older jobs
    tenant: Optional[str] = None  # its tenant (None: the default tenant), issue 31
    submitter: str = ""           # the credential that submitted it ("" : no auth)
    # a streaming job's last progress, as its owner last committed it (at most every
    # jobmanager.streaming.progress-interval; jm/policy/jobs/progress.py, a few hundred bytes)
    progress: Optional[dict] = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, JobSpec):
            self.spec = JobSpec.from_wire(self.spec or {})

    def __getstate__(self) -> dict:
        """Pickled (a snapshot) with its spec's wire form: plain data for any build."""
        state = dict(self.__dict__)
        state["spec"] = self.spec.wire()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def slots(self) -> int:
        return self.spec.slots

    @property
    def streaming(self) -> bool:
        return self.spec.streaming

    def pending_savepoints(self) -> list:
        return [sp for sp in self.savepoints.values() if sp.status == IN_PROGRESS]


def compact_ended(job: JobRecord) -> None:
    """Shrink the record of a job that has just ended: a job that failed and restarted
    many times kept up to 20 failures with tracebacks of up to 16 KB each and 21
    attempts, held by every replica and every snapshot until it is forgotten. Kept: the
    last ENDED_FAILURES_KEPT failures (the last with its whole traceback, the others
    with its end), the first attempt and the last ENDED_ATTEMPTS_KEPT."""
    del job.failures[:-ENDED_FAILURES_KEPT]
    for failure in job.failures[:-1]:
        tb = failure.get("traceback")
        if isinstance(tb, str) and len(tb) > ENDED_TRACE_CHARS:
            failure["traceback"] = (f"[{len(tb) - ENDED_TRACE_CHARS} characters cut]\n"
                                    + tb[-ENDED_TRACE_CHARS:])
    if len(job.attempts) > ENDED_ATTEMPTS_KEPT + 1:
        del job.attempts[1:len(job.attempts) - ENDED_ATTEMPTS_KEPT]


@dataclass
class TokenRecord:
    """A named credential (raft/tokens.py): its role, tenant (None: every tenant) and the
    SHA-256 of its secret (the secret itself is shown once, to its creator)."""
    name: str
    role: str
    tenant: Optional[str]
    digest: str
    created: float


@dataclass
class ArtifactRecord:
    id: str
    name: str
    size: int
    nodes: list
    created: float
    # the tenants that uploaded it (raft/tenants.key: "default" for none), and the first
    # uploader; an artifact is content-addressed, so two tenants may upload the same one
    tenants: list = field(default_factory=list)
    submitter: str = ""


@dataclass
class SqlSessionRecord:
    """A SQL gateway session: which peer holds it (its Spark session lives in that
    peer's Connect server) and the statements that define its state, in order, so that
    another peer can rebuild it. `epoch` bumps at every move (statements from an older
    holder are stale)."""
    handle: str
    name: str
    properties: dict
    node: Optional[str]
    created: float
    epoch: int = 1
    statements: list = field(default_factory=list)
    moves: int = 0
    # the last operations started: op -> {"statement", "kind", "epoch", "node"}, and
    # "end" (FINISHED or ERROR) and "error" once they ended (raft/sessions.py)
    ops: dict = field(default_factory=dict)
    livy: Optional["LivyRecord"] = None  # an Apache Livy interactive session (raft/livy.py)
    tenant: Optional[str] = None  # its tenant (None: the default tenant)
    submitter: str = ""           # the credential that opened it


@dataclass
class ConnectSessionRecord:
    """A Spark Connect session of a peer's Connect endpoint (raft/connect.py): it lives in
    that peer's engine only, so it does not move; it ends with its peer."""
    session_id: str
    node: str
    created: float
    tenant: Optional[str] = None  # its tenant (None: the default tenant)
    submitter: str = ""           # the credential that opened it
    user_id: str = ""             # the client's user (Spark Connect's UserContext)


@dataclass
class LivyStatementRecord:
    """A statement of a Livy interactive session (Python code or SQL), numbered from 0 in
    its session. `state` is empty until it ended: "available" (its output says ok or
    error, as Livy's), "error" (it could not run) or "cancelled"."""
    id: int
    code: str
    kind: str
    started: float
    epoch: int
    request_id: str = ""
    state: str = ""
    output: Optional[dict] = None
    completed: float = 0.0


@dataclass
class LivyRecord:
    """What makes a SQL gateway session a Livy interactive session: its integer id, its
    kind (the default kind of its statements) and its statements, in order."""
    id: int
    kind: str
    statements: list = field(default_factory=list)
    next_statement: int = 0
    notes: list = field(default_factory=list)  # lines of the session's log (ignored fields)
    proxy_user: Optional[str] = None  # the OS user its Python process runs as
