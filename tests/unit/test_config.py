"""Unit tests for jm/config.py: durations, sizes, keys, YAML, -D overrides, masters."""
from __future__ import annotations


import os

import pytest

from jm import config as C
from jm.config import (Config, ConfigError, PeerAddress, load_config, parse_duration,
                       parse_memory, parse_overrides, parse_peer, read_masters)


def cfg(**values):
    return Config(values, home="/tmp")


# ---- parse_duration ----------------------------------------------------------------------
@pytest.mark.parametrize("value,seconds", [
    ("500 ms", 0.5), ("500ms", 0.5), ("2 s", 2.0), ("2s", 2.0), ("1 min", 60.0), ("3 m", 180.0),
    ("1 h", 3600.0), ("2 hours", 7200.0), ("1 d", 86400.0), ("1.5 s", 1.5), ("  10 SECONDS ", 10.0),
    ("250", 0.25), (250, 0.25), (1500.0, 1.5), ("0 ms", 0.0), ("7 millis", 0.007),
])
def test_parse_duration(value, seconds):
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "soon", "1 fortnight", "s", "-1 s", "1e3 ms", "1,5 s",
                                   "1 s 2", True, False, None, [1], {"s": 1}])
def test_parse_duration_bad(value):
    with pytest.raises(ValueError):
        parse_duration(value)


def test_parse_duration_negative_number_rejected():
    with pytest.raises(ValueError):
        parse_duration(-1000)


# ---- parse_memory ------------------------------------------------------------------------
@pytest.mark.parametrize("value,size", [
    ("100 mb", 100 * 1024 ** 2), ("64kb", 64 * 1024), ("1 g", 1024 ** 3), ("1 GB", 1024 ** 3),
    ("10", 10), (10, 10), ("512 bytes", 512), ("2 mebibytes", 2 * 1024 ** 2),
    ("1.5 kb", 1536), ("  3 k ", 3072),
])
def test_parse_memory(value, size):
    assert parse_memory(value) == size


@pytest.mark.parametrize("value", ["", "lots", "1 tb", "-5 mb", "kb", True, None, "1 m b"])
def test_parse_memory_bad(value):
    with pytest.raises(ValueError):
        parse_memory(value)


def test_parse_memory_negative_int_rejected():
    with pytest.raises(ValueError):
        parse_memory(-5)


# ---- Config ------------------------------------------------------------------------------
def test_defaults():
    c = cfg()
    assert c["jobmanager.slots"] == 8
    assert c["heartbeat.interval"] == 0.5
    assert c["heartbeat.timeout"] == 3.0
    assert c["jobmanager.lease-timeout"] == 2.0
    assert c["rest.max-body-size"] == 100 * 1024 ** 2
    assert c["restart-strategy.type"] is None  # by job type: jm/policy/jobs/restart.py
    assert c["spark.remote"] is None
    assert c["spark.connect.embedded"] is True
    assert c["jobmanager.log.level"] == "INFO"
    assert c.spark_conf == {}
    assert c.home == "/tmp"
    assert set(c.values) == set(C.KEYS)


def test_typed_values():
    c = cfg(**{"jobmanager.slots": "4", "spark.connect.embedded": "off",
               "restart-strategy.type": "ExponentialDelay", "jobmanager.log.level": "debug",
               "spark.remote": "sc://host:15002", "raft.use-batch": "yes"})
    assert c["jobmanager.slots"] == 4
    assert c["spark.connect.embedded"] is False
    assert c["restart-strategy.type"] == "exponential-delay"
    assert c["jobmanager.log.level"] == "DEBUG"
    assert c["spark.remote"] == "sc://host:15002"
    assert c["raft.use-batch"] is True


