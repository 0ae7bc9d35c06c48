"""Why an engine (a Spark Connect JVM) died and whose work killed it (pure, from the end of
its log): the one line every job and session on it is told, and which job's work ran it
out of memory, so that one is told so and, when it does it again, failed instead of
restarting its neighbours forever.

Two kinds of work can run an engine out of memory:

* a statement (an ExecutePlan of a Connect session): the sessions whose statement was
  running when the JVM logged its first OutOfMemoryError (the Connect server's INFO lines
  `ExecuteHolder ExecuteKey(user,session,operation) is created/removed`; a client's
  streaming listener is such a call too, but one that only waits: left out). A streaming
  job's session always has a call that waits (awaitTermination): it is named by its
  queries only;
* a streaming query's micro-batch, which is no statement: the tasks whose
  OutOfMemoryError the executor logged, each mapped to its query by the scheduler's
  `[queryId = <first 5 characters>] [batchId = N] Starting task ... (TID T)` line (the
  engine's log keeps those lines of TaskSetManager: jm/runtime/sparkjvm.py).

An engine's log holds every JVM it ran: RUN_MARK starts each one, and only the last run's
lines count (an old OutOfMemoryError blames nobody now).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

SPARK_OOM_EXIT = 52  # Spark's exit code for an uncaught OutOfMemoryError (SparkExitCode)
ENGINE_KILLS = 2  # a job whose work ran at that many engine deaths in a row: failed
RUN_MARK = "[jm] a new JVM of this engine starts"  # written before each start
QUERY_PREFIX = 5  # characters of a query id the scheduler's log lines carry
# bytes of the end of an engine's log read when it dies: what its work did before it ran
# out of memory comes before the errors of every query it stopped
DEATH_LOG = 4 << 20

_OOM = re.compile(r"java\.lang\.OutOfMemoryError[^\n]*")
_CREATED = re.compile(r"ExecuteHolder ExecuteKey\(([^,]*),([^,)]+),([^)]+)\) is created")
# a statement's end: its results sent (its holder may be removed much later: a client
# releases it when it gets round to it)
_ENDED = re.compile(r"ExecuteHolder ExecuteKey\([^,]*,[^,)]+,([^)]+)\) is removed"
                    r"|Stream finished for opId=([^,\s]+)")
# a client's listener of streaming events: an ExecutePlan that waits, running no work
_LISTENER = re.compile(r"\[operationId: ([^\]]+)\] Server side listener added")
_TASK = r"task \S+ in stage \S+ \(TID (\d+)\)"
_STARTED = re.compile(r"\[queryId = ([0-9a-f-]+)\] \[batchId = (\d+)\] Starting " + _TASK)
_TASK_ERROR = re.compile(r"(?:Exception in |task launch worker for )" + _TASK)
_LOST = re.compile(r"\[queryId = ([0-9a-f-]+)\] \[batchId = (\d+)\] Lost " + _TASK
                   + r".*OutOfMemoryError")


def this_run(log: str, generation: Optional[int] = None) -> str:
    """The part of an engine's log its last JVM wrote, or (`generation`) the JVM of that
    start (when its mark is before the log's end read: what comes before the first mark)."""
    if generation is None:
        at = log.rfind(RUN_MARK)
        return log if at < 0 else log[at:]
    at = log.find(f"{RUN_MARK} ({generation},")
    if at < 0:
        end = log.find(RUN_MARK)
        return log if end < 0 else log[:end]
    end = log.find(RUN_MARK, at + len(RUN_MARK))
    return log[at:] if end < 0 else log[at:end]


def run_mark(generation: int, when: str) -> str:
    """The line an engine's log gets before the JVM of its `generation`-th start."""
    return f"{RUN_MARK} ({generation}, {when})\n"


@dataclass(frozen=True)
class OomSuspects:
    """The work running when an engine ran out of memory: Connect sessions with a
    statement under way, and (query id prefix, micro-batch) of streaming queries whose
    task ran out of memory."""
    sessions: frozenset = frozenset()
    queries: frozenset = frozenset()

    def __bool__(self) -> bool:
        return bool(self.sessions or self.queries)

    def blame(self, session_id: Optional[str], query_ids: Iterable[str]) -> Optional[str]:
        """What a job with Connect session `session_id` and streaming queries `query_ids`
        is told it did (None: nothing of it is a suspect). A streaming job is named by its
        queries only: its session always has a call under way (awaitTermination, the
        listener's), which waits and runs no work."""
        queries = sorted(query_ids)
        for query in queries:
            for prefix, batch in sorted(self.queries):
                if query.startswith(prefix):
                    return (f"this job's streaming query {query} ran it out of memory in "
                            f"micro-batch {batch}")
        if session_id and session_id in self.sessions and not queries:
            return "this job's statement was running when it ran out of memory"
        return None

    def describe(self) -> str:
        parts = [f"statements of sessions {', '.join(sorted(self.sessions))}"
                 ] if self.sessions else []
        parts += [f"micro-batch {b} of query {q}..." for q, b in sorted(self.queries)]
        return " and ".join(parts)


def oom_suspects(log: str, at_end: bool = False, generation: Optional[int] = None
                 ) -> OomSuspects:
    """Whose work ran engine out of memory, from its log (see the module's doc): the
    sessions whose statement was running at the first OutOfMemoryError, and the queries
    whose tasks the executor says ran out of memory; with `at_end` (the kernel killed it
    over its memory limit: no such line), the sessions whose statement was running when
    the log ends. Of the JVM of `generation` (None: the last one)."""
    active: dict[str, str] = {}
    tasks: dict[str, tuple[str, int]] = {}
    queries: set[tuple[str, int]] = set()
    sessions: Optional[frozenset] = None
    failing: Optional[str] = None  # the task the previous line said failed
    for line in this_run(log, generation).splitlines():
        if "Starting task" in line:
            m = _STARTED.search(line)
            if m:
                tasks[m.group(3)] = (m.group(1)[:QUERY_PREFIX], int(m.group(2)))
            continue
        if sessions is None:
            m = _CREATED.search(line)
            if m:
                active[m.group(3)] = m.group(2).strip()
                continue
            m = _ENDED.search(line) or _LISTENER.search(line)
            if m:
                active.pop(m.group(1) or m.group(2), None)
                continue
        m = _TASK_ERROR.search(line)
        if "java.lang.OutOfMemoryError" in line:
            if sessions is None:
                sessions = frozenset(active.values())
            task = m.group(1) if m else failing
            if task in tasks:
                queries.add(tasks[task])
            lost = _LOST.search(line)
            if lost:
                queries.add((lost.group(1)[:QUERY_PREFIX], int(lost.group(2))))
        failing = m.group(1) if m else None
    if sessions is None:
        sessions = frozenset(active.values()) if at_end else frozenset()
    return OomSuspects(sessions, frozenset(queries))


def engine_death(name: str, code: Optional[int], log_tail: str, over_limit: int = 0) -> str:
    """Why the work on engine `name` was lost, in one line, from the JVM's exit code and
    the end of its log: an OutOfMemoryError is named as the JVM logged it; the kernel's
    kill of a JVM over its cgroup's `over_limit` bytes as that. No code: the JVM could not
    be started, and `log_tail` says why."""
    if code is None:
        return (f"EngineLost: the Spark engine {name} of this job could not start: "
                f"{log_tail.strip()[:300]}")
    oom = _OOM.findall(this_run(log_tail))
    what = f"exit code {code}"
    if over_limit:
        what = (f"killed by the kernel: over its tenant's engine memory of "
                f"{over_limit >> 20} MB")
    elif oom:
        what += f": {oom[-1].strip()[:300]}"
    elif code == SPARK_OOM_EXIT:
        what += ": out of memory"
    elif code < 0:
        what = f"killed by signal {-code}"
    return (f"EngineLost: the Spark engine {name} that ran this job died ({what}); every "
            "job and session on it lost its Spark session")


def ran_out_of_memory(name: str, log_tail: str, generation: Optional[int] = None) -> str:
    """What a job whose work ran engine `name` (the JVM of `generation`) out of memory is
    told, the JVM's error as it logged it."""
    oom = _OOM.findall(this_run(log_tail, generation))
    what = f" ({oom[0].strip()[:300]})" if oom else ""
    return f"EngineLost: the Spark engine {name} that ran this job ran out of memory{what}"


def engine_killer(kills: int) -> Optional[str]:
    """Why a job whose work was running at its engine's last `kills` deaths in a row is
    not restarted again (None: it is), so that it stops taking its neighbours down."""
    if kills < ENGINE_KILLS:
        return None
    return (f"its work (a statement or a streaming micro-batch) was running each of the last "
            f"{kills} times its Spark engine ran out of memory: it is what takes the engine "
            "down; fix its memory use (or give it an engine of its own: "
            "spark.connect.share-level job) and submit it again")
