"""The zygote's select timeout (pure): never 0, so a fenced zygote cannot spin."""
import math

from hypothesis import given, strategies as st

from jm.runtime.zygotestate import IDLE_WAIT, wait_timeout


def test_no_lease_waits_idle():
    assert wait_timeout(100.0, math.inf) == IDLE_WAIT


def test_wakes_just_after_the_lease_ends():
    assert abs(wait_timeout(100.0, 100.25) - 0.251) < 1e-9
    assert wait_timeout(100.0, 150.0) == IDLE_WAIT


def test_expired_lease_waits_idle_not_zero():
    assert wait_timeout(100.0, 99.0) == IDLE_WAIT
    assert wait_timeout(100.0, 0.0) == IDLE_WAIT


@given(st.floats(0, 1e6), st.floats(-1e6, 1e6))
def test_always_positive_and_bounded(now, delta):
    t = wait_timeout(now, now + delta)
    assert 0 < t <= IDLE_WAIT
