"""The environment a peer's children get: jobs (through the zygote), the Spark Connect
server (it runs users' SQL and Python UDFs) and the SQL worker. Pure.

A peer's own environment holds its secrets: in a container the configuration comes as
JM_CONF_* variables and JM_PROPERTIES (`rest.auth.token`, `cluster.secret`,
`s3.secret-key`), and cloud SDK credentials (AWS_*, GOOGLE_APPLICATION_CREDENTIALS,
AZURE_*) serve the peer's own savepoint and artifact storage. None of that is the jobs'
business, so children get an allow-list, as Nomad's tasks and Flink's containers do:
the names in DEFAULT_PASS (what Python, Java, Spark and Hadoop need to run) and the
names or glob patterns of `jobmanager.executor.env-pass` (e.g. `AWS_*` for a cluster
whose jobs are meant to use the peer's role). Never passed, whatever the patterns say:
NEVER (the peer's configuration).
"""
from __future__ import annotations

import fnmatch
from typing import Iterable, Mapping

DEFAULT_PASS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_*", "TZ",
    "TMPDIR", "PWD", "HOSTNAME",
    "PYTHON*", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "JAVA_HOME", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS",
    "SPARK_*", "PYSPARK_*", "PYARROW_*", "ARROW_*",
    "HADOOP_CONF_DIR", "HADOOP_HOME", "YARN_CONF_DIR", "HIVE_CONF_DIR",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)
NEVER = ("JM_CONF_*", "JM_PROPERTIES")


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def child_environ(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables of `environ` a child of the peer may see."""
    allowed = DEFAULT_PASS + tuple(extra)
    return {k: v for k, v in environ.items()
            if _matches(k, allowed) and not _matches(k, NEVER)}
