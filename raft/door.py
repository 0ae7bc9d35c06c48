"""The one door to pysyncobj's private members (raft/compat.py pins 0.3.17 and checks at a
peer's start that every member named here exists).

pysyncobj keeps a node's Raft state in name-mangled attributes (`self.__raftCurrentTerm`
is `_SyncObj__raftCurrentTerm` from outside) and does its steps in name-mangled methods.
The raft package reads some of that state and replaces some of those steps; this module is
the only one that spells a mangled name (tests/unit/test_compat.py holds every other
module of jm, raft and rest to that):

* `HookedSyncObj`, `HookedServer`, `HookedConnection`, `HookedJournal`: pysyncobj's
  classes whose private steps call named methods, which a subclass overrides and which by
  default run pysyncobj's step (`on_message`, `send_entries`, `load_snapshot`;
  `on_accept`; `read_more`, `next_message`); and their private attributes by name.
* `NodeView`: a node's Raft state by name (term, election deadline, members, indices,
  sending a message): what the parts of raft/raftnode.py read and set, on the tick thread.
* `journal_of`, `transport_of`, `serializer_of`: a node's collaborators.

Why an adapter and not a vendored pysyncobj: docs/architecture.md ("One door to
pysyncobj").
"""
from __future__ import annotations

from typing import Any

from pysyncobj import journal as pj
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.syncobj import _RAFT_STATE, SyncObj
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.tcp_server import TcpServer


# ---- a node ---------------------------------------------------------------------------
def journal_of(node: Any) -> Any:
    """The node's log (pysyncobj's journal object), or None before it has one."""
    return getattr(node, "_SyncObj__raftLog", None)


def transport_of(node: Any) -> Any:
    return getattr(node, "_SyncObj__transport", None)


def serializer_of(node: Any) -> Any:
    return node._SyncObj__serializer


REPLICATED = frozenset({"_SyncObj__enabledCodeVersion"})  # replicated by pysyncobj on purpose


class _AllButReplicated(set):
    """Stands in for pysyncobj's set of the attribute names its snapshots leave out."""

    def __contains__(self, name: object) -> bool:
        return name not in REPLICATED


def replicate_only_code_version(node: SyncObj) -> None:
    """pysyncobj puts into its snapshots every attribute of the node added after its
    constructor ran, and sets them on the member that loads one (a part's state, a class
    the restricted unpickler does not know). After this call only pysyncobj's code
    version, which it replicates on purpose, travels."""
    node._SyncObj__properies = _AllButReplicated()


class HookedSyncObj(SyncObj):
    """pysyncobj's SyncObj with its private steps as named hooks."""

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        self.on_message(node, message)

    def on_message(self, node: Any, message: Any) -> None:
        """A message from another member (pysyncobj's handler by default)."""
        SyncObj._SyncObj__onMessageReceived(self, node, message)

    def _SyncObj__sendAppendEntries(self) -> None:
        self.send_entries()

    def send_entries(self) -> None:
        """A leader sends its append-entries to every member it should (pysyncobj's)."""
        SyncObj._SyncObj__sendAppendEntries(self)

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> Any:
        return self.load_snapshot(clearJournal)

    def load_snapshot(self, clear_journal: bool) -> Any:
        """Load the snapshot file (at start, or one a leader sent: `clear_journal`)."""
        return SyncObj._SyncObj__loadDumpFile(self, clear_journal)

    @property
    def dump_file(self) -> str:
        return self._SyncObj__conf.fullDumpFile

    def read_snapshot(self) -> Any:
        return self._SyncObj__serializer.deserialize()


