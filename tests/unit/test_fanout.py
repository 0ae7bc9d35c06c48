"""ReaderFanout (raft/fanout.py): when the leader sends the log to non-voting members."""
from raft.fanout import ReaderFanout

READERS = {"r1", "r2", "r3"}


def test_every_reader_once_a_period_has_passed():
    f = ReaderFanout(0.05)
    assert f.targets(100.0, READERS) is None  # never sent: all
    f.sent(100.0, None, 7)
    assert f.targets(100.01, READERS) == set()  # within the period: none of them
    assert f.targets(100.049, READERS) == set()
    assert f.targets(100.06, READERS) is None


def test_a_reader_that_forwarded_a_write_is_sent_to_until_a_commit_covers_it():
    f = ReaderFanout(0.05)
    f.sent(0.0, None, 10)
    f.forwarded("r2", 12)
    assert f.targets(0.01, READERS) == {"r2"}
    f.sent(0.01, {"r2"}, 11)  # the entry went out, its commit not yet
    assert f.targets(0.02, READERS) == {"r2"}
    f.sent(0.02, {"r2"}, 12)  # the commit covers it
    assert f.targets(0.03, READERS) == set()


def test_the_highest_write_counts_and_a_full_send_clears_what_it_covers():
    f = ReaderFanout(0.05)
    f.sent(0.0, None, 0)
    f.forwarded("r1", 5)
    f.forwarded("r1", 3)  # an older answer does not lower it
    f.forwarded("r3", 9)
    f.sent(0.06, None, 6)  # everyone: r1 is covered, r3 not
    assert f.targets(0.07, READERS) == {"r3"}


def test_a_reader_gone_from_the_members_is_not_a_target():
    f = ReaderFanout(0.05)
    f.sent(0.0, None, 0)
    f.forwarded("gone", 3)
    assert f.targets(0.01, READERS) == set()


def test_a_reader_catching_up_gets_every_send():
    f = ReaderFanout(0.05)
    f.sent(0.0, None, 0)
    assert f.targets(0.01, READERS, behind=["r1"]) == {"r1"}
    f.forwarded("r2", 4)
    assert f.targets(0.01, READERS, behind=["r1", "gone"]) == {"r1", "r2"}
