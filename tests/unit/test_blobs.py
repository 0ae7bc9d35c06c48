"""Unit tests for jm/cluster/blobs.py: safe artifact names and the content-addressed store."""
from __future__ import annotations

import hashlib
import os

import pytest

from jm.cluster.blobs import BlobError, BlobStore, safe_name


@pytest.mark.parametrize("given,expected", [
    ("x.py", "x.py"),
    ("../../x.py", "x.py"),
    ("/etc/../../x.py", "x.py"),
    ("..\\..\\windows\\evil.zip", "evil.zip"),
    ("C:\\temp\\lib.egg", "lib.egg"),
    ("dir/sub/my lib (1).zip", "my_lib__1_.zip"),
    ("..hidden.py", "hidden.py"),
    (".x.py", "x.py"),
    ("  spaced.py  ", "spaced.py"),
    ("ünï.py", "_n_.py"),
    ("a-b_c.1.zip", "a-b_c.1.zip"),
    ("lib/dep-1.0.jar", "dep-1.0.jar"),   # spark-submit's --jars, --files, --archives
    ("data.tar.gz", "data.tar.gz"), ("keytab", "keytab"), ("x.PY", "x.PY"),
])
def test_safe_name(given, expected):
    assert safe_name(given) == expected


@pytest.mark.parametrize("given", ["", "../", "..", "x.py/", "dir/", "   ", "..."])
def test_safe_name_rejects(given):
    with pytest.raises(BlobError, match="has no name of a file"):
        safe_name(given)
    assert issubclass(BlobError, ValueError)


def test_safe_name_is_never_a_path():
    for name in ["../../x.py", "/abs/x.py", "a/../../b.zip", "..\\x.egg"]:
        out = safe_name(name)
        assert "/" not in out and "\\" not in out and not out.startswith(".")


def test_long_name_keeps_suffix():
    out = safe_name("a" * 200 + ".py")
    assert len(out) <= 128
    assert out.endswith(".py")


def test_put_stores_under_digest(tmp_path):
    store = BlobStore(str(tmp_path / "blobs"))
    data = b"print('hi')\n"
    digest = hashlib.sha256(data).hexdigest()
    aid, name = store.put("../../evil/../job.py", data)
    assert (aid, name) == (f"sha256:{digest}", "job.py")
    target = tmp_path / "blobs" / digest / "job.py"
    assert target.read_bytes() == data
    # nothing else written, nothing outside the store
    assert sorted(os.listdir(tmp_path)) == ["blobs"]
    assert os.listdir(tmp_path / "blobs") == [digest]
    assert os.listdir(tmp_path / "blobs" / digest) == ["job.py"]
    assert store.local_path(aid, "job.py") == str(target)
    assert store.local_path(aid, "../../job.py") == str(target)


def test_put_is_idempotent_and_content_addressed(tmp_path):
    store = BlobStore(str(tmp_path))
    a1 = store.put("a.zip", b"one")
    a2 = store.put("a.zip", b"one")
    b = store.put("a.zip", b"two")
    assert a1 == a2 and a1 != b
    assert len([d for d in os.listdir(tmp_path)]) == 2


def test_put_rejects_bad_name_and_writes_nothing(tmp_path):
    store = BlobStore(str(tmp_path / "s"))
    with pytest.raises(BlobError):
        store.put("../", b"x")
    assert os.listdir(tmp_path / "s") == []
    art_id, name = store.put("../../etc/passwd", b"x")  # its base name, in the store
    assert name == "passwd" and store.local_path(art_id.split(":")[1], name).startswith(
        str(tmp_path / "s") + "/")


def test_local_path_missing_and_bad_digest(tmp_path):
    store = BlobStore(str(tmp_path))
    assert store.local_path("sha256:" + "0" * 64, "x.py") is None
    for bad in ["sha256:../../etc", "sha256:" + "G" * 64, "sha256:abc", "../x"]:
        with pytest.raises(BlobError, match="bad artifact digest"):
            store.local_path(bad, "x.py")


def test_a_put_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    import pytest
    store = BlobStore(str(tmp_path))

    def full(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("jm.cluster.blobs.os.replace", full)
    with pytest.raises(OSError):
        store.put("a.py", b"x = 1\n")
    assert store.temps() == [] and not [n for d in tmp_path.iterdir() for n in os.listdir(d)]
