"""Unit tests for jm/runtime/joblogs.py: an attempt's runs read as one stream."""
import os

from jm.runtime.joblogs import attempt_files, read


def write(folder, name, text):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(text)


def test_runs_in_order_offsets_and_tail(tmp_path):
    d = tmp_path / "jobs" / "j1"
    write(d, "attempt-2-10.log", b"run10\n")
    write(d, "attempt-2-0.log", b"a\nb\n")
    write(d, "attempt-2-1.log", b"c\nd")
    write(d, "attempt-1-0.log", b"other attempt\n")
    write(d, "attempt-2-x.log", b"ignored\n")
    files = attempt_files(str(tmp_path), "j1", 2)
    assert [os.path.basename(f) for f in files] == ["attempt-2-0.log", "attempt-2-1.log",
                                                    "attempt-2-10.log"]
    whole = read(files)
    assert whole["text"] == "a\nb\nc\ndrun10\n" and whole["size"] == 13
    assert whole["next-offset"] == 13 and not whole["truncated"]
    part = read(files, offset=3, limit=4)
    assert part["text"] == "\nc\nd" and part["next-offset"] == 7 and part["truncated"]
    assert read(files, offset=99)["text"] == "" and read(files, offset=99)["offset"] == 13
    assert read(files, tail=2)["text"] == "c\ndrun10\n"
    assert read(files, tail=100)["text"] == whole["text"]
    assert read(files, tail=0)["text"] == ""
    assert attempt_files(str(tmp_path), "nope", 1) == []
    assert read([])["text"] == ""


def test_tail_counts_bytes_not_decoded_text(tmp_path):
    d = tmp_path / "jobs" / "j"
    write(d, "attempt-1-0.log", b"\xff\xfe bad\nline2\nline3\n")
    files = attempt_files(str(tmp_path), "j", 1)
    assert read(files, tail=1)["text"] == "line3\n"
    assert read(files, tail=1)["offset"] == len(b"\xff\xfe bad\nline2\n")
