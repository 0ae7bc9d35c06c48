"""Unit tests for jm/policy/jobs/restart.py: Flink's restart strategies as pure decisions."""
from __future__ import annotations

import math

import pytest

from jm.config import Config
from jm.policy.jobs.restart import (Decision, RestartStrategy, RestartTracker, on_failure,
                                    validate_override)


def conf(**values):
    return Config({k.replace("__", "."): v for k, v in values.items()}, home="/tmp")


def run(strategy, times, rand=0.5):
    tracker, out = RestartTracker(), []
    for t in times:
        tracker, decision = on_failure(strategy, tracker, t, rand)
        out.append(decision)
    return tracker, out


# ---- none ---------------------------------------------------------------------------------
def test_none_never_restarts_and_records():
    s = RestartStrategy("none")
    tracker, (d,) = run(s, [5.0])
    assert d == Decision(False, 0.0, "restart strategy is none")
    assert tracker.failures == (5.0,) and tracker.last_failure == 5.0


# ---- fixed-delay --------------------------------------------------------------------------
def test_fixed_delay_allows_exactly_attempts_restarts():
    s = RestartStrategy("fixed-delay", {"attempts": 3, "delay": 2.5})
    tracker, ds = run(s, [1.0, 2.0, 3.0, 4.0])
    assert [d.restart for d in ds] == [True, True, True, False]
    assert [d.delay for d in ds[:3]] == [2.5, 2.5, 2.5]
    assert "3 restart attempts used" in ds[3].reason
    assert tracker.attempts_since_reset == 4
    assert tracker.failures == (1.0, 2.0, 3.0, 4.0)


def test_fixed_delay_zero_attempts_fails_first_time():
    s = RestartStrategy("fixed-delay", {"attempts": 0, "delay": 1.0})
    _, (d,) = run(s, [1.0])
    assert d.restart is False


def test_tracker_is_immutable_input():
    s = RestartStrategy("fixed-delay", {"attempts": 3, "delay": 1.0})
    t0 = RestartTracker()
    t1, _ = on_failure(s, t0, 1.0)
    assert t0 == RestartTracker()
    assert t1.attempts_since_reset == 1


# ---- failure-rate -------------------------------------------------------------------------
def test_failure_rate_window():
    s = RestartStrategy("failure-rate", {"max-failures-per-interval": 2,
                                         "failure-rate-interval": 60.0, "delay": 3.0})
    tracker, ds = run(s, [0.0, 10.0])
    assert [(d.restart, d.delay) for d in ds] == [(True, 3.0), (True, 3.0)]
    tracker, d = on_failure(s, tracker, 20.0)
    assert d.restart is False
    assert "more than 2 failures in 60 s" in d.reason


def test_failure_rate_old_failures_drop_out():
    s = RestartStrategy("failure-rate", {"max-failures-per-interval": 2,
                                         "failure-rate-interval": 60.0, "delay": 1.0})
    tracker, ds = run(s, [0.0, 30.0, 70.0])  # 0.0 is 70 s old -> out of the window
    assert [d.restart for d in ds] == [True, True, True]
    assert tracker.failures == (30.0, 70.0)


def test_failure_rate_window_boundary_is_exclusive():
    s = RestartStrategy("failure-rate", {"max-failures-per-interval": 1,
                                         "failure-rate-interval": 60.0, "delay": 1.0})
    tracker, _ = run(s, [0.0])
    _, d = on_failure(s, tracker, 60.0)  # exactly one interval later: the old one is out
    assert d.restart is True
    _, d = on_failure(s, tracker, 59.9)
    assert d.restart is False


# ---- exponential-delay ---------------------------------------------------------------------
EXP = {"initial-backoff": 1.0, "max-backoff": 10.0, "backoff-multiplier": 2.0,
       "reset-backoff-threshold": 100.0, "jitter-factor": 0.0,
       "attempts-before-reset-backoff": 1000}


def exp(**kw):
    opts = dict(EXP)
    opts.update({k.replace("_", "-"): v for k, v in kw.items()})
    return RestartStrategy("exponential-delay", opts)


def test_exponential_growth_and_cap():
    _, ds = run(exp(), [float(t) for t in range(7)])
    assert [d.delay for d in ds] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert all(d.restart for d in ds)


def test_exponential_multiplier_1_5():
    _, ds = run(exp(backoff_multiplier=1.5), [0.0, 1.0, 2.0])
    assert [d.delay for d in ds] == [1.0, 1.5, 2.25]


