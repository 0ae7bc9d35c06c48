"""What may come off the Raft wire: the pure decisions behind raft/transport.py.

pysyncobj frames each message as a 4-byte length, zlib, pickle (encrypted when
raft.password is set). Unpickling is code execution: a payload whose __reduce__ names
os.system runs it. Here every pickle that comes from another member (a message, a log
entry, a snapshot) is read by `RestrictedUnpickler`, whose find_class knows only the few
names pysyncobj's data really holds (found by reading pysyncobj and by recording what a
3-member cluster sends, membership changes and snapshot transfers included):

* a message: plain dicts, lists, tuples, str, bytes, ints, bools, None. Protocol 2 (what
  pysyncobj pickles with) spells bytes as `_codecs.encode(text, 'latin1')` and b'' as
  `bytes()`: both are answered by stand-ins that do only that.
* a log entry (a command): the same, plus pysyncobj.node.TCPNode (membership changes).
* a snapshot (raft.dump, also sent by a leader to a follower that fell behind): the same,
  plus set/frozenset and the classes of the replicated state's own modules.

Anything else is refused (WireError): the connection is dropped with a log line and the
member lives. Sizes are capped too: a frame longer than raft.max-message-size (or, before
a connection has said which member it is, HANDSHAKE_LIMIT) is refused before it is read,
and so is one whose zlib stream unpacks past the cap.
"""
from __future__ import annotations

import errno
import io
import pickle
import struct
import zlib
from typing import Any, Callable, Iterable, Optional

HANDSHAKE_LIMIT = 64 * 1024  # a member's first message: its address (or a 32-byte key)
SEND_PROTOCOL = 4  # bytes are opcodes (no globals); every peer of this version reads it
HEADER = struct.Struct("i")  # pysyncobj's frame header (native int, as it packs it)


class WireError(Exception):
    """A frame or message that is not let in; str() says why."""