class NodeView:
    """A node's Raft state by name, for the parts that steer it (tick thread only)."""

    def __init__(self, node: SyncObj) -> None:
        self._node = node

    @property
    def term(self) -> int:
        return self._node._SyncObj__raftCurrentTerm

    @property
    def is_leader(self) -> bool:
        return self._node._SyncObj__raftState == _RAFT_STATE.LEADER

    @property
    def election_deadline(self) -> float:
        return self._node._SyncObj__raftElectionDeadline

    @election_deadline.setter
    def election_deadline(self, when: float) -> None:
        self._node._SyncObj__raftElectionDeadline = when

    @property
    def others(self) -> set:
        """Every other member, voters and readers."""
        return self._node._SyncObj__otherNodes

    @property
    def readers(self) -> set:
        """The non-voting members (a leader's append-entries go to them too)."""
        return self._node._SyncObj__readonlyNodes

    @readers.setter
    def readers(self, nodes: set) -> None:
        self._node._SyncObj__readonlyNodes = nodes

    @property
    def connected(self) -> set:
        return self._node._SyncObj__connectedNodes

    def connected_to_anyone(self) -> bool:
        return self._node._SyncObj__connectedToAnyone()

    @property
    def transferring(self) -> bool:
        """A leadership transfer is in progress."""
        return bool(self._node._SyncObj__transferInProgress)

    @property
    def has_address(self) -> bool:
        """False for a read-only node (it has no address of its own, never campaigns)."""
        return self._node._SyncObj__selfNode is not None

    @property
    def min_timeout(self) -> float:
        return self._node._SyncObj__conf.raftMinTimeout

    @property
    def append_period(self) -> float:
        return self._node._SyncObj__conf.appendEntriesPeriod

    def last_entry(self) -> tuple[int, int]:
        """(term, index) of the last entry of the node's log."""
        return (self._node._SyncObj__getCurrentLogTerm(),
                self._node._SyncObj__getCurrentLogIndex())

    def new_timeout(self) -> float:
        """A new random election timeout (s)."""
        return self._node._SyncObj__generateRaftTimeout()

    def send(self, node: Any, message: Any) -> None:
        self._node._SyncObj__transport.send(node, message)

    def wake(self) -> None:
        """End the tick thread's wait in poll() now (any thread: pysyncobj's pipe)."""
        self._node._SyncObj__pipeNotifier.notify()

    @property
    def commit_index(self) -> int:
        return self._node._SyncObj__raftCommitIndex

    @property
    def applied(self) -> int:
        return self._node.raftLastApplied

    @property
    def next_index(self) -> dict:
        return self._node._SyncObj__raftNextIndex

    @property
    def match_index(self) -> dict:
        return self._node._SyncObj__raftMatchIndex

    @property
    def first_index(self) -> int:
        """The index of the first entry the log still holds (before it: the snapshot)."""
        return self._node._SyncObj__raftLog[0][1]


# ---- a connection and the listener ----------------------------------------------------
class HookedConnection(TcpConnection):
    """pysyncobj's connection with its read steps as named hooks."""

    def _TcpConnection__processRead(self) -> bool:
        return self.read_more()

    def read_more(self) -> bool:
        """Read what the socket has into the read buffer; False: the connection failed."""
        return TcpConnection._TcpConnection__processRead(self)

    def _TcpConnection__processParseMessage(self) -> Any:
        return self.next_message()

    def next_message(self) -> Any:
        """The next whole message of the read buffer, taken out of it; None: not yet."""
        return TcpConnection._TcpConnection__processParseMessage(self)

    @property
    def read_buffer(self) -> bytes:
        return self._TcpConnection__readBuffer

    @read_buffer.setter
    def read_buffer(self, data: bytes) -> None:
        self._TcpConnection__readBuffer = data

    @property
    def sock(self) -> Any:
        return self._TcpConnection__socket

    def write(self, data: bytes) -> None:
        """Queue `data` and send what the socket takes now."""
        self._TcpConnection__writeBuffer += data
        self._TcpConnection__trySendBuffer()


class HookedServer(TcpServer):
    """pysyncobj's listener with its accept step as a named hook."""

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        self.on_accept(descr, event)

    def on_accept(self, descr: int, event: int) -> None:
        TcpServer._TcpServer__onNewConnection(self, descr, event)

    @property
    def listening(self) -> Any:
        """The listening socket (None while unbound)."""
        return self._TcpServer__socket

    @listening.setter
    def listening(self, sock: Any) -> None:
        self._TcpServer__socket = sock

    def connection_options(self) -> dict:
        """What pysyncobj gives each connection it accepts."""
        return {"poller": self._TcpServer__poller,
                "timeout": self._TcpServer__connectionTimeout,
                "sendBufferSize": self._TcpServer__sendBufferSize,
                "recvBufferSize": self._TcpServer__recvBufferSize,
                "keepalive": self._TcpServer__keepalive}

    @property
    def buffer_sizes(self) -> tuple[int, int]:
        """(send, receive) socket buffer sizes."""
        return self._TcpServer__sendBufferSize, self._TcpServer__recvBufferSize

    def accepted(self, conn: Any) -> None:
        """Hand a connection accepted here to the transport."""
        self._TcpServer__onNewConnectionCallback(conn)

    def watch(self, on: bool) -> None:
        """Watch the listening socket for connections (again), or stop for a while."""
        fileno = self._TcpServer__fileno
        if fileno is None:
            return
        if on:
            self._TcpServer__poller.subscribe(fileno, self._TcpServer__onNewConnection,
                                              POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)
        else:
            self._TcpServer__poller.unsubscribe(fileno)


# ---- the journal file -----------------------------------------------------------------
class HookedJournal(pj.FileJournal):
    """pysyncobj's file journal with its file, mapping and end by name."""

    def use_meta_storer(self, storer: Any) -> None:
        """Store the term, vote and commit index with `storer` (a pj.MetaStorer)."""
        self._FileJournal__metaStorer = storer

    @property
    def end_offset(self) -> int:
        """Where the next entry goes in the file."""
        return self._FileJournal__currentOffset

    @property
    def fd(self) -> int:
        return self._FileJournal__journalFile._ResizableFile__f.fileno()

    @property
    def mapping(self) -> Any:
        """The file's mmap (len() is the mapping's size)."""
        return self._FileJournal__journalFile._ResizableFile__mm
