"""Configuration: Flink-style keys in conf/config.yaml, `-D key=value` overrides,
and conf/masters (one `host:rest-port:raft-port` per line).

Every key is declared here with its type and default; a bad or unknown key stops
start-up with one line naming the key and what is wrong (ConfigError). The value parsers
are in jm/configvalues.py, peer addresses and conf/masters in jm/configpeers.py (both
re-exported here).
"""
from __future__ import annotations

import os
import stat
from functools import cached_property
from typing import Any, Callable, Optional

import yaml

# re-exported: what other modules import from jm.config
from jm.configpeers import (MAX_PEER_ADDRESS, PeerAddress, choose_self,  # noqa: F401
                            parse_peer, read_masters, rest_base_url)
from jm.configsections import (ExecutorSettings, SparkSettings,  # noqa: F401  (re-exported)
                               Timeouts)
from jm.policy.spark.engines import MIN_IDLE_TIMEOUT
from jm.configvalues import RESTART_TYPES  # noqa: F401
from jm.configvalues import (ConfigError, bool_value, choice_value, float_value, int_value,
                             log_cap_value, log_level_value, names_value, opt_bool_value,
                             opt_duration_value, opt_str_value, opt_syslog_value,
                             port_range_value, restart_type_value, role_map_value,
                             savepoints_dir_value, size_or_percent_value, str_value,
                             parse_duration, parse_memory)
from jm.policy.jobs import fsuri
from raft.protocol import PROTOCOL


def _protocol_version(v: Any) -> int:
    n = int_value(1)(v)
    if n > PROTOCOL:
        raise ValueError(f"this build speaks protocols 1 to {PROTOCOL}, not {n}")
    return n


