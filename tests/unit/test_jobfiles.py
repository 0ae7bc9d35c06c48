"""jm/cluster/jobs/jobfiles.py on the real file system: files a job could leave are read only
as regular files, bounded, never through a symbolic link, never blocking on a FIFO;
copies take regular files only."""
import os
import threading

import pytest

from jm.cluster.jobs.jobfiles import Refused, copy_tree, read_bounded, read_json


def test_a_regular_file_is_read_to_its_limit(tmp_path):
    p = tmp_path / "result.json"
    p.write_bytes(b'{"result": 1}')
    assert read_bounded(str(p), 13) == b'{"result": 1}'
    assert read_json(str(p), 100) == ({"result": 1}, None)
    with pytest.raises(Refused) as err:
        read_bounded(str(p), 12)
    assert err.value.size == 13 and err.value.why == "is 13 bytes, more than 12"
    assert read_json(str(tmp_path / "absent"), 10) == (None, None)
    (tmp_path / "bad").write_text("{not json")
    assert read_json(str(tmp_path / "bad"), 100) == (None, None)


def test_links_devices_and_folders_are_refused(tmp_path):
    link = tmp_path / "error.json"
    os.symlink("/dev/zero", link)
    with pytest.raises(Refused) as err:
        read_bounded(str(link), 1000)
    assert err.value.why == "is a symbolic link" and err.value.size is None
    with pytest.raises(Refused, match="is a character device, not a regular file"):
        read_bounded("/dev/zero", 1000)
    with pytest.raises(Refused, match="is a folder, not a regular file"):
        read_bounded(str(tmp_path), 1000)
    value, refused = read_json(str(link), 1000)
    assert value is None and refused.why == "is a symbolic link"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    out = []
    t = threading.Thread(target=lambda: out.append(read_json(str(fifo), 1000)), daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # (unblock the reader so the test process can end)
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO blocked")
    assert out[0][0] is None and out[0][1].why == "is a FIFO, not a regular file"


def test_copies_take_regular_files_only(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "offsets").mkdir(parents=True)
    (src / "offsets" / "0").write_text("v1")
    os.chmod(src / "offsets" / "0", 0o640)
    os.symlink("/etc/hostname", src / "offsets" / "1")   # a link to a file
    os.symlink("/etc", src / "state")                     # a link to a folder
    os.mkfifo(src / "offsets" / "2")
    copy_tree(str(src), str(dst))
    assert sorted(os.listdir(dst)) == ["offsets"]
    assert os.listdir(dst / "offsets") == ["0"]
    assert (dst / "offsets" / "0").read_text() == "v1"
    assert os.stat(dst / "offsets" / "0").st_mode & 0o777 == 0o640
    assert os.stat(dst / "offsets" / "0").st_mtime_ns == os.stat(src / "offsets" / "0").st_mtime_ns
