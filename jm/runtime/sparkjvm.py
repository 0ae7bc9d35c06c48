"""What every Spark JVM a peer starts needs (its engines, standalone masters and
workers, jobs' drivers): pyspark's home, the engine's Spark properties, log4j
configuration, the end of its log (their ports: jm.runtime.ports)."""
from __future__ import annotations

import importlib.util
import os
import re
import socket
from typing import Any, Optional


def spark_home() -> str:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed")
    return list(spec.submodule_search_locations)[0]


def log_tail(path: str, size: int = 1024 * 1024) -> str:
    """The last `size` bytes of a log as text ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def server_conf(master: str, conf: dict, cores: int, cpus: int = 0) -> dict:
    """The Connect server's Spark properties (pure): on a Spark cluster its application
    takes at most `cores` cores, so that the servers of several peers and the jobs' own
    applications all get some (a standalone application otherwise takes every core).
    Defaults for short statements come first; `spark.conf.*` (conf) overrides them."""
    out = dict(conf)
    if cores > 0 and not master.startswith("local"):
        out.setdefault("spark.cores.max", str(cores))
    for key, value in short_query_defaults(master, out, cpus or os.cpu_count() or 1).items():
        out.setdefault(key, value)
    return out


def short_query_defaults(master: str, conf: dict, cpus: int) -> dict:
    """Spark SQL settings for many short interactive statements (pure): adaptive execution
    (coalesces small shuffles at run time) and as many shuffle partitions as twice the
    cores the server has, when it knows them (Spark's 200 are meant for big jobs). A
    session's properties or a job's spark-conf override them."""
    out = {"spark.sql.adaptive.enabled": "true",
           "spark.sql.adaptive.coalescePartitions.enabled": "true"}
    slots = 0
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m:
        slots = cpus if m.group(1) == "*" else int(m.group(1) or 1)
    elif str(conf.get("spark.cores.max", "")).isdigit():
        slots = int(conf["spark.cores.max"])
    if slots > 0:
        out["spark.sql.shuffle.partitions"] = str(2 * slots)
    return out


def server_info(master: str, ui_url: str, apps: Any, executors: Any) -> Optional[dict]:
    """The server's application from its UI's REST answers (pure): its id, UI and how many
    executors it has (the driver is not one); None while it has no application."""
    if not isinstance(apps, list) or not apps or not isinstance(apps[0], dict):
        return None
    count = sum(1 for e in executors if isinstance(e, dict) and e.get("id") != "driver"
                ) if isinstance(executors, list) else 0
    return {"spark-app-id": str(apps[0].get("id")), "spark-ui": ui_url, "master": master,
            "executors": count, "shared": "the peer's Spark Connect server"}


def spark_conf_dir(log_dir: str, log_level: str,
                   info_logger: str = "org.apache.spark.sql.connect",
                   engine: bool = False) -> str:
    """A SPARK_CONF_DIR for the JVMs a peer starts (its Connect server, jobs' drivers):
    Spark's log at `spark.log.level`, on stderr, with `info_logger` at INFO. An `engine`'s
    (a Connect server's, in a folder of its own) also keeps the scheduler's lines that
    map a task to its streaming query and say it was lost (jm/policy/spark/enginedeath.py reads
    them when the engine runs out of memory), not its other INFO lines."""
    conf_dir = os.path.join(log_dir, "spark-engine-conf" if engine else "spark-conf")
    os.makedirs(conf_dir, exist_ok=True)
    path = os.path.join(conf_dir, "log4j2.properties")
    text = (f"rootLogger.level = {log_level.lower()}\n"
            "rootLogger.appenderRef.stdout.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
            f"logger.info.name = {info_logger}\n"
            "logger.info.level = info\n")
    if engine:
        # (a logger takes one filter: it drops each task's end and the start of a task of
        # no streaming query, the lines a busy engine would write most)
        text += ("logger.tasks.name = org.apache.spark.scheduler.TaskSetManager\n"
                 "logger.tasks.level = info\n"
                 "logger.tasks.filter.quiet.type = RegexFilter\n"
                 "logger.tasks.filter.quiet.regex = (?s)(?:.*Finished task |Starting task ).*\n"
                 "logger.tasks.filter.quiet.onMatch = DENY\n"
                 "logger.tasks.filter.quiet.onMismatch = NEUTRAL\n")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    # read by the JVMs of tenants' users (no secret in it): readable whatever the umask
    os.chmod(tmp, 0o644)
    os.chmod(conf_dir, 0o755)
    os.replace(tmp, path)
    return conf_dir
