"""Configuration: Flink-style keys in conf/config.yaml, `-D key=value` overrides,
and conf/masters (one `host:rest-port:raft-port` per line).

Every key is declared here with its type and default; a bad or unknown key stops
start-up with one line naming the key and what is wrong (ConfigError).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

import yaml


class ConfigError(Exception):
    """A bad or missing setting; str() is one line naming the key."""


_DURATION_UNITS = {
    "ms": 0.001, "milli": 0.001, "millis": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "m": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_MEMORY_UNITS = {
    "b": 1, "bytes": 1, "k": 1024, "kb": 1024, "kibibytes": 1024, "m": 1024 ** 2,
    "mb": 1024 ** 2, "mebibytes": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3,
    "gibibytes": 1024 ** 3,
}
_NUM_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(value: Any) -> float:
    """Flink durations: '500 ms', '1 s', '2 min'; a bare number means milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like '500 ms' or '2 s'")
    if isinstance(value, (int, float)):
        if not 0 <= value < float("inf"):
            raise ValueError(f"{value!r} is not a non-negative duration")
        return float(value) / 1000.0
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a duration (use e.g. '500 ms', '2 s', '1 min')")
    number, unit = float(m.group(1)), m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {value!r}")
    return number * _DURATION_UNITS[unit]


def parse_memory(value: Any) -> int:
    """Flink memory sizes: '100 mb', '64kb'; a bare number means bytes."""
    if isinstance(value, bool):
        raise ValueError("expected a size like '100 mb'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is not a non-negative size")
        return value
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a size (use e.g. '100 mb')")
    unit = m.group(2).lower() or "b"
    if unit not in _MEMORY_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {value!r}")
    return int(float(m.group(1)) * _MEMORY_UNITS[unit])


def _int(min_value: int) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f"expected an integer, got {v!r}")
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}")
        if n < min_value:
            raise ValueError(f"must be at least {min_value}, got {n}")
        return n
    return parse


def _float(min_value: float) -> Callable[[Any], float]:
    def parse(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError(f"expected a number, got {v!r}")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {v!r}")
        if x < min_value:
            raise ValueError(f"must be at least {min_value}, got {x}")
        return x
    return parse


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "yes", "1", "on"):
        return True
    if s in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _str(v: Any) -> str:
    if v is None or isinstance(v, (dict, list)):
        raise ValueError(f"expected a text value, got {v!r}")
    return str(v)


def _opt_str(v: Any) -> Optional[str]:
    return None if v in (None, "") else _str(v)


RESTART_TYPES = {
    "none": "none", "off": "none", "disable": "none", "no-restart": "none",
    "fixed-delay": "fixed-delay", "fixeddelay": "fixed-delay",
    "exponential-delay": "exponential-delay", "exponentialdelay": "exponential-delay",
    "failure-rate": "failure-rate", "failurerate": "failure-rate",
}


def _restart_type(v: Any) -> str:
    s = _str(v).strip().lower()
    if s not in RESTART_TYPES:
        raise ValueError(f"unknown restart strategy {v!r} (use none, fixed-delay, "
                         "exponential-delay or failure-rate)")
    return RESTART_TYPES[s]


