"""Savepoint locations (jm/policy/jobs/fsuri.py, pure): every spelling of a place becomes one
canonical string; what the cluster cannot write is a ValueError naming the field."""
from __future__ import annotations

import pytest

from jm.policy.jobs import fsuri


@pytest.mark.parametrize("raw,canonical", [
    ("/data/sp", "/data/sp"), ("/data/sp/", "/data/sp"), ("/data/./x/../sp", "/data/sp"),
    ("file:///data/sp", "/data/sp"), ("file:/data/sp", "/data/sp"),
    ("file://localhost/data/sp", "/data/sp"), ("FILE:///data/sp", "/data/sp"),
    ("s3://bucket/sp", "s3://bucket/sp"), ("s3a://bucket/sp/", "s3://bucket/sp"),
    ("s3n://bucket/a//b", "s3://bucket/a/b"), ("S3A://bucket", "s3://bucket"),
    ("gs://my-bucket/x", "gs://my-bucket/x"), ("gcs://my-bucket/x", "gs://my-bucket/x"),
    ("hdfs://nn:8020/sp", "hdfs://nn:8020/sp"), ("hdfs:///sp", "hdfs:///sp"),
    ("viewfs://cluster/sp", "viewfs://cluster/sp"),
])
def test_every_spelling_of_a_place_is_one_location(raw, canonical):
    assert fsuri.location(raw) == canonical
    assert fsuri.location(canonical) == canonical  # canonical is a fixed point


@pytest.mark.parametrize("raw,words", [
    ("rel/dir", "absolute path"), ("", "absolute path"), (7, "absolute path"),
    (None, "absolute path"), ("file://otherhost/sp", "on this host"), ("file:rel", "on this host"),
    ("c:\\sp", "not a file system"), ("weird://x/y", "not a file system"),
    ("ftp://host/x", "not a file system"), ("s3://", "bucket name"), ("s3:///k", "bucket name"),
    ("s3://Bad_Bucket/k", "bucket name"), ("s3://bucket/k?endpoint=x", "no query"),
    ("hdfs:rel", "absolute path"), ("s3://bucket/a/../../etc", "'..'"),
    ("/" + "d" * 5000, "at most"), ("/a\x00b", "NUL"),
    ("hdfs://hdfs@nn:8020/sp", "names no user"), ("viewfs://u:pw@cluster/sp", "names no user"),
    ("hdfs://nn:99999/sp", "port"), ("hdfs://nn:x/sp", "port"),
])
def test_what_cannot_be_written_is_refused_with_the_reason(raw, words):
    with pytest.raises(ValueError) as exc:
        fsuri.location(raw, "target-directory")
    assert words in str(exc.value)
    assert str(exc.value).startswith("target-directory")


def test_join_and_kind():
    assert fsuri.join("s3://b/sp", "savepoint-1", "_metadata") == "s3://b/sp/savepoint-1/_metadata"
    assert fsuri.join("s3://b", "x") == "s3://b/x"
    assert fsuri.join("/sp", "x") == "/sp/x"
    assert fsuri.is_remote("s3://b/x") and not fsuri.is_remote("/s3://x")
    assert fsuri.scheme_of("hdfs://nn/x") == "hdfs" and fsuri.scheme_of("/x") == "file"


def test_hdfs_needs_a_hadoop_client_before_any_jvm_is_started(monkeypatch):
    from jm.cluster.jobs import remotefs
    assert "HADOOP_HOME" in remotefs.hadoop_missing({})
    assert remotefs.hadoop_missing({"CLASSPATH": "/opt/x.jar"}) is not None
    assert remotefs.hadoop_missing({"HADOOP_HOME": "/opt/hadoop"}) is None
    assert remotefs.hadoop_missing({"CLASSPATH": "/opt/hadoop/share/hadoop-common.jar"}) is None
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.delenv("CLASSPATH", raising=False)
    problem = remotefs.problem("hdfs://nn:8020/sp", {})
    assert problem and "Hadoop client" in problem and problem.startswith("hdfs://")
