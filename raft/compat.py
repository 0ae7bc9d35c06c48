"""The pysyncobj this build was written against, checked when a peer starts.

raft/door.py overrides or reads private (name-mangled) members of pysyncobj's
classes: SyncObj's `__sendAppendEntries`, TcpServer's `__socket`, FileJournal's
`__journalFile`, ... A release that renames one of them would not fail loudly: an override
would simply never be called (a read-only member would get every entry again, a journal write would go
unsynced). So pyproject.toml pins the version exactly, and `check()` refuses to start a
peer on any other version, or on one whose classes lack a member we use.

`PRIVATES` lists them; tests/unit/test_compat.py checks that it names exactly the mangled
members raft/door.py mentions, and that no other module mentions one.
"""

from __future__ import annotations

import inspect
import re
from importlib import metadata

PYSYNCOBJ_VERSION = "0.3.17"

# (module, class) -> the private members we override or read, without the `_Class__`
PRIVATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("pysyncobj.syncobj", "SyncObj"): (
        "conf", "connectedNodes", "connectedToAnyone", "enabledCodeVersion",
        "generateRaftTimeout", "getCurrentLogIndex", "getCurrentLogTerm", "loadDumpFile",
        "onMessageReceived",
        "otherNodes", "pipeNotifier", "properies", "raftCommitIndex", "raftCurrentTerm",
        "raftElectionDeadline", "raftLog", "raftMatchIndex", "raftNextIndex", "raftState",
        "readonlyNodes", "selfNode", "sendAppendEntries", "serializer",
        "transferInProgress", "transport"),
    ("pysyncobj.tcp_connection", "TcpConnection"): (
        "processParseMessage", "processRead", "readBuffer", "socket", "trySendBuffer",
        "writeBuffer"),
    ("pysyncobj.tcp_server", "TcpServer"): (
        "connectionTimeout", "fileno", "keepalive", "onNewConnection",
        "onNewConnectionCallback", "poller", "recvBufferSize", "sendBufferSize", "socket"),
    ("pysyncobj.journal", "FileJournal"): ("currentOffset", "journalFile", "metaStorer"),
    ("pysyncobj.journal", "ResizableFile"): ("f", "mm"),
}


class Incompatible(RuntimeError):
    """The installed pysyncobj is not the one this build was written against."""


def missing_privates(privates: dict[tuple[str, str], tuple[str, ...]] = PRIVATES,
                     ) -> list[str]:
    """`Class.__member` for every listed member the installed classes do not have: a
    method or class attribute, or an instance attribute the class's code assigns."""
    missing = []
    for (module, cls_name), names in privates.items():
        try:
            cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
            source = inspect.getsource(cls)
        except (ImportError, AttributeError, OSError, TypeError):
            missing.extend(f"{cls_name}.__{name}" for name in names)
            continue
        for name in names:
            if hasattr(cls, f"_{cls_name}__{name}"):
                continue
            if not re.search(rf"self\.__{name}\s*=(?!=)", source):
                missing.append(f"{cls_name}.__{name}")
    return missing


def check(version: str | None = None) -> None:
    """Raise Incompatible naming what differs; `version` defaults to the installed one."""
    if version is None:
        try:
            version = metadata.version("pysyncobj")
        except metadata.PackageNotFoundError:
            version = "not installed"
    if version != PYSYNCOBJ_VERSION:
        raise Incompatible(f"pysyncobj {version} is installed; this build needs exactly "
                           f"{PYSYNCOBJ_VERSION} (it relies on its private members): "
                           f"reinstall the project")
    missing = missing_privates()
    if missing:
        raise Incompatible("the installed pysyncobj lacks members this build relies on: "
                           + ", ".join(missing) + ": reinstall the project")