def test_savepoints_dir_may_be_a_remote_uri():
    c = cfg(**{"state.savepoints.dir": "s3a://bucket/sp/", "s3.path.style.access": "true"})
    assert c.savepoints_dir() == "s3://bucket/sp" and c["s3.path.style.access"] is True
    assert cfg(**{"state.savepoints.dir": "file:///srv/sp"}).savepoints_dir() == "/srv/sp"
    assert cfg(**{"state.savepoints.dir": "/srv/sp"}).savepoints_dir() == "/srv/sp"
    assert cfg()["s3.path.style.access"] is None
    for bad in ("ftp://host/sp", "s3://Bad_Bucket/x"):
        with pytest.raises(ConfigError, match="^state.savepoints.dir:"):
            cfg(**{"state.savepoints.dir": bad})


def test_spark_conf_pass_through():
    c = cfg(**{"spark.conf.spark.sql.shuffle.partitions": 4})
    assert c.spark_conf == {"spark.sql.shuffle.partitions": "4"}


def test_unknown_key_names_the_key():
    with pytest.raises(ConfigError) as e:
        cfg(**{"jobmanager.slotz": 3})
    assert str(e.value).startswith("jobmanager.slotz:")
    assert "unknown" in str(e.value)


@pytest.mark.parametrize("key,value", [
    ("jobmanager.slots", 0), ("jobmanager.slots", "x"), ("jobmanager.slots", True),
    ("jobmanager.slots", 2.5), ("jobmanager.slots", [1]),
    ("heartbeat.timeout", "forever"), ("rest.max-body-size", "huge"),
    ("restart-strategy.type", "sometimes"), ("spark.connect.embedded", "maybe"),
    ("jobmanager.log.level", "TRACE"), ("rest.bind-address", {"a": 1}),
    ("restart-strategy.exponential-delay.backoff-multiplier", 0.5),
    ("restart-strategy.exponential-delay.jitter-factor", "x"),
    ("restart-strategy.failure-rate.max-failures-per-interval", 0),
    ("spark.connect.port", -1),
    ("spark.connect.share-level", "connection"), ("spark.connect.engine.idle-timeout", "5 s"),
    ("spark.connect.engine.max-per-peer", 0),
])
def test_bad_value_names_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        cfg(**{key: value})
    assert str(e.value).startswith(f"{key}:")
    assert "\n" not in str(e.value)


def test_null_value_for_required_key_is_config_error():
    with pytest.raises(ConfigError, match="^jobmanager.slots:"):
        cfg(**{"jobmanager.slots": None})


def test_null_heartbeat_interval_is_config_error():
    with pytest.raises(ConfigError):
        cfg(**{"heartbeat.interval": None})


def test_optional_key_may_be_null():
    assert cfg(**{"spark.remote": None})["spark.remote"] is None
    assert cfg(**{"spark.remote": ""})["spark.remote"] is None


def test_heartbeat_timeout_must_exceed_lease_plus_margin():
    # lease 2 s + max(0.5 s, 500 ms) = 2.5 s
    assert cfg(**{"heartbeat.timeout": "2500 ms"})["heartbeat.timeout"] == 2.5
    with pytest.raises(ConfigError) as e:
        cfg(**{"heartbeat.timeout": "2400 ms"})
    assert str(e.value).startswith("heartbeat.timeout:")
    assert "jobmanager.lease-timeout" in str(e.value)


def test_heartbeat_margin_uses_interval_when_larger():
    base = {"heartbeat.interval": "1 s", "jobmanager.lease-timeout": "2 s"}
    assert cfg(**base, **{"heartbeat.timeout": "3 s"})["heartbeat.timeout"] == 3.0
    with pytest.raises(ConfigError, match="^heartbeat.timeout:"):
        cfg(**base, **{"heartbeat.timeout": "2900 ms"})


def test_lease_must_cover_two_heartbeats():
    with pytest.raises(ConfigError, match="^jobmanager.lease-timeout:"):
        cfg(**{"heartbeat.interval": "1500 ms", "jobmanager.lease-timeout": "2 s",
               "heartbeat.timeout": "10 s"})


def test_heartbeat_interval_positive():
    with pytest.raises(ConfigError, match="^heartbeat.interval:"):
        cfg(**{"heartbeat.interval": 0})


