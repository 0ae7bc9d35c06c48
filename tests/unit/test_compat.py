"""raft/compat.py: the exact pysyncobj, and every private member we rely on, checked."""

import pathlib
import re

import pytest

from jm.peer import main as peer
from raft import compat

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANGLED = re.compile(r"\b_(SyncObj|TcpConnection|TcpServer|FileJournal|ResizableFile)__(\w+)")


def test_installed_pysyncobj_has_every_member_we_rely_on():
    assert compat.missing_privates() == []
    compat.check()


def test_every_mangled_member_the_code_uses_is_listed_and_named_in_one_door():
    listed = {(cls, name) for (_, cls), names in compat.PRIVATES.items() for name in names}
    door = ROOT / "raft" / "door.py"
    used = {(cls, name.rstrip("_")) for cls, name in MANGLED.findall(door.read_text())}
    assert used, "the scan found nothing: the pattern is wrong"
    assert used == listed, "raft/compat.PRIVATES lists what raft/door.py uses"
    elsewhere = [f"{path.relative_to(ROOT)}: _{cls}__{name}"
                 for top in ("jm", "raft", "rest", "bench", "chaos", "examples")
                 for path in sorted((ROOT / top).rglob("*.py")) if path != door
                 for cls, name in MANGLED.findall(path.read_text())]
    assert elsewhere == [], "pysyncobj's privates go through raft/door.py"


def test_a_renamed_member_and_another_version_are_refused_by_name():
    assert compat.missing_privates({("pysyncobj.syncobj", "SyncObj"): ("raftLog", "gone"),
                                    ("pysyncobj.journal", "NoSuchClass"): ("f",)}) == [
        "SyncObj.__gone", "NoSuchClass.__f"]
    with pytest.raises(compat.Incompatible, match=r"pysyncobj 0\.3\.18 is installed.*"
                                                  r"exactly 0\.3\.17"):
        compat.check("0.3.18")


def test_pyproject_pins_the_checked_version():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"pysyncobj=={compat.PYSYNCOBJ_VERSION}"' in text


def test_a_peer_on_another_pysyncobj_does_not_start(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(compat, "PYSYNCOBJ_VERSION", "9.9.9")
    assert peer.main(["--conf-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jobmanager: cannot start: pysyncobj 0.3.17 "
                                               "is installed; this build needs exactly 9.9.9")