# key -> (parser, default); what each key means is in jm/configkeys.py (a new key needs a
# description there: tests/unit/test_docgen.py), docs/reference/config.md shows both
KEYS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "rest.bind-address": (opt_str_value, None),  # default: the peer's host in conf/masters
    "rest.max-body-size": (parse_memory, "100 mb"),
    "rest.write-timeout": (parse_duration, "5 s"),
    "rest.max-connections": (int_value(0), 1000),  # open REST connections per peer; 0: no limit
    "rest.max-connections-per-source": (int_value(0), 250),  # ... from one address; 0: no limit
    "rest.keepalive-timeout": (parse_duration, "30 s"),  # idle connection (or first request)
    "jobmanager.slots": (int_value(1), 8),
    "jobmanager.data-dir": (str_value, "data"),
    "jobmanager.lease-timeout": (parse_duration, "2 s"),
    "jobmanager.cancel-timeout": (parse_duration, "3 s"),
    # SIGTERM: drain this long first (0: stop at once); jm/cluster/members/stopdrain.py
    "jobmanager.stop.drain-deadline": (parse_duration, "60 s"),
    "jobmanager.result.max-size": (parse_memory, "256 kb"),
    # bounds on what a job spec and a job's failure may put into the replicated state
    "jobmanager.spec.max-size": (parse_memory, "1 mb"),        # a whole spec, as JSON
    "jobmanager.spec.max-args-size": (parse_memory, "256 kb"),  # its args, as JSON
    "jobmanager.spec.max-sql-size": (parse_memory, "256 kb"),   # its sql text
    "jobmanager.failure.max-size": (parse_memory, "16 kb"),     # each failure text
    "jobmanager.log.level": (log_level_value, "INFO"),
    "jobmanager.log.format": (choice_value("text", "json"), "text"),
    "jobmanager.executor.preload": (choice_value("pyspark", "none"), "pyspark"),
    "jobmanager.placement": (choice_value("spread", "pack", "leader-only", "by-tenant"), "spread"),
    "jobmanager.executor.nice": (int_value(0), 10),
    # job processes: the user they run as (None: the peer's), their limits (0: none)
    "jobmanager.executor.user": (opt_str_value, None),
    "jobmanager.executor.proxy-users": (names_value, ()),  # users a job may ask to run as
    "jobmanager.executor.limits.nproc": (int_value(0), 4096),
    "jobmanager.executor.limits.address-space": (parse_memory, 0),
    "jobmanager.executor.limits.memory": (parse_memory, 0),
    "jobmanager.executor.limits.open-files": (int_value(0), 65536),
    "jobmanager.executor.limits.file-size": (parse_memory, 0),
    "jobmanager.executor.limits.oom-score-adj": (int_value(-1000), 500),
    "jobmanager.executor.cgroup": (bool_value, True),  # a cgroup v2 per job where possible
    # names or globs of the peer's environment variables its children (jobs, the Spark
    # Connect server, the SQL worker) see besides jm.policy.jobs.jobenv.DEFAULT_PASS
    "jobmanager.executor.env-pass": (names_value, ()),
    # jobs' own Python requirements (jm/cluster/jobs/envs.py): the cache of environments and
    # the index pip uses (unset: pip's own configuration)
    "jobmanager.envs.max-size": (parse_memory, "10 gb"),
    "jobmanager.envs.index-url": (opt_str_value, None),
    "jobmanager.envs.extra-index-urls": (names_value, ()),
    "jobmanager.envs.find-links": (names_value, ()),
    "jobmanager.envs.build-timeout": (parse_duration, "10 min"),
    "jobmanager.envs.source-builds": (bool_value, False),  # else wheels only
    "jobmanager.weight": (float_value(0.0), 0.0),  # 0: proportional to jobmanager.slots
    "high-availability.storageDir": (str_value, "data/ha"),
    # default: <high-availability.storageDir>/savepoints
    "state.savepoints.dir": (savepoints_dir_value, None),
    # savepoints on S3 (s3:// targets, jm/cluster/jobs/remotefs.py); unset: the AWS defaults
    "s3.endpoint": (opt_str_value, None),  # e.g. http://minio:9000 (S3-compatible stores)
    "s3.access-key": (opt_str_value, None),
    "s3.secret-key": (opt_str_value, None),
    "s3.secret-key-file": (opt_str_value, None),
    "s3.region": (opt_str_value, None),
    "s3.path.style.access": (opt_bool_value, None),  # unset: path style with s3.endpoint
    # gs:// (jm/cluster/jobs/remotefs.py); unset: Google's endpoint and default credentials
    "gs.endpoint": (opt_str_value, None),  # e.g. http://127.0.0.1:4443 (an emulator)
    "gs.anonymous": (bool_value, False),   # no credentials (an emulator, public buckets)
    "rebalance.strategy": (choice_value("none", "on-join", "continuous"), "on-join"),
    "rebalance.interval": (parse_duration, "10 s"),
    "rebalance.max-moves-per-round": (int_value(1), 2),
    "rebalance.threshold": (float_value(0.0), 1.0),
    "jobstore.expiration-time": (parse_duration, "1 h"),
    "jobstore.max-capacity": (int_value(0), 10000),
    # retention of files (jm/cluster/jobs/janitor.py, jm/policy/jobs/cleanup.py)
    "jobmanager.cleanup.interval": (parse_duration, "1 min"),  # 0: no cleanup
    "jobmanager.blob.grace-period": (parse_duration, "1 h"),  # unreferenced blobs kept
    "state.savepoints.num-retained": (int_value(0), 10),  # per job in state.savepoints.dir; 0: all
    "jobmanager.job-log.max-size": (log_cap_value, "64 mb"),  # per run's log file; 0: no cap
    "jobmanager.job-log.check-interval": (parse_duration, "5 s"),
    "jobmanager.job-log.stdout": (bool_value, False),  # tee job output to the peer's stdout
    "jobmanager.streaming.progress-interval": (parse_duration, "5 s"),  # per job, to Raft
    "jobmanager.disk.min-free": (size_or_percent_value, "1 gb"),  # else /healthz disk-low
    "heartbeat.interval": (parse_duration, "500 ms"),
    "heartbeat.timeout": (parse_duration, "3 s"),
    "restart-strategy.type": (restart_type_value, None),  # unset: by job type (policy/restart.py)
    "restart-strategy.fixed-delay.attempts": (int_value(0), 3),
    "restart-strategy.fixed-delay.delay": (parse_duration, "1 s"),
    "restart-strategy.exponential-delay.initial-backoff": (parse_duration, "1 s"),
    "restart-strategy.exponential-delay.max-backoff": (parse_duration, "1 min"),
    "restart-strategy.exponential-delay.backoff-multiplier": (float_value(1.0, 100.0), 1.5),
    "restart-strategy.exponential-delay.reset-backoff-threshold": (parse_duration, "1 h"),
    "restart-strategy.exponential-delay.jitter-factor": (float_value(0.0, 1.0), 0.1),
    "restart-strategy.exponential-delay.attempts-before-reset-backoff": (int_value(1), 2 ** 31 - 1),
    "restart-strategy.failure-rate.max-failures-per-interval": (int_value(1), 1),
    "restart-strategy.failure-rate.failure-rate-interval": (parse_duration, "1 min"),
    "restart-strategy.failure-rate.delay": (parse_duration, "1 s"),
    "env.pid.dir": (str_value, "/tmp"),
    "env.log.dir": (str_value, "log"),
    "env.log.max-size": (log_cap_value, "100 mb"),  # the peer's own log rotates; 0: never
    "env.log.max-files": (int_value(1), 10),  # rotated peer log files kept
    "env.ssh.opts": (str_value, ""),  # options bin/cluster.sh gives ssh for remote peers
    "spark.master": (str_value, "local[*]"),
    "spark.remote": (opt_str_value, None),
    "spark.connect.embedded": (bool_value, True),
    "spark.connect.port": (int_value(0), 0),
    # the bearer token the embedded Connect server requires (unset: a random one per peer
    # start, which only the peer's own jobs and SQL worker get)
    "spark.connect.token": (opt_str_value, None),
    "spark.connect.token-file": (opt_str_value, None),
    # cores the peer's Connect server takes from a Spark cluster (its application's
    # spark.cores.max; 0: no limit); with local[...] masters it does not apply
    "spark.connect.cores": (int_value(0), 1),
    "spark.connect.startup-timeout": (parse_duration, "180 s"),
    # engines (jm/policy/spark/engines.py): one per peer, per tenant or per connect-mode job
    "spark.connect.share-level": (choice_value("peer", "tenant", "job"), "peer"),
    "spark.connect.engine.idle-timeout": (parse_duration, "5 min"),
    "spark.connect.engine.max-per-peer": (int_value(1), 8),
    # the peer's Spark Connect endpoint for clients (jm/cluster/spark/connectfront.py)
    "spark.connect.endpoint.enabled": (bool_value, True),
    "spark.connect.endpoint.port": (port_range_value, "15002"),  # Spark's; 0: a free port
    "spark.connect.endpoint.max-sessions": (int_value(0), 200),  # per peer; 0: no limit
    "spark.driver.memory": (str_value, "1g"),
    "spark.log.level": (str_value, "WARN"),
    "spark.class-archive": (str_value, ""),  # jm/runtime/classarchive.py; "": none
    # a classic job's application with no executor for this long says so (GET /jobs/{id})
    "spark.executor-wait-warning": (parse_duration, "30 s"),
    "sql.max-result-rows": (int_value(0), 1000),
    # the SQL gateway (Flink SQL Gateway REST API on every peer)
    "sql-gateway.session.idle-timeout": (parse_duration, "10 min"),
    "sql-gateway.livy-session.idle-timeout": (parse_duration, "1 h"),  # Livy's default
    "sql-gateway.livy-session.max-waiting-statements": (int_value(0), 100),  # 0: no limit
    "sql-gateway.livy-session.statement-timeout": (opt_duration_value, None),
    "sql-gateway.max-sessions": (int_value(0), 200),      # per peer; 0: no limit
    "sql-gateway.max-statement-size": (parse_memory, "1 mb"),  # a statement's bytes
    "sql-gateway.worker-threads": (int_value(1), 16),    # statements run at once per peer
    "sql-gateway.page-rows": (int_value(1), 1000),       # rows per result page
    "sql-gateway.fetch-wait": (parse_duration, "1 s"),  # a fetch waits this long for rows
    # Raft voters (jm/policy/members/voters.py): odd, at most the members; unset: 3 (or fewer)
    "raft.voters": (int_value(1), None),
    # a voter dead this long is replaced by a live non-voting member
    "raft.voter-replace-after": (parse_duration, "30 s"),
    # a peer's own Raft writes (heartbeats' registration, job reports, membership, the
    # resource manager's placements): how long each waits for its commit and apply
    "raft.commit-timeout": (parse_duration, "5 s"),
    "raft.min-timeout": (parse_duration, "400 ms"),
    "raft.max-timeout": (parse_duration, "1000 ms"),
    "raft.append-entries-period": (parse_duration, "50 ms"),
    "raft.leader-fallback-timeout": (parse_duration, "1400 ms"),
    "raft.connection-retry-time": (parse_duration, "500 ms"),
    "raft.use-batch": (bool_value, False),
    "raft.fsync": (bool_value, True),  # an acknowledged write is on disk on a majority
    "raft.password": (opt_str_value, None),  # default: cluster.secret
    "raft.password-file": (opt_str_value, None),
    "raft.max-message-size": (parse_memory, "256 mb"),  # a Raft frame from another member
    # inbound Raft connections; 0: 4 per voter and peer, >= 16
    "raft.max-connections": (int_value(0), 0),
    "rest.auth.token": (opt_str_value, None),
    "rest.auth.token-file": (opt_str_value, None),
    # JWT bearers (jm/cluster/api/tokens.py): verified with this public key (PEM) or JWKS file
    "rest.auth.jwt.key-file": (opt_str_value, None),
    "rest.auth.jwt.issuer": (opt_str_value, None),
    "rest.auth.jwt.audience": (opt_str_value, None),
    "rest.auth.jwt.role-claim": (str_value, "role"),
    "rest.auth.jwt.tenant-claim": (str_value, "tenant"),
    "rest.auth.jwt.jwks-url": (opt_str_value, None),
    "rest.auth.jwt.default-tenant": (opt_str_value, None),
    "rest.auth.jwt.max-lifetime": (parse_duration, "24 h"),
    "rest.auth.jwt.role-map": (role_map_value, ""),
    "rest.audit.max-files": (int_value(1), 5),
    "rest.audit.syslog": (opt_syslog_value, None),
    "cluster.secret": (opt_str_value, None),
    "cluster.secret-file": (opt_str_value, None),
    # the Raft protocol this peer registers with (raft/protocol.py): lower during a
    # rolling upgrade to hold the new build's features back, as Kafka's
    # inter.broker.protocol.version
    "cluster.protocol-version": (_protocol_version, PROTOCOL),
    # how long a starting peer without Raft data waits for a seed that can say whether
    # the cluster knows it (the amnesia guard fails closed after that)
    "cluster.seed-wait": (parse_duration, "60 s"),
    # security (README "Security"): a peer listening beyond loopback needs rest.auth.token
    # and cluster.secret unless this says the network is private
    "security.insecure": (bool_value, False),
    "rest.allowed-hosts": (names_value, ()),    # Host names REST answers to besides its own
    "rest.allowed-origins": (names_value, ()),  # web origins whose pages may write
    "rest.ssl.enabled": (bool_value, False),     # HTTPS for REST and for peer-to-peer calls
    "rest.ssl.certificate": (opt_str_value, None),  # PEM certificate chain of this peer
    "rest.ssl.key": (opt_str_value, None),          # PEM private key of that certificate
    "rest.ssl.ca": (opt_str_value, None),           # PEM CA bundle peers verify each other with
}
PASS_THROUGH_PREFIXES = ("spark.conf.",)


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