def test_raft_timeouts_ordered():
    with pytest.raises(ConfigError, match="^raft.min-timeout:"):
        cfg(**{"raft.min-timeout": "2 s", "raft.max-timeout": "1 s"})


def test_path_resolution():
    c = Config({"jobmanager.data-dir": "d", "env.log.dir": "/abs/log"}, home="/opt/jm")
    assert c.path("jobmanager.data-dir") == "/opt/jm/d"
    assert c.path("env.log.dir") == "/abs/log"


# ---- load_config -------------------------------------------------------------------------
def write(path, text):
    path.write_text(text)
    return path


def test_load_config_nested_yaml_is_flattened(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    write(conf / "config.yaml", """
jobmanager:
  slots: 3
  lease-timeout: 2 s
heartbeat:
  interval: 500 ms
  timeout: 4 s
restart-strategy:
  type: exponential-delay
  exponential-delay:
    initial-backoff: 2 s
rest.bind-address: 0.0.0.0
spark:
  conf:
    spark.sql.shuffle.partitions: 8
""")
    c = load_config(str(conf))
    assert c["jobmanager.slots"] == 3
    assert c["heartbeat.timeout"] == 4.0
    assert c["restart-strategy.type"] == "exponential-delay"
    assert c["restart-strategy.exponential-delay.initial-backoff"] == 2.0
    assert c["rest.bind-address"] == "0.0.0.0"
    assert c.spark_conf == {"spark.sql.shuffle.partitions": "8"}
    assert c.home == str(tmp_path)


def test_load_config_without_file_gives_defaults(tmp_path):
    c = load_config(str(tmp_path), home="/h")
    assert c["jobmanager.slots"] == 8 and c.home == "/h"


def test_load_config_empty_file(tmp_path):
    write(tmp_path / "config.yaml", "")
    assert load_config(str(tmp_path))["jobmanager.slots"] == 8


def test_load_config_overrides_win(tmp_path):
    write(tmp_path / "config.yaml", "jobmanager.slots: 3\n")
    c = load_config(str(tmp_path), parse_overrides(["jobmanager.slots=5"]))
    assert c["jobmanager.slots"] == 5


def test_load_config_unknown_nested_key(tmp_path):
    write(tmp_path / "config.yaml", "jobmanager:\n  slotz: 3\n")
    with pytest.raises(ConfigError, match="^jobmanager.slotz: unknown"):
        load_config(str(tmp_path))


def test_load_config_bad_yaml_names_line(tmp_path):
    write(tmp_path / "config.yaml", "a: 1\nb: [unclosed\n")
    with pytest.raises(ConfigError, match=r"^config.yaml line \d+: not valid YAML"):
        load_config(str(tmp_path))


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_load_config_not_a_mapping(tmp_path, text):
    write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError, match="expected key: value"):
        load_config(str(tmp_path))


# ---- parse_overrides ---------------------------------------------------------------------
def test_parse_overrides_types():
    out = parse_overrides(["jobmanager.slots=4", "spark.connect.embedded=false",
                           "heartbeat.timeout=5 s", " rest.bind-address =0.0.0.0",
                           "spark.remote=", "a=b=c", "x={bad"])
    assert out == {"jobmanager.slots": 4, "spark.connect.embedded": False,
                   "heartbeat.timeout": "5 s", "rest.bind-address": "0.0.0.0",
                   "spark.remote": "", "a": "b=c", "x": "{bad"}


def test_parse_overrides_needs_equals():
    with pytest.raises(ConfigError, match="-D jobmanager.slots: expected key=value"):
        parse_overrides(["jobmanager.slots"])


def test_parse_overrides_later_wins():
    assert parse_overrides(["k=1", "k=2"]) == {"k": 2}


# ---- masters -------------------------------------------------------------------------------
def test_parse_peer():
    p = parse_peer(" host1:8081:6123 ")
    assert p == PeerAddress("host1", 8081, 6123)
    assert p.node_id == "host1:6123" == p.raft_addr
    assert p.rest_url == "http://host1:8081"
    assert str(p) == "host1:8081:6123"