def _choice(*options: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = _str(v).strip().lower()
        if s not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {v!r}")
        return s
    return parse


def _log_level(v: Any) -> str:
    s = _str(v).upper()
    if s not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError(f"expected DEBUG, INFO, WARNING or ERROR, got {v!r}")
    return s


# key -> (parser, default)
KEYS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "rest.bind-address": (_opt_str, None),  # default: the peer's host in conf/masters
    "rest.max-body-size": (parse_memory, "100 mb"),
    "rest.write-timeout": (parse_duration, "5 s"),
    "jobmanager.slots": (_int(1), 8),
    "jobmanager.data-dir": (_str, "data"),
    "jobmanager.lease-timeout": (parse_duration, "2 s"),
    "jobmanager.cancel-timeout": (parse_duration, "3 s"),
    "jobmanager.result.max-size": (parse_memory, "256 kb"),
    "jobmanager.log.level": (_log_level, "INFO"),
    "jobmanager.log.format": (_choice("text", "json"), "text"),
    "jobmanager.executor.preload": (_choice("pyspark", "none"), "pyspark"),
    "jobmanager.placement": (_choice("spread", "pack", "leader-only"), "spread"),
    "jobmanager.executor.nice": (_int(0), 10),
    "jobmanager.weight": (_float(0.0), 0.0),  # 0: proportional to jobmanager.slots
    "high-availability.storageDir": (_str, "data/ha"),
    "state.savepoints.dir": (_opt_str, None),  # default: <high-availability.storageDir>/savepoints
    "rebalance.strategy": (_choice("none", "on-join", "continuous"), "on-join"),
    "rebalance.interval": (parse_duration, "10 s"),
    "rebalance.max-moves-per-round": (_int(1), 2),
    "rebalance.threshold": (_float(0.0), 1.0),
    "jobstore.expiration-time": (parse_duration, "1 h"),
    "jobstore.max-capacity": (_int(0), 10000),
    "heartbeat.interval": (parse_duration, "500 ms"),
    "heartbeat.timeout": (parse_duration, "3 s"),
    "restart-strategy.type": (_restart_type, "fixed-delay"),
    "restart-strategy.fixed-delay.attempts": (_int(0), 3),
    "restart-strategy.fixed-delay.delay": (parse_duration, "1 s"),
    "restart-strategy.exponential-delay.initial-backoff": (parse_duration, "1 s"),
    "restart-strategy.exponential-delay.max-backoff": (parse_duration, "1 min"),
    "restart-strategy.exponential-delay.backoff-multiplier": (_float(1.0), 1.5),
    "restart-strategy.exponential-delay.reset-backoff-threshold": (parse_duration, "1 h"),
    "restart-strategy.exponential-delay.jitter-factor": (_float(0.0), 0.1),
    "restart-strategy.exponential-delay.attempts-before-reset-backoff": (_int(1), 2 ** 31 - 1),
    "restart-strategy.failure-rate.max-failures-per-interval": (_int(1), 1),
    "restart-strategy.failure-rate.failure-rate-interval": (parse_duration, "1 min"),
    "restart-strategy.failure-rate.delay": (parse_duration, "1 s"),
    "env.pid.dir": (_str, "/tmp"),
    "env.log.dir": (_str, "log"),
    "env.ssh.opts": (_str, ""),  # options bin/cluster.sh gives ssh for remote peers
    "spark.master": (_str, "local[*]"),
    "spark.remote": (_opt_str, None),
    "spark.connect.embedded": (_bool, True),
    "spark.connect.port": (_int(0), 0),
    # cores the peer's Connect server takes from a Spark cluster (its application's
    # spark.cores.max; 0: no limit); with local[...] masters it does not apply
    "spark.connect.cores": (_int(0), 1),
    "spark.connect.startup-timeout": (parse_duration, "180 s"),
    "spark.driver.memory": (_str, "1g"),
    "spark.log.level": (_str, "WARN"),
    # a classic job's application with no executor for this long says so (GET /jobs/{id})
    "spark.executor-wait-warning": (parse_duration, "30 s"),
    "sql.max-result-rows": (_int(0), 1000),
    # the SQL gateway (Flink SQL Gateway REST API on every peer)
    "sql-gateway.session.idle-timeout": (parse_duration, "10 min"),
    "sql-gateway.max-sessions": (_int(0), 200),      # per peer; 0: no limit
    "sql-gateway.worker-threads": (_int(1), 16),    # statements run at once per peer
    "sql-gateway.page-rows": (_int(1), 1000),       # rows per result page
    "sql-gateway.fetch-wait": (parse_duration, "1 s"),  # a fetch waits this long for rows
    "raft.min-timeout": (parse_duration, "400 ms"),
    "raft.max-timeout": (parse_duration, "1000 ms"),
    "raft.append-entries-period": (parse_duration, "50 ms"),
    "raft.leader-fallback-timeout": (parse_duration, "1400 ms"),
    "raft.connection-retry-time": (parse_duration, "500 ms"),
    "raft.use-batch": (_bool, False),
    "raft.fsync": (_bool, True),  # an acknowledged write is on disk on a majority
    "raft.password": (_opt_str, None),  # default: cluster.secret
    "rest.auth.token": (_opt_str, None),
    "rest.auth.token-file": (_opt_str, None),
    "cluster.secret": (_opt_str, None),
}
PASS_THROUGH_PREFIXES = ("spark.conf.",)


