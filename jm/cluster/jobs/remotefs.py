"""Savepoints (and jobs' applications, copied into artifacts) on remote file systems,
through pyarrow.fs (pyarrow comes with pyspark[connect]; no other library is needed):
`s3://` (S3 and S3-compatible stores such as
MinIO or Ceph), `gs://` and `hdfs://` (needs a Hadoop client: libhdfs, a JVM and the Hadoop
jars on CLASSPATH, as for Flink).

Object stores have no rename, so a savepoint is complete when its `_metadata` object
exists (as in Flink): the checkpoint files are uploaded first, `_metadata` last; a copy cut
short leaves no `_metadata` and is removed as far as it can be. The S3 client takes
Flink's keys (`s3.endpoint`, `s3.access-key`, `s3.secret-key`, `s3.region`,
`s3.path.style.access`); without them the AWS defaults apply (environment variables such as
AWS_ACCESS_KEY_ID and AWS_ENDPOINT_URL, ~/.aws, instance roles). The GCS client takes
`gs.endpoint` and `gs.anonymous`; without them Google's endpoint and Application Default
Credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server).
"""
from __future__ import annotations

import os
import shutil
import threading
from typing import Any, Optional
from urllib.parse import urlsplit

from jm.policy.jobs.fsuri import join, scheme_of

CONNECT_TIMEOUT = 10.0   # seconds to reach the store
REQUEST_TIMEOUT = 60.0   # seconds a request may take
_cache: dict[tuple, Any] = {}
_lock = threading.Lock()


class RemoteError(Exception):
    """The remote file system cannot be reached or refused an operation (one line)."""


def options(conf: Any) -> dict:
    """The file system settings of a peer's configuration (hashable values only)."""
    keys = ("s3.endpoint", "s3.access-key", "s3.secret-key", "s3.region",
            "s3.path.style.access", "gs.endpoint", "gs.anonymous")
    return {k: conf[k] for k in keys if conf[k] is not None}


def _short(exc: BaseException) -> str:
    """An exception as one readable line (libhdfs's tries of every JVM path are long)."""
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else text or type(exc).__name__


def _endpoint(endpoint: Optional[str]) -> dict:
    """pyarrow's endpoint_override and scheme for an endpoint setting (https if bare)."""
    if not endpoint:
        return {}
    parts = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
    return {"endpoint_override": parts.netloc, "scheme": parts.scheme or "https"}


def _s3(opts: dict) -> Any:
    from pyarrow import fs as pafs
    kw: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT,
                          "request_timeout": REQUEST_TIMEOUT, **_endpoint(opts.get("s3.endpoint"))}
    if opts.get("s3.path.style.access") is False:  # else pyarrow: path style with an endpoint
        kw["force_virtual_addressing"] = True
    if opts.get("s3.access-key"):
        kw["access_key"] = opts["s3.access-key"]
        kw["secret_key"] = opts.get("s3.secret-key") or ""
    if opts.get("s3.region"):
        kw["region"] = opts["s3.region"]
    return pafs.S3FileSystem(**kw)


def _gcs(opts: dict) -> Any:
    from datetime import timedelta
    from pyarrow import fs as pafs
    kw: dict[str, Any] = {"retry_time_limit": timedelta(seconds=REQUEST_TIMEOUT),
                          **_endpoint(opts.get("gs.endpoint"))}
    if opts.get("gs.anonymous"):
        kw["anonymous"] = True
    return pafs.GcsFileSystem(**kw)


def hadoop_missing(env: Any) -> Optional[str]:
    """What a peer lacks to open hdfs:// (None: it looks like a Hadoop client is there)."""
    if env.get("HADOOP_HOME") or "hadoop" in env.get("CLASSPATH", "").lower():
        return None
    return ("no Hadoop client (every peer needs libhdfs, JAVA_HOME, and HADOOP_HOME or the "
            "Hadoop jars on CLASSPATH)")


def filesystem(loc: str, opts: dict) -> tuple[Any, str]:
    """(pyarrow FileSystem, the path on it) of a canonical remote location."""
    scheme = scheme_of(loc)
    parts = urlsplit(loc)
    key = (scheme, parts.netloc if scheme in ("hdfs", "viewfs") else "",
           tuple(sorted(opts.items())))
    with _lock:
        fs = _cache.get(key)
    try:
        if fs is None:
            if scheme == "s3":
                fs = _s3(opts)
            elif scheme == "gs":
                fs = _gcs(opts)
            elif scheme in ("hdfs", "viewfs"):
                missing = hadoop_missing(os.environ)
                if missing:  # without it libhdfs would start a JVM in the peer to fail
                    raise RemoteError(f"{scheme}:// cannot be opened on this peer: {missing}")
                from pyarrow import fs as pafs
                fs, _ = pafs.FileSystem.from_uri(f"{scheme}://{parts.netloc}/")
            else:
                raise RemoteError(f"{scheme}:// is not a file system this cluster writes")
            with _lock:
                _cache[key] = fs
    except RemoteError:
        raise
    except Exception as exc:  # ImportError, ArrowInvalid, OSError (no libhdfs / JVM)
        raise RemoteError(f"{scheme}:// cannot be opened on this peer: {_short(exc)}")
    if scheme in ("s3", "gs"):
        return fs, (parts.netloc + parts.path).rstrip("/")
    return fs, parts.path.rstrip("/") or "/"