@pytest.mark.parametrize("line,message", [
    ("host:8081", "is not host:rest-port:raft-port"),
    (":8081:6123", "is not host:rest-port:raft-port"),
    ("h:1:2:3", "is not host:rest-port:raft-port"),
    ("h:http:6123", "not a number"),
    ("h:0:6123", "out of range"),
    ("h:8081:65536", "out of range"),
    ("h:8081:8081", "one port for REST and Raft"),
])
def test_parse_peer_errors(line, message):
    with pytest.raises(ConfigError, match=message):
        parse_peer(line)


def test_read_masters(tmp_path):
    path = write(tmp_path / "masters", "# peers\n127.0.0.1:8081:6123\n\n"
                                       "127.0.0.1:8082:6124  # second\nother:8081:6123\n")
    assert read_masters(str(path)) == [PeerAddress("127.0.0.1", 8081, 6123),
                                       PeerAddress("127.0.0.1", 8082, 6124),
                                       PeerAddress("other", 8081, 6123)]


def test_read_masters_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="masters: file .* is missing"):
        read_masters(str(tmp_path / "nope"))


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_read_masters_empty(tmp_path, text):
    path = write(tmp_path / "masters", text)
    with pytest.raises(ConfigError, match="lists no peer"):
        read_masters(str(path))


def test_read_masters_bad_line_names_file(tmp_path):
    path = write(tmp_path / "masters", "127.0.0.1:8081:6123\nbroken-line\n")
    with pytest.raises(ConfigError) as e:
        read_masters(str(path))
    assert f"masters ({path})" in str(e.value) and "'broken-line'" in str(e.value)


@pytest.mark.parametrize("text,port", [
    ("h:8081:6123\nh:8081:6124\n", "h:8081"),     # REST port twice
    ("h:8081:6123\nh:8082:6123\n", "h:6123"),     # Raft port twice
    ("h:8081:6123\nh:6123:7000\n", "h:6123"),     # REST of one = Raft of other
])
def test_read_masters_duplicate_port(tmp_path, text, port):
    path = write(tmp_path / "masters", text)
    with pytest.raises(ConfigError, match=f"port {port} is used twice"):
        read_masters(str(path))


def test_choose_self():
    ms = [PeerAddress("remote", 1, 2), PeerAddress("localhost", 3, 4)]
    assert C.choose_self(ms, None) == ms[1]
    assert C.choose_self(ms, "remote:1:2") == ms[0]
    assert C.choose_self([PeerAddress("a", 1, 2)], None) == PeerAddress("a", 1, 2)
    # a member added online joins through the lines of masters (its seeds)
    assert C.choose_self(ms, "other:1:2") == PeerAddress("other", 1, 2)
    with pytest.raises(ConfigError, match="shares a port with remote:1:2"):
        C.choose_self(ms, "remote:1:3")


def test_lease_must_outlast_a_leader_election():
    with pytest.raises(ConfigError, match="^jobmanager.lease-timeout:.*raft.max-timeout"):
        cfg(**{"raft.max-timeout": "1800 ms"})
    assert cfg(**{"raft.max-timeout": "1500 ms"})["raft.max-timeout"] == 1.5


def test_log_format_lines_carry_job_and_epoch():
    import json
    import logging
    from jm.cluster.peerlog import LogFormat
    rec = logging.LogRecord("jm.cluster.jobmaster", logging.INFO, __file__, 1, "job %s up", ("j1",), None)
    rec.job, rec.epoch = "j1", 3
    text = LogFormat("text", "n1").format(rec)
    assert text.endswith("INFO jm.cluster.jobmaster: job j1 up [job=j1 epoch=3]")
    obj = json.loads(LogFormat("json", "n1").format(rec))
    assert obj["job"] == "j1" and obj["epoch"] == 3 and obj["node"] == "n1"
    assert obj["message"] == "job j1 up" and obj["level"] == "INFO"
    rec.created = 1795710000.25  # (a time in UTC, whatever the machine's zone)
    assert json.loads(LogFormat("json", "n1").format(rec))["time"] == "2026-11-26T16:20:00.250Z"
    plain = logging.LogRecord("jm.cluster.peer", logging.WARNING, __file__, 1, "hello", (), None)
    assert "job" not in json.loads(LogFormat("json", "n1").format(plain))
    with pytest.raises(ConfigError, match="^jobmanager.log.format:"):
        cfg(**{"jobmanager.log.format": "xml"})