@dataclass(frozen=True)
class PeerAddress:
    host: str
    rest_port: int
    raft_port: int

    @property
    def node_id(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def raft_addr(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    def __str__(self) -> str:
        return f"{self.host}:{self.rest_port}:{self.raft_port}"


def parse_peer(text: str, where: str = "masters") -> PeerAddress:
    parts = text.strip().split(":")
    if len(parts) != 3 or not parts[0]:
        raise ConfigError(f"{where}: {text.strip()!r} is not host:rest-port:raft-port")
    try:
        rest, raft = int(parts[1]), int(parts[2])
    except ValueError:
        raise ConfigError(f"{where}: {text.strip()!r} has a port that is not a number")
    for p in (rest, raft):
        if not 0 < p < 65536:
            raise ConfigError(f"{where}: port {p} in {text.strip()!r} is out of range")
    if rest == raft:
        raise ConfigError(f"{where}: {text.strip()!r} uses one port for REST and Raft")
    return PeerAddress(parts[0], rest, raft)


def read_masters(path: str) -> list[PeerAddress]:
    if not os.path.exists(path):
        raise ConfigError(f"masters: file {path} is missing")
    peers = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                peers.append(parse_peer(line, f"masters ({path})"))
    if not peers:
        raise ConfigError(f"masters: {path} lists no peer")
    seen = set()
    for p in peers:
        for port in (p.rest_port, p.raft_port):
            if (p.host, port) in seen:
                raise ConfigError(f"masters: port {p.host}:{port} is used twice")
            seen.add((p.host, port))
    return peers


def choose_self(masters: list[PeerAddress], wanted: Optional[str]) -> PeerAddress:
    """The peer given with --peer (a line of masters, or a member added online that joins
    through them), else the first local line of masters."""
    if wanted:
        me = parse_peer(wanted, "--peer")
        for m in masters:
            if m.host == me.host and m != me and ({m.rest_port, m.raft_port}
                                                   & {me.rest_port, me.raft_port}):
                raise ConfigError(f"--peer {wanted}: shares a port with {m} in conf/masters")
        return me
    for m in masters:
        if m.host in ("127.0.0.1", "localhost"):
            return m
    return masters[0]


def _flatten(prefix: str, value: Any, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"-D {item}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out[key.strip()] = value
    return out


class Config:
    """Parsed, validated settings. `conf[key]` gives the typed value."""

    def __init__(self, values: dict[str, Any], home: str) -> None:
        self.home = home
        self.raw = dict(values)
        self.values: dict[str, Any] = {}
        self.spark_conf: dict[str, str] = {}
        for key, value in values.items():
            if any(key.startswith(p) for p in PASS_THROUGH_PREFIXES):
                self.spark_conf[key[len("spark.conf."):]] = str(value)
                continue
            if key not in KEYS:
                raise ConfigError(f"{key}: unknown configuration key")
        for key, (parser, default) in KEYS.items():
            raw = values.get(key, default)
            if raw is None and default is not None:
                raise ConfigError(f"{key}: must have a value (default {default})")
            try:
                self.values[key] = None if raw is None else parser(raw)
            except ValueError as exc:
                raise ConfigError(f"{key}: {exc}")
        self._check()

    def _check(self) -> None:
        interval, timeout = self["heartbeat.interval"], self["heartbeat.timeout"]
        lease = self["jobmanager.lease-timeout"]
        if interval <= 0:
            raise ConfigError("heartbeat.interval: must be positive")
        if timeout < lease + max(interval, 0.5):
            raise ConfigError(
                f"heartbeat.timeout: {timeout:g} s must exceed jobmanager.lease-timeout "
                f"({lease:g} s) plus a margin of max(heartbeat.interval, 500 ms)")
        if lease < 2 * interval:
            raise ConfigError(f"jobmanager.lease-timeout: {lease:g} s must be at least two "
                              f"heartbeat intervals ({2 * interval:g} s)")
        if self["raft.min-timeout"] >= self["raft.max-timeout"]:
            raise ConfigError("raft.min-timeout: must be below raft.max-timeout")
        election = interval + self["raft.max-timeout"]
        if lease < election:
            raise ConfigError(
                f"jobmanager.lease-timeout: {lease:g} s must be at least heartbeat.interval "
                f"+ raft.max-timeout ({election:g} s): a leader election must not outlast the "
                "other peers' leases, or the death of the leader stops every peer's jobs")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def path(self, key: str) -> str:
        """A path setting, resolved against the installation directory."""
        value = os.path.expanduser(self[key])
        return value if os.path.isabs(value) else os.path.join(self.home, value)

    def rest_token(self) -> Optional[str]:
        """rest.auth.token, or the first line of rest.auth.token-file."""
        if self["rest.auth.token-file"]:
            path = self.path("rest.auth.token-file")
            try:
                with open(path) as f:
                    token = f.readline().strip()
            except OSError as exc:
                raise ConfigError(f"rest.auth.token-file: cannot read {path}: "
                                  f"{exc.strerror or exc}")
            if not token:
                raise ConfigError(f"rest.auth.token-file: {path} is empty")
            return token
        return self["rest.auth.token"]

    def savepoints_dir(self) -> str:
        """state.savepoints.dir, by default <high-availability.storageDir>/savepoints."""
        if self["state.savepoints.dir"]:
            return self.path("state.savepoints.dir")
        return os.path.join(self.path("high-availability.storageDir"), "savepoints")


def load_config(conf_dir: str, overrides: Optional[dict[str, Any]] = None,
                home: Optional[str] = None) -> Config:
    path = os.path.join(conf_dir, "config.yaml")
    values: dict[str, Any] = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                data = yaml.safe_load(f) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise ConfigError(f"config.yaml{where}: not valid YAML")
        if not isinstance(data, dict):
            raise ConfigError("config.yaml: expected key: value lines")
        _flatten("", data, values)
    values.update(overrides or {})
    return Config(values, home or os.path.dirname(os.path.abspath(conf_dir)))