# secrets that may come from a file instead: `<key>-file` names it (first line)
SECRET_KEYS = ("rest.auth.token", "cluster.secret", "raft.password", "s3.secret-key",
               "spark.connect.token")
SECRET_FILE_MAX = 64 * 1024


def read_secret_file(key: str, path: str) -> str:
    """The first line of a secret file, which no other user may read or write (ssh's rule
    for private keys; group access is allowed: Kubernetes mounts secrets with fsGroup)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"{key}: {path} is not a regular file")
            if st.st_mode & 0o007:
                raise ConfigError(f"{key}: {path} is open to other users (mode "
                                  f"{stat.S_IMODE(st.st_mode):04o}): chmod 600 it")
            data = os.read(fd, SECRET_FILE_MAX)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}")
    lines = data.decode("utf-8", "replace").splitlines()
    value = lines[0].strip() if lines else ""
    if not value:
        raise ConfigError(f"{key}: {path} is empty")
    return value


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
        for key in SECRET_KEYS:
            if self[key + "-file"]:
                if self[key] is not None:
                    raise ConfigError(f"{key}: set either it or {key}-file, not both")
                self.values[key] = read_secret_file(key + "-file", self.path(key + "-file"))
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
        voters = self["raft.voters"]
        if voters is not None and voters % 2 == 0:
            raise ConfigError(f"raft.voters: {voters} is even; an odd number of voters "
                              "survives as many losses as the next even one")
        if self["spark.connect.engine.idle-timeout"] < MIN_IDLE_TIMEOUT:
            raise ConfigError(f"spark.connect.engine.idle-timeout: must be at least "
                              f"{MIN_IDLE_TIMEOUT:g} s (an engine would stop between statements)")
        self._check_jwt()
        if self["raft.min-timeout"] >= self["raft.max-timeout"]:
            raise ConfigError("raft.min-timeout: must be below raft.max-timeout")
        if self["raft.max-message-size"] < 1024 * 1024:  # pysyncobj sends up to 64 kb at once
            raise ConfigError("raft.max-message-size: must be at least 1 mb")
        election = interval + self["raft.max-timeout"]
        if lease < election:
            raise ConfigError(
                f"jobmanager.lease-timeout: {lease:g} s must be at least heartbeat.interval "
                f"+ raft.max-timeout ({election:g} s): a leader election must not outlast the "
                "other peers' leases, or the death of the leader stops every peer's jobs")

    def _check_jwt(self) -> None:
        """JWT bearers: keys from a file or a URL (not both), checked against an issuer or
        an audience (a token of any other application of the identity provider would
        do otherwise)."""
        key_file, url = self["rest.auth.jwt.key-file"], self["rest.auth.jwt.jwks-url"]
        if key_file and url:
            raise ConfigError("rest.auth.jwt.key-file and rest.auth.jwt.jwks-url: give one")
        if url and not url.startswith(("https://", "http://")):
            raise ConfigError(f"rest.auth.jwt.jwks-url: {url!r} is not an http(s) URL")
        if (key_file or url) and not (self["rest.auth.jwt.issuer"]
                                      or self["rest.auth.jwt.audience"]):
            raise ConfigError("rest.auth.jwt.issuer or rest.auth.jwt.audience must be set "
                              "with JWT bearers: without either, a token the identity "
                              "provider signed for any other application would be accepted")
        if self["rest.auth.jwt.max-lifetime"] <= 0:
            raise ConfigError("rest.auth.jwt.max-lifetime: must be positive")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    # typed sections, read once (the configuration does not change)
    @cached_property
    def timeouts(self) -> Timeouts:
        return Timeouts.of(self)

    @cached_property
    def spark(self) -> SparkSettings:
        """spark.*"""
        return SparkSettings.of(self)

    @cached_property
    def executor(self) -> ExecutorSettings:
        """jobmanager.executor.* but its limits (jm/runtime/limits.py)"""
        return ExecutorSettings.of(self)

    def path(self, key: str) -> str:
        """A path setting, resolved against the installation directory."""
        value = os.path.expanduser(self[key])
        return value if os.path.isabs(value) else os.path.join(self.home, value)

    def rest_token(self) -> Optional[str]:
        """rest.auth.token (or the first line of rest.auth.token-file)."""
        return self["rest.auth.token"]

    def savepoints_dir(self) -> str:
        """state.savepoints.dir, by default <high-availability.storageDir>/savepoints."""
        if self["state.savepoints.dir"]:
            if fsuri.is_remote(self["state.savepoints.dir"]):  # s3://... (jobs/remotefs.py)
                return self["state.savepoints.dir"]
            return self.path("state.savepoints.dir")
        return os.path.join(self.path("high-availability.storageDir"), "savepoints")


ENV_PREFIX = "JM_CONF_"          # JM_CONF_REST_AUTH_TOKEN=... sets rest.auth.token
ENV_PROPERTIES = "JM_PROPERTIES"  # "key: value" lines, like Flink's FLINK_PROPERTIES
ENV_RESERVED = ("JM_CONF_DIR",)   # the configuration directory itself, not a key


def env_name(key: str) -> str:
    """The environment variable of a key: JM_CONF_ + upper case, '.' and '-' as '_'."""
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def from_environment(environ: Any) -> dict[str, Any]:
    """Settings from the environment (containers): JM_PROPERTIES (YAML lines, any key,
    spark.conf.* too), then JM_CONF_<KEY> variables (each value parsed as YAML, as -D
    values are). An unknown JM_CONF_ variable or bad JM_PROPERTIES is a ConfigError."""
    out: dict[str, Any] = {}
    props = environ.get(ENV_PROPERTIES)
    if props and props.strip():
        try:
            data = yaml.safe_load(props)
        except yaml.YAMLError:
            raise ConfigError(f"{ENV_PROPERTIES}: not valid YAML (expected key: value lines)")
        if not isinstance(data, dict):
            raise ConfigError(f"{ENV_PROPERTIES}: expected key: value lines")
        _flatten("", data, out)
    names = {env_name(k): k for k in KEYS}
    for var in sorted(environ):
        if not var.startswith(ENV_PREFIX) or var in ENV_RESERVED:
            continue
        key = names.get(var)
        if key is None:
            raise ConfigError(f"{var}: no configuration key is called that (JM_CONF_ + the "
                              "key in upper case with '.' and '-' as '_'; use "
                              f"{ENV_PROPERTIES} for spark.conf.* keys)")
        raw = environ[var]
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            out[key] = raw
    return out


def load_config(conf_dir: str, overrides: Optional[dict[str, Any]] = None,
                home: Optional[str] = None, environ: Any = None) -> Config:
    """config.yaml, then the environment (`environ`, default: os.environ; see
    from_environment), then `overrides` (-D)."""
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
    values.update(from_environment(os.environ if environ is None else environ))
    values.update(overrides or {})
    return Config(values, home or os.path.dirname(os.path.abspath(conf_dir)))