def test_the_documented_fast_failover_profile_is_valid_and_is_the_benchmarks_one():
    import os
    import re

    import yaml
    from bench.failover import PROFILES

    guide = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide", "operations.md")
    block = re.search(r"## Faster failover.*?```yaml\n(.*?)```", open(guide).read(),
                      re.S).group(1)
    documented = yaml.safe_load(block)
    assert documented == PROFILES["fast"]
    conf = cfg(**documented)
    assert conf["heartbeat.timeout"] == pytest.approx(1.4)
    assert conf["jobmanager.lease-timeout"] == pytest.approx(0.8)


def test_settings_from_the_environment(tmp_path):
    """Containers: JM_PROPERTIES lines, then JM_CONF_<KEY>, then -D overrides."""
    import os
    conf = tmp_path / "conf"
    os.makedirs(conf)
    (conf / "config.yaml").write_text("jobmanager.slots: 2\nrest.write-timeout: 4 s\n")
    env = {"JM_PROPERTIES": "jobmanager.slots: 3\nspark.conf.spark.sql.shuffle.partitions: 4\n",
           "JM_CONF_JOBMANAGER_SLOTS": "5", "JM_CONF_REST_AUTH_TOKEN": "s3cret",
           "JM_CONF_HEARTBEAT_TIMEOUT": "4 s", "PATH": "/bin", "JM_CONF_DIR": str(conf)}
    c = C.load_config(str(conf), environ=env)
    assert c["jobmanager.slots"] == 5 and c["rest.auth.token"] == "s3cret"
    assert c["rest.write-timeout"] == pytest.approx(4.0)
    assert c["heartbeat.timeout"] == pytest.approx(4.0)
    assert c.spark_conf["spark.sql.shuffle.partitions"] in (4, "4")
    c = C.load_config(str(conf), {"jobmanager.slots": 7}, environ=env)
    assert c["jobmanager.slots"] == 7
    with pytest.raises(C.ConfigError, match="JM_CONF_NO_SUCH_KEY"):
        C.load_config(str(conf), environ={"JM_CONF_NO_SUCH_KEY": "1"})
    with pytest.raises(C.ConfigError, match="jobmanager.slots"):
        C.load_config(str(conf), environ={"JM_CONF_JOBMANAGER_SLOTS": "many"})
    with pytest.raises(C.ConfigError, match="JM_PROPERTIES"):
        C.load_config(str(conf), environ={"JM_PROPERTIES": "just text"})


def test_every_key_has_its_own_environment_name():
    names = [C.env_name(k) for k in C.KEYS]
    assert len(names) == len(set(names))
    assert not set(names) & set(C.ENV_RESERVED)


@pytest.mark.parametrize("key", C.SECRET_KEYS)
def test_a_secret_comes_from_a_private_file(tmp_path, key):
    f = tmp_path / "secret"
    f.write_text("  s3cr3t  \nsecond line\n")
    f.chmod(0o640)  # (group access allowed: Kubernetes mounts secrets with fsGroup)
    conf = Config({key + "-file": str(f)}, str(tmp_path))
    assert conf[key] == "s3cr3t"