def problem(loc: str, opts: dict) -> Optional[str]:
    """Why this peer cannot write savepoints to a remote location (None: it can, as far as
    it can tell without writing: a missing bucket or bad credentials fail the savepoint
    itself, with the store's reason)."""
    try:
        filesystem(loc, opts)
    except RemoteError as exc:
        hint = ""
        if scheme_of(loc) in ("hdfs", "viewfs") and "Hadoop client" not in str(exc):
            hint = (" (hdfs:// needs a Hadoop client on every peer: libhdfs, JAVA_HOME and "
                    "the Hadoop jars on CLASSPATH)")
        return f"{exc}{hint}"
    return None


def _missing(fs: Any, path: str) -> bool:
    from pyarrow import fs as pafs
    return fs.get_file_info(path).type == pafs.FileType.NotFound


def read_text(loc: str, opts: dict, limit: Optional[int] = None) -> Optional[str]:
    """The text of a remote file; None if it does not exist; TooLarge beyond `limit`
    bytes (read no further)."""
    fs, path = filesystem(loc, opts)
    try:
        if _missing(fs, path):
            return None
        with fs.open_input_stream(path) as f:
            data = f.read() if limit is None else f.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise TooLarge(f"{loc} is more than {limit} bytes")
        return data.decode("utf-8")
    except (OSError, ValueError) as exc:
        raise RemoteError(f"cannot read {loc}: {_short(exc)}")


class TooLarge(RemoteError):
    """A remote file is larger than the caller takes."""


def read_bytes(loc: str, opts: dict, limit: int) -> bytes:
    """The contents of a remote file of at most `limit` bytes (a job's application or
    py-file); RemoteError if it is missing or cannot be read, TooLarge beyond `limit`."""
    from pyarrow import fs as pafs
    fs, path = filesystem(loc, opts)
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise RemoteError(f"{loc} does not exist")
        if info.type != pafs.FileType.File:
            raise RemoteError(f"{loc} is not a file")
        if info.size is not None and info.size > limit:
            raise TooLarge(f"{loc} is {info.size} bytes, more than the {limit} an artifact "
                           f"may have (rest.max-body-size)")
        with fs.open_input_stream(path) as f:
            data = f.read(limit + 1)
    except RemoteError:
        raise
    except (OSError, ValueError) as exc:
        raise RemoteError(f"cannot read {loc}: {_short(exc)}")
    if len(data) > limit:
        raise TooLarge(f"{loc} is more than the {limit} bytes an artifact may have "
                       f"(rest.max-body-size)")
    return data


def put_savepoint(local_dir: str, loc: str, opts: dict, metadata: str) -> None:
    """Upload a savepoint staged in `local_dir` (its `checkpoint/` tree) to `loc`, then
    `_metadata` (whose text is `metadata`) last: the savepoint is complete once that
    exists. On failure what was uploaded is removed as far as possible."""
    from pyarrow import fs as pafs
    fs, path = filesystem(loc, opts)
    try:
        if not _missing(fs, path + "/_metadata"):
            raise RemoteError(f"savepoint location {loc} already exists")
        source = os.path.join(local_dir, "checkpoint")
        if any(files for _, _, files in os.walk(source)):
            pafs.copy_files(source, path + "/checkpoint",
                            destination_filesystem=fs, use_threads=True)
        with fs.open_output_stream(path + "/_metadata") as f:
            f.write(metadata.encode("utf-8"))
    except RemoteError:
        raise
    except (OSError, ValueError) as exc:
        try:
            fs.delete_dir(path)
        except Exception:
            pass
        raise RemoteError(f"could not write savepoint {loc}: {_short(exc)}")


def get_checkpoint(loc: str, dest: str, opts: dict) -> None:
    """Download a savepoint's `checkpoint/` tree into the new local directory `dest` (a
    savepoint of an empty checkpoint has no objects under it)."""
    from pyarrow import fs as pafs
    fs, path = filesystem(join(loc, "checkpoint"), opts)
    try:
        if _missing(fs, path):
            os.makedirs(dest)
            return
        pafs.copy_files(path, dest, source_filesystem=fs, use_threads=True)
        os.makedirs(dest, exist_ok=True)
    except (OSError, ValueError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise RemoteError(f"could not read savepoint {loc}: {_short(exc)}")