def test_exponential_reset_after_quiet_threshold():
    s = exp()
    tracker, ds = run(s, [0.0, 1.0, 2.0])
    assert tracker.backoff == 4.0 and tracker.attempts_since_reset == 3
    tracker, d = on_failure(s, tracker, 2.0 + 100.0)  # exactly the threshold -> reset
    assert d.delay == 1.0
    assert tracker.attempts_since_reset == 1 and tracker.backoff == 1.0


def test_exponential_no_reset_just_below_threshold():
    s = exp()
    tracker, _ = run(s, [0.0, 1.0])
    tracker, d = on_failure(s, tracker, 1.0 + 99.9)
    assert d.delay == 4.0 and tracker.attempts_since_reset == 3


def test_exponential_attempts_before_reset_backoff():
    s = exp(attempts_before_reset_backoff=2)
    tracker, ds = run(s, [0.0, 1.0, 2.0])
    assert [d.restart for d in ds] == [True, True, False]
    assert ds[2].reason == "exponential-delay: attempts-before-reset-backoff used"
    # after a quiet period the counter resets and restarts are allowed again
    _, d = on_failure(s, tracker, 500.0)
    assert d.restart is True and d.delay == 1.0


@pytest.mark.parametrize("rand,expected", [(0.0, 4.0 * 0.75), (0.5, 4.0), (0.999999, 4.0 * 1.25),
                                           (0.25, 4.0 * 0.875)])
def test_exponential_jitter_bounds(rand, expected):
    s = exp(jitter_factor=0.25)
    tracker, _ = run(s, [0.0, 1.0])          # backoff now 2.0
    _, d = on_failure(s, tracker, 2.0, rand)  # backoff 4.0, jitter +-25 %
    assert d.restart is True
    assert math.isclose(d.delay, expected, rel_tol=1e-5)


def test_exponential_jitter_never_above_max_nor_below_zero():
    s = exp(jitter_factor=0.5, max_backoff=10.0)
    tracker, _ = run(s, [float(t) for t in range(6)])
    assert tracker.backoff == 10.0
    _, hi = on_failure(s, tracker, 6.0, 0.999)
    _, lo = on_failure(s, tracker, 6.0, 0.0)
    assert hi.delay == 10.0
    assert lo.delay == 5.0
    s2 = exp(jitter_factor=3.0)
    _, (d,) = run(s2, [0.0], rand=0.0)
    assert d.delay == 0.0


def test_exponential_keeps_bounded_failure_history():
    tracker, _ = run(exp(), [float(t) for t in range(30)])
    assert len(tracker.failures) == 21
    assert tracker.failures[-1] == 29.0


# ---- validate_override ----------------------------------------------------------------------
@pytest.mark.parametrize("spec,expected", [
    ({"type": "fixed-delay"}, {"type": "fixed-delay"}),
    ({"type": "FixedDelay", "attempts": 5, "delay": "2 s"},
     {"type": "fixed-delay", "attempts": 5, "delay": "2 s"}),
    ({"type": "off"}, {"type": "none"}),
    ({"type": "exponential-delay", "jitter-factor": 0.2, "backoff-multiplier": "2"},
     {"type": "exponential-delay", "jitter-factor": 0.2, "backoff-multiplier": "2"}),
    ({"type": "failure-rate", "max-failures-per-interval": "3",
      "failure-rate-interval": 60000}, {"type": "failure-rate",
                                        "max-failures-per-interval": "3",
                                        "failure-rate-interval": 60000}),
])
def test_validate_override_good(spec, expected):
    assert validate_override(spec) == expected