# ---- the restricted unpickler ------------------------------------------------------------
def _latin1(text: Any, encoding: Any = "latin1", errors: Any = "strict") -> bytes:
    """`_codecs.encode` as protocol 2 uses it for bytes, and nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise WireError("_codecs.encode is allowed for bytes (latin1) only")
    return text.encode("latin1")


def _empty_bytes(*args: Any) -> bytes:
    """`bytes()` as protocol 2 writes b''; bytes(10**10) would take 10 GB."""
    if args:
        raise WireError("bytes() is allowed without arguments only")
    return b""


def _node_class(name: str) -> Any:
    from pysyncobj import node
    return getattr(node, name)


# (module, name) -> the object find_class gives (a callable: resolved lazily)
WIRE_NAMES: dict[tuple[str, str], Callable[[], Any]] = {
    ("_codecs", "encode"): lambda: _latin1,
    ("__builtin__", "bytes"): lambda: _empty_bytes,
    ("builtins", "bytes"): lambda: _empty_bytes,
}
COMMAND_NAMES = {**WIRE_NAMES,
                 ("pysyncobj.node", "TCPNode"): lambda: _node_class("TCPNode"),
                 ("pysyncobj.node", "Node"): lambda: _node_class("Node")}
SNAPSHOT_NAMES = {**COMMAND_NAMES,
                  ("__builtin__", "set"): lambda: set, ("builtins", "set"): lambda: set,
                  ("__builtin__", "frozenset"): lambda: frozenset,
                  ("builtins", "frozenset"): lambda: frozenset}
# the replicated state's modules: plain data classes whose construction does nothing else
STATE_MODULES = ("raft.state", "raft.records", "raft.commands", "raft.commands_sessions",
                 "raft.commands_admin", "raft.sessions", "raft.members", "raft.tenants",
                 "raft.pipelines")


def state_class(module: str, name: str) -> Any:
    """A class defined in one of STATE_MODULES (not a function, not an import of another
    module's; raft.commands re-exports the commands of raft/commands_*.py), or None."""
    if module not in STATE_MODULES or name.startswith("_"):
        return None
    import importlib
    obj = getattr(importlib.import_module(module), name, None)
    if isinstance(obj, type) and obj.__module__ in STATE_MODULES:
        return obj
    return None


class RestrictedUnpickler(pickle.Unpickler):
    """find_class answers only the names of `allowed` (and, for snapshots, the state's
    classes); persistent ids are refused (the base class does)."""

    def __init__(self, file: Any, allowed: dict, state_classes: bool = False) -> None:
        super().__init__(file)
        self.allowed = allowed
        self.state_classes = state_classes

    def find_class(self, module: str, name: str) -> Any:
        make = self.allowed.get((module, name))
        if make is not None:
            return make()
        if self.state_classes:
            cls = state_class(module, name)
            if cls is not None:
                return cls
        raise WireError(f"refused to unpickle {module}.{name}")


def loads(data: bytes, allowed: dict = WIRE_NAMES, state_classes: bool = False) -> Any:
    """Unpickle with RestrictedUnpickler; WireError for anything refused or malformed."""
    try:
        return RestrictedUnpickler(io.BytesIO(data), allowed, state_classes).load()
    except WireError:
        raise
    except Exception as exc:  # truncated or garbage pickles raise all kinds of errors
        raise WireError(f"not a valid pickle: {type(exc).__name__}: {exc}") from None


def load(file: Any, allowed: dict = SNAPSHOT_NAMES, state_classes: bool = True) -> Any:
    try:
        return RestrictedUnpickler(file, allowed, state_classes).load()
    except WireError:
        raise
    except Exception as exc:
        raise WireError(f"not a valid pickle: {type(exc).__name__}: {exc}") from None


# ---- frames --------------------------------------------------------------------------------
def frame_error(length: int, limit: int, member: bool = True) -> Optional[str]:
    """Why a frame announcing `length` bytes is not read (None: it may be). `member`:
    the connection has said which member it is (else HANDSHAKE_LIMIT applies)."""
    if length <= 0:
        return f"a frame of {length} bytes"
    if length > limit:
        which = ("raft.max-message-size" if member
                 else "before the connection has said which member it is")
        return f"a frame of {length} bytes exceeds the limit of {limit} ({which})"
    return None


def unpack(data: bytes, limit: int) -> Any:
    """A frame's payload (after decryption): zlib, then the restricted unpickler; the
    unpacked size is capped at `limit` as well (a small zlib stream can unpack to GBs)."""
    d = zlib.decompressobj()
    try:
        raw = d.decompress(data, limit + 1)
    except zlib.error as exc:
        raise WireError(f"not a zlib stream: {exc}") from None
    if len(raw) > limit or d.unconsumed_tail:
        raise WireError(f"a message unpacks past the limit of {limit} bytes "
                        "(raft.max-message-size)")
    if not d.eof:
        raise WireError("a truncated zlib stream")
    return loads(raw)


COMPRESS_FROM = 256 * 1024  # bytes of pickle from which a message is worth compressing


def pack(message: Any) -> bytes:
    """What pysyncobj's send makes of a message before encryption (protocol 4: bytes
    need no globals; pysyncobj's own readers of older peers read it too). Always a zlib
    stream (every reader decompresses), but only a large one (a snapshot, a long
    catch-up) is compressed: a Raft message of a few kb gains nothing on a LAN and
    compressing it was ~9% of a busy leader's CPU (level 0 stores it as it is)."""
    raw = pickle.dumps(message, SEND_PROTOCOL)
    return zlib.compress(raw, 1 if len(raw) >= COMPRESS_FROM else 0)


# ---- messages --------------------------------------------------------------------------------
MESSAGE_TYPES = frozenset({"request_vote", "response_vote", "append_entries", "apply_command",
                           "apply_command_response", "next_node_idx", "timeout_now",
                           "pre_vote", "pre_vote_response",  # (raft/prevote.py)
                           "leaving",  # (raft/leaving.py)
                           "relay"})  # (raft/relay.py)


def message_error(message: Any) -> Optional[str]:
    """Why a Raft message from a member is not passed to pysyncobj (None: it is)."""
    if not isinstance(message, dict):
        return f"a message that is a {type(message).__name__}, not a dict"
    kind = message.get("type")
    if kind not in MESSAGE_TYPES:
        return f"a message of unknown type {str(kind)[:40]!r}"
    return None


def handshake_error(message: Any, expects_key: bool, members: Iterable[str],
                    connects_to: Iterable[str] = ()) -> Optional[str]:
    """Why the first message(s) of an inbound connection are refused (None: let in). With a
    password the first is the other side's random key (bytes); then its member address.
    'readonly' is a non-voting member (jm/policy/members/voters.py): with a password only one
    that holds it gets this far. pysyncobj's utility commands (lists: add, remove,
    transfer, status, set_version) from anyone who connects are refused. Members connect one way only (the
    greater address to the smaller): a claim to be one of `connects_to`, the members this
    one opens connections to itself, cannot be that member's, and taking it would orphan
    the connection this member opened (pysyncobj then never opens it again)."""
    if expects_key:
        return None if isinstance(message, bytes) else "a handshake without the random key"
    if isinstance(message, list):
        return "a pysyncobj utility command (not used here)"
    if message == "readonly":
        return None
    if not isinstance(message, str) or message not in members:
        return f"an unknown member {str(message)[:80]!r}"
    if message in connects_to:
        return f"a claim to be member {message}, which this member connects to itself"
    return None


# ---- accept and admission ----------------------------------------------------------------
BACKOFF_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
AGAIN_ERRNOS = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})


def accept_error_action(code: Optional[int]) -> str:
    """What the listener does when accept() fails: 'again' (nothing waiting), 'backoff'
    (out of descriptors or memory: stop listening a moment, then go on) or 'skip' (that
    one connection failed, e.g. ECONNABORTED: go on). Never close the listener."""
    if code in AGAIN_ERRNOS:
        return "again"
    if code in BACKOFF_ERRNOS:
        return "backoff"
    return "skip"


def next_backoff(previous: float, first: float = 0.05, most: float = 1.0) -> float:
    return first if previous <= 0 else min(most, previous * 2)


def max_connections(setting: int, members: int) -> int:
    """raft.max-connections; 0: four per member, at least 16."""
    return setting if setting > 0 else max(16, 4 * members)


def admit(unidentified_ages: list[float], identified: int, cap: int) -> tuple[bool, int]:
    """A new inbound connection, with `identified` connections that said which member they
    are and unidentified ones of the given ages (seconds): (let it in, how many of the
    oldest unidentified to close first). At the cap, an unidentified connection makes
    room (oldest first: a member identifies itself within a round trip, a flood of idle
    connections does not); with none to close the new one is refused."""
    over = identified + len(unidentified_ages) + 1 - cap
    if over <= 0:
        return True, 0
    if over <= len(unidentified_ages):
        return True, over
    return False, 0