def test_a_secret_file_open_to_others_empty_odd_or_doubled_is_a_clear_error(tmp_path):
    f = tmp_path / "secret"
    f.write_text("s3cr3t\n")
    f.chmod(0o644)
    with pytest.raises(ConfigError, match=r"cluster.secret-file: .* is open to other users "
                                          r"\(mode 0644\): chmod 600 it"):
        Config({"cluster.secret-file": str(f)}, str(tmp_path))
    f.chmod(0o600)
    with pytest.raises(ConfigError, match="cluster.secret: set either it or "
                                          "cluster.secret-file, not both"):
        Config({"cluster.secret-file": str(f), "cluster.secret": "x"}, str(tmp_path))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(ConfigError, match="rest.auth.token-file: .* is empty"):
        Config({"rest.auth.token-file": str(empty)}, str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # (would block a plain open until a writer came)
    with pytest.raises(ConfigError, match="raft.password-file: .* is not a regular file"):
        Config({"raft.password-file": str(fifo)}, str(tmp_path))
    with pytest.raises(ConfigError, match="s3.secret-key-file: cannot read .*: No such file"):
        Config({"s3.secret-key-file": str(tmp_path / "nope")}, str(tmp_path))


def test_a_peer_with_a_readable_secret_file_does_not_start(tmp_path, capsys):
    from jm.peer import main as peer
    (tmp_path / "secret").write_text("s3cr3t\n")
    (tmp_path / "secret").chmod(0o604)
    (tmp_path / "config.yaml").write_text(f"cluster.secret-file: {tmp_path / 'secret'}\n")
    (tmp_path / "masters").write_text("127.0.0.1:18081:16123\n")
    assert peer.main(["--conf-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "configuration error: cluster.secret-file:" in err[0], err


@pytest.mark.parametrize("text,words", [
    ("h" * 400 + ":1:2", "at most 300 characters"), ("bad host!:1:2", "not a host name"),
    ("-h:1:2", "not a host name"), ("h..:1:2", "not a host name"),
    ("h:x:2", "not a number")])
def test_a_peer_address_is_bounded_and_a_host_name(text, words):
    with pytest.raises(ConfigError, match=words):
        C.parse_peer(text, "peer")


def test_peer_addresses_of_every_usual_form_parse():
    for text in ("127.0.0.1:8081:6123", "jm-0.jm-peers.data.svc.cluster.local:8081:6123",
                 "my_host:1:2", "h:1:2"):
        assert C.parse_peer(text).rest_port in (8081, 1)


def test_a_list_of_names_left_unset_is_empty_not_the_text_of_its_default(tmp_path):
    """(A tuple default was read as the text "()": jobmanager.envs.extra-index-urls gave pip
    an index named "()".)"""
    conf = load_config(str(tmp_path), {})
    for key in ("jobmanager.executor.env-pass", "jobmanager.executor.proxy-users",
                "jobmanager.envs.extra-index-urls", "jobmanager.envs.find-links"):
        assert conf[key] == (), key
    conf = load_config(str(tmp_path), {"jobmanager.envs.find-links": "/w1, /w2"})
    assert conf["jobmanager.envs.find-links"] == ("/w1", "/w2")


def test_timeouts_are_one_typed_section_and_a_client_s_write_is_not_the_peer_s():
    """rest.write-timeout bounds what a client waits for; raft.commit-timeout the peer's
    own Raft writes (reports, membership, placements): two keys, read once."""
    t = cfg(**{"rest.write-timeout": "2 s", "raft.commit-timeout": "9 s"}).timeouts
    assert (t.write, t.commit) == (2.0, 9.0)
    d = cfg().timeouts
    assert (d.commit, d.write, d.heartbeat, d.interval, d.lease) == (
        5.0, 5.0, cfg()["heartbeat.timeout"], cfg()["heartbeat.interval"],
        cfg()["jobmanager.lease-timeout"])
    with pytest.raises(ConfigError, match="raft.commit-timeout"):
        cfg(**{"raft.commit-timeout": "soon"})


def test_local_clusters_give_their_endpoints_ports_the_os_never_hands_out():
    """(write_conf: a bind to port 0 elsewhere cannot take a port a peer is about to bind)"""
    from jm.configvalues import port_range_value
    from jm.runtime.ports import ephemeral_range, free_block
    low, high = ephemeral_range()
    for _ in range(20):
        first, last = port_range_value(free_block(3))
        assert last - first == 2 and (last < low or first > high), (first, last, low, high)
