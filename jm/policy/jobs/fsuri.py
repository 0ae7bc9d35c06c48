"""Where a savepoint goes or comes from, as Flink and Hadoop spell it (pure).

A location is either an absolute path on a file system every peer mounts (`/a/b`, or a
`file:` URI: `file:///a/b`, Hadoop's `file:/a/b`, `file://localhost/a/b`) or a URI of a
remote file system the peers reach through pyarrow.fs (jm/cluster/jobs/remotefs.py):
`s3://bucket/key` (also Hadoop's `s3a://` and `s3n://`), `gs://bucket/key` (`gcs://`) and
`hdfs://namenode:port/path` (`viewfs://`). `location()` turns what a user gave into the one
spelling the cluster stores: a plain path, or `<scheme>://<authority>/<path>` with the
scheme canonical (`s3a` -> `s3`), so that the same place is always the same string.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import urlsplit

# a scheme users write -> the scheme the cluster stores (jm/cluster/jobs/remotefs.py opens it)
REMOTE_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs",
                  "hdfs": "hdfs", "viewfs": "viewfs"}
MAX_LOCATION = 4096  # characters (raft/records.py MAX_SAVEPOINT_TARGET is the same)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3 and GCS bucket names


def location(raw: Any, field: str = "target-directory") -> str:
    """The canonical location of what a user wrote; ValueError (the message names the
    field) when it is not an absolute path or a URI of a file system the cluster knows."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"{field} must be an absolute path every peer can write, or a "
                         f"URI (s3://, gs://, hdfs://)")
    if len(raw) > MAX_LOCATION:
        raise ValueError(f"{field} must be at most {MAX_LOCATION} characters")
    if "\x00" in raw:
        raise ValueError(f"{field} must not hold a NUL character")
    if raw.startswith("/"):
        return _clean(raw)
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if not scheme or not _SCHEME.fullmatch(scheme) or not raw.lower().startswith(scheme + ":"):
        raise ValueError(f"{field} must be an absolute path every peer can write, or a "
                         f"URI (file://, s3://, gs://, hdfs://), not {raw!r}")
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"{field} {raw!r}: a file:// URI must name an absolute path "
                             f"on this host (file:///dir)")
        return _clean(parts.path)
    canonical = REMOTE_SCHEMES.get(scheme)
    if canonical is None:
        known = ", ".join(f"{s}://" for s in sorted(set(REMOTE_SCHEMES.values())))
        raise ValueError(f"{field} {raw!r}: the {scheme}:// scheme is not a file system "
                         f"this cluster writes; give an absolute path, a file:// URI or one "
                         f"of {known}")
    if parts.query or parts.fragment:
        raise ValueError(f"{field} {raw!r}: a URI here takes no query or fragment "
                         f"(file system options are peer settings, e.g. s3.endpoint)")
    authority = parts.netloc
    if "@" in authority:  # (pyarrow would connect as that user: hdfs://hdfs@namenode/)
        raise ValueError(f"{field} {raw!r}: a URI here names no user; the peers connect "
                         f"as themselves")
    try:
        parts.port  # (ValueError for a port that is not a number in 0..65535)
    except ValueError:
        raise ValueError(f"{field} {raw!r}: the port is not a number from 0 to 65535")
    if canonical in ("s3", "gs"):
        if not _BUCKET.fullmatch(authority or ""):
            raise ValueError(f"{field} {raw!r}: {scheme}:// needs a bucket name "
                             f"({scheme}://bucket/path)")
    elif not authority and not parts.path.startswith("/"):
        raise ValueError(f"{field} {raw!r}: {scheme}:// needs an absolute path")
    if ".." in parts.path.split("/"):
        raise ValueError(f"{field} {raw!r}: '..' is not allowed in a URI's path")
    path = _clean(parts.path or "/")
    return f"{canonical}://{authority}{'' if path == '/' else path}"


def _clean(path: str) -> str:
    out = posixpath.normpath(path)
    return "/" + out.lstrip("/") if out.startswith("//") else out


def is_remote_ref(ref: str) -> bool:
    """Whether a code reference as a user wrote it names a remote file system (s3://,
    gs://, hdfs://...; a job's script and pyfiles, `jm run`'s APP)."""
    return "://" in ref and ref.split("://", 1)[0].lower() in REMOTE_SCHEMES


def within(loc: str, roots) -> bool:
    """Whether canonical location `loc` is one of the canonical `roots` or below one."""
    for root in roots:
        root = root.rstrip("/")
        if loc == root or loc.startswith(root + "/"):
            return True
    return False


def is_remote(loc: str) -> bool:
    """Whether a canonical location is a remote file system's URI."""
    return "://" in loc and not loc.startswith("/")


def scheme_of(loc: str) -> str:
    return loc.split("://", 1)[0] if is_remote(loc) else "file"


def join(loc: str, *names: str) -> str:
    """A name under a location (a path or a URI alike)."""
    return "/".join([loc.rstrip("/"), *names]) if is_remote(loc) else posixpath.join(loc, *names)