@pytest.mark.parametrize("spec,message", [
    ("fixed-delay", "must be an object"),
    (None, "must be an object"),
    ({}, "restart-strategy.type must be one of"),
    ({"type": 3}, "restart-strategy.type must be one of"),
    ({"type": "sometimes"}, "restart-strategy.type must be one of"),
    ({"type": "none", "attempts": 3}, "unknown option 'attempts' for none"),
    ({"type": "fixed-delay", "initial-backoff": "1 s"}, "unknown option 'initial-backoff'"),
    ({"type": "fixed-delay", "attempts": -1}, "restart-strategy.attempts"),
    ({"type": "fixed-delay", "attempts": 1.5}, "restart-strategy.attempts"),
    ({"type": "fixed-delay", "attempts": True}, "restart-strategy.attempts"),
    ({"type": "fixed-delay", "attempts": "many"}, "restart-strategy.attempts"),
    ({"type": "fixed-delay", "attempts": None}, "restart-strategy.attempts"),
    ({"type": "fixed-delay", "delay": "soon"}, "restart-strategy.delay"),
    ({"type": "fixed-delay", "delay": "5 parsecs"}, "restart-strategy.delay"),
    ({"type": "fixed-delay", "delay": True}, "restart-strategy.delay"),
    ({"type": "exponential-delay", "jitter-factor": -0.1}, "restart-strategy.jitter-factor"),
    ({"type": "exponential-delay", "jitter-factor": "x"}, "restart-strategy.jitter-factor"),
])
def test_validate_override_errors(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        validate_override(spec)


def test_validate_override_infinite_attempts_is_value_error():
    with pytest.raises(ValueError):
        validate_override({"type": "fixed-delay", "attempts": float("inf")})


# ---- from_config ------------------------------------------------------------------------------
def test_from_config_unset_fails_batch_jobs_at_once_and_restarts_streaming_jobs():
    assert RestartStrategy.from_config(conf()) == RestartStrategy("none", {})
    s = RestartStrategy.from_config(conf(), streaming=True)
    assert s == RestartStrategy("fixed-delay", {"attempts": 3, "delay": 1.0})
    # the fixed-delay options configured apply to the streaming default
    c = conf(**{"restart-strategy.fixed-delay.attempts": 7})
    assert RestartStrategy.from_config(c, streaming=True).options["attempts"] == 7


def test_from_config_a_configured_type_applies_to_every_job():
    c = conf(**{"restart-strategy.type": "fixed-delay"})
    for streaming in (False, True):
        assert RestartStrategy.from_config(c, streaming=streaming) == \
            RestartStrategy("fixed-delay", {"attempts": 3, "delay": 1.0})
    c = conf(**{"restart-strategy.type": "none"})
    assert RestartStrategy.from_config(c, streaming=True).type == "none"


def test_from_config_a_job_specs_strategy_wins_over_the_default():
    assert RestartStrategy.from_config(conf(), {"type": "fixed-delay"}).type == "fixed-delay"
    assert RestartStrategy.from_config(conf(), {"type": "none"}, streaming=True).type == "none"


def test_a_hopeless_failure_is_never_restarted_and_is_recorded():
    for s in (RestartStrategy("fixed-delay", {"attempts": 3, "delay": 1.0}),
              RestartStrategy("failure-rate", {"max-failures-per-interval": 9,
                                               "failure-rate-interval": 60.0, "delay": 1.0})):
        tracker, d = on_failure(s, RestartTracker(), 4.0, 0.5, hopeless="an import failed")
        assert d == Decision(False, 0.0, "not restarted: an import failed")
        assert tracker.failures == (4.0,)


def test_from_config_exponential_defaults():
    s = RestartStrategy.from_config(conf(**{"restart-strategy.type": "exponential-delay"}))
    assert s.type == "exponential-delay"
    assert s.options == {"initial-backoff": 1.0, "max-backoff": 60.0, "backoff-multiplier": 1.5,
                         "reset-backoff-threshold": 3600.0, "jitter-factor": 0.1,
                         "attempts-before-reset-backoff": 2 ** 31 - 1}


def test_from_config_reads_configured_options():
    c = conf(**{"restart-strategy.type": "failure-rate",
                "restart-strategy.failure-rate.max-failures-per-interval": 4,
                "restart-strategy.failure-rate.failure-rate-interval": "5 min",
                "restart-strategy.failure-rate.delay": "250 ms"})
    s = RestartStrategy.from_config(c)
    assert s == RestartStrategy("failure-rate", {"max-failures-per-interval": 4,
                                                 "failure-rate-interval": 300.0, "delay": 0.25})


def test_from_config_none():
    assert RestartStrategy.from_config(conf(**{"restart-strategy.type": "disable"})) == \
        RestartStrategy("none", {})


def test_override_type_takes_that_types_cluster_defaults():
    c = conf(**{"restart-strategy.exponential-delay.initial-backoff": "3 s"})
    s = RestartStrategy.from_config(c, {"type": "exponential-delay", "max-backoff": "20 s"})
    assert s.type == "exponential-delay"
    assert s.options["initial-backoff"] == 3.0
    assert s.options["max-backoff"] == 20.0


def test_override_options_without_type_apply_to_cluster_type():
    c = conf(**{"restart-strategy.type": "fixed-delay"})
    s = RestartStrategy.from_config(c, {"attempts": "7", "delay": 500})
    assert s == RestartStrategy("fixed-delay", {"attempts": 7, "delay": 0.5})


def test_override_ignores_options_of_other_types():
    s = RestartStrategy.from_config(conf(), {"type": "fixed-delay", "jitter-factor": 0.9})
    assert s.options == {"attempts": 3, "delay": 1.0}


def test_override_via_alias_and_validated_spec():
    override = validate_override({"type": "No-Restart"})
    s = RestartStrategy.from_config(conf(), override)
    assert s == RestartStrategy("none", {})
    _, d = on_failure(s, RestartTracker(), 1.0)
    assert d.restart is False
