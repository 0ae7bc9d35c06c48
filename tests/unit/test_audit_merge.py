"""jm.cluster.api.audit: a peer's audit log read back, and several peers' entries merged
(GET /audit answers with every live peer's)."""
from jm.cluster.api.audit import AuditLog, merge_newest


def e(time, peer, n=0):
    return {"time": time, "peer": peer, "n": n}


def test_merge_keeps_the_newest_in_time_order_across_peers():
    a = [e("2026-11-26T10:00:00.000Z", "a"), e("2026-11-26T10:00:02.000Z", "a")]
    b = [e("2026-11-26T10:00:01.000Z", "b"), e("2026-11-26T10:00:03.000Z", "b")]
    assert [x["time"][-6:-1] for x in merge_newest([a, b], 10)] == [
        "0.000", "1.000", "2.000", "3.000"]
    assert [x["peer"] for x in merge_newest([a, b], 2)] == ["a", "b"]
    # a peer's answer out of order (clock steps) is still merged whole
    assert [x["n"] for x in merge_newest([[e("2", "c", 2), e("1", "c", 1)], []], 5)] == [1, 2]
    assert merge_newest([[], []], 3) == []


def test_the_log_reads_back_the_newest_matching_entries(tmp_path):
    log = AuditLog(str(tmp_path))
    for i in range(5):
        log.write({"time": f"t{i}", "who": "x" if i % 2 else "y"})
    with open(log.path, "a") as f:
        f.write('{"cut by a crash"\n')
    assert [x["time"] for x in log.read(2, lambda x: True)] == ["t3", "t4"]
    assert [x["time"] for x in log.read(10, lambda x: x["who"] == "x")] == ["t1", "t3"]
    log.close()
