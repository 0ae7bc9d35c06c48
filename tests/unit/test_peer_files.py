"""The peer's files and what it hands a job's user (jm/runtime/confine.py): copies of
its artifacts in a folder made new for them, and folders others pass through, never list."""
import os
import stat

from jm.runtime.confine import HANDED, hand_over, passable


def test_artifacts_are_copied_into_a_new_folder_under_their_own_names(tmp_path):
    blobs = tmp_path / "blobs"
    (blobs / "a1").mkdir(parents=True)
    (blobs / "a1" / "app.py").write_text("x = 1\n")
    (blobs / "b2").mkdir()
    (blobs / "b2" / "app.py").write_text("x = 2\n")  # the same name: two folders
    run = tmp_path / "run"
    run.mkdir()
    # what a user left in its run folder is never written through
    (run / "files-trap").symlink_to(tmp_path / "elsewhere")
    paths = (str(blobs / "a1" / "app.py"), str(blobs / "b2" / "app.py"))
    copies = hand_over(paths, str(run), os.getuid(), os.getgid())
    assert set(copies) == set(paths)
    a, b = (copies[p] for p in paths)
    assert os.path.basename(a) == os.path.basename(b) == "app.py" and a != b
    assert open(a).read() == "x = 1\n" and open(b).read() == "x = 2\n"
    top = os.path.dirname(os.path.dirname(a))
    assert os.path.dirname(top) == str(run) and os.path.basename(top).startswith(HANDED)
    assert stat.S_IMODE(os.stat(top).st_mode) == 0o700
    assert not (tmp_path / "elsewhere").exists()


def test_a_folder_is_made_passable_not_listable_and_only_if_it_is_ours(tmp_path):
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    passable(str(d))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o711
    os.chmod(d, 0o750)
    passable(str(d))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o751
    passable(str(tmp_path / "missing"))  # nothing to do, no error
