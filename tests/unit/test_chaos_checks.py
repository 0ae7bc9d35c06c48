"""The chaos invariant checks are pure: each must catch the violation it names."""
from chaos import checks


def lines(attempt, node, start, end, step=0.1):
    out, t = [], start
    while t <= end + 1e-9:
        out.append((attempt, node, round(t, 3)))
        t += step
    return out


def test_single_attempt_ok_and_overlap_detected():
    ok = {"j": lines(1, "a", 0, 5) + lines(2, "b", 6, 9)}
    assert checks.check_single_attempt(ok) == []
    bad = {"j": lines(1, "a", 0, 7) + lines(2, "b", 6, 9)}
    errs = checks.check_single_attempt(bad)
    assert len(errs) == 1 and "attempt 1 on a" in errs[0]


def test_survivor_restart_without_fault_is_flagged():
    probes = {"j": lines(1, "a", 0, 5) + lines(2, "b", 6, 9)}
    fault_a = [{"kind": "kill", "node": "a", "start": 5.0, "end": 8.0, "jobs": ["j"]}]
    fault_c = [{"kind": "kill", "node": "c", "start": 5.0, "end": 8.0, "jobs": []}]
    assert checks.check_survivors_untouched(probes, fault_a, 0.5) == []
    assert len(checks.check_survivors_untouched(probes, fault_c, 0.5)) == 1


def test_failover_time_limit_and_short_pauses():
    probes = {"j": lines(1, "a", 0, 5) + lines(2, "b", 12, 15)}
    kill = [{"kind": "kill", "node": "a", "start": 5.0, "end": 9.0, "jobs": ["j", "load"]}]
    assert checks.check_failover_time(probes, kill, 8.0, ["j"]) == []  # 7 s < 8 s
    errs = checks.check_failover_time(probes, kill, 6.0, ["j"])
    assert errs == ["job j of a ran elsewhere only after 7.0 s (limit 6.0 s)"]
    short_pause = [{"kind": "pause", "node": "a", "start": 5.0, "end": 7.0, "jobs": ["j"]}]
    assert checks.check_failover_time({"j": lines(1, "a", 0, 9)}, short_pause, 8.0, ["j"]) == []
    never = [{"kind": "kill", "node": "a", "start": 5.0, "end": 9.0, "jobs": ["j"]}]
    assert "never ran elsewhere" in checks.check_failover_time(
        {"j": lines(1, "a", 0, 5)}, never, 8.0, ["j"])[0]


def test_no_loss_and_acknowledged_writes():
    final = {"p": {"state": "RUNNING", "name": "probe"}, "x": {"state": "CREATED", "name": "r1"},
             "y": {"state": "FINISHED", "name": "r2"}, "z": {"state": "FINISHED", "name": "r2"}}
    assert checks.check_no_loss(["p"], final, set()) == []
    assert "missing" in checks.check_no_loss(["q"], final, set())[0]
    assert "should be RUNNING" in checks.check_no_loss(["x"], final, set())[0]
    assert checks.check_acknowledged([("r1", "x")], final) == []
    assert "lost" in checks.check_acknowledged([("r9", "gone")], final)[0]
    assert "created 2 jobs" in checks.check_acknowledged([("r2", "y")], final)[0]


def test_run_all_summarises():
    out = checks.run_all({}, [], {}, [], [], set(), 8.0)
    assert set(out) == {"no-job-lost", "single-attempt-at-a-time", "survivors-not-restarted",
                        "failover-within-limit", "acknowledged-writes-kept"}
    assert all(v["ok"] for v in out.values())


def test_restart_in_place_without_fault_is_flagged():
    probes = {"j": lines(1, "a", 0, 3) + lines(1, "a", 6, 9)}  # same attempt, 3 s gap
    assert "stopped from" in checks.check_survivors_untouched(probes, [], 0.5)[0]
    pause = [{"kind": "pause", "node": "a", "start": 3.2, "end": 5.5, "jobs": ["j"]}]
    assert checks.check_survivors_untouched(probes, pause, 0.5) == []


def _sink_case():
    from chaos.streaming import BASE_TS, expected
    import datetime
    events = [{"user": f"u{i % 2}", "ts": (BASE_TS + datetime.timedelta(minutes=i)).isoformat(),
               "amount": 1} for i in range(4)]
    rows = [(datetime.datetime.fromisoformat(w).isoformat(), u, e, a)
            for (w, u), (e, a) in sorted(expected(events).items())]
    return events, rows


def test_wait_sink_waits_while_the_sink_grows_and_stops_when_it_stalls():
    from chaos.streaming import wait_sink
    events, rows = _sink_case()
    answers = iter([OSError("peer down"), rows[:1], rows[:2], rows[:2], rows[:3], rows])

    def growing(sql):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    res = wait_sink(growing, "/sink", events, stall=30, interval=0)
    assert res["ok"] and res["rows"] == 4
    calls = []

    def stuck(sql):
        calls.append(sql)
        return rows[:2]
    res = wait_sink(stuck, "/sink", events, stall=0.2, interval=0.01)
    assert not res["ok"] and res["missing"] == 2 and len(calls) >= 2
