"""Flink's restart strategies as a pure decision: given the failure history and
the time (passed in, never read), restart after a delay or fail the job.

The time must come from one monotonic clock of one host (the JobMaster passes its peer's
`time.monotonic()`): failure-rate windows and the exponential backoff's reset threshold
are differences of these times, and a wall clock step of ±30 s would otherwise widen or
narrow them. The history lives in one JobMaster, so no other host's time ever enters it.

Option names follow Flink: `restart-strategy.type` and
`restart-strategy.<type>.<option>` in the config; a job spec may override with
{"type": ..., "<option>": ...} using the same option names.

With `restart-strategy.type` unset (the default), the strategy depends on the job, as in
Flink without and with checkpointing and as spark-submit never retries: a batch or
application job fails at once (`none`), a streaming job restarts (`fixed-delay`, with
its options' values: 3 attempts, 1 s). A failure that cannot pass (jm/policy/jobs/hopeless.py)
is never restarted, whatever the strategy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from jm.config import KEYS, RESTART_TYPES, parse_duration

OPTIONS = {
    "fixed-delay": {"attempts": "int", "delay": "duration"},
    "exponential-delay": {"initial-backoff": "duration", "max-backoff": "duration",
                          "backoff-multiplier": "float", "reset-backoff-threshold": "duration",
                          "jitter-factor": "float", "attempts-before-reset-backoff": "int"},
    "failure-rate": {"max-failures-per-interval": "int", "failure-rate-interval": "duration",
                     "delay": "duration"},
    "none": {},
}
DEFAULT_BATCH = "none"              # restart-strategy.type unset: batch and script jobs
DEFAULT_STREAMING = "fixed-delay"   # ... streaming jobs


@dataclass(frozen=True)
class RestartStrategy:
    type: str
    options: dict = field(default_factory=dict)

    @staticmethod
    def from_config(conf: Any, override: Optional[dict] = None,
                    streaming: bool = False) -> "RestartStrategy":
        """Cluster defaults from config (with restart-strategy.type unset: by the job's
        type), overridden by a (validated) job spec entry."""
        kind = conf["restart-strategy.type"] or (DEFAULT_STREAMING if streaming
                                                 else DEFAULT_BATCH)
        if override and override.get("type"):
            kind = RESTART_TYPES[str(override["type"]).lower()]
        opts = {}
        for name in OPTIONS[kind]:
            opts[name] = conf[f"restart-strategy.{kind}.{name}"]
        for name, value in (override or {}).items():
            if name != "type" and name in OPTIONS[kind]:
                opts[name] = _coerce(OPTIONS[kind][name], value, f"restart-strategy.{kind}.{name}")
        return RestartStrategy(kind, opts)


def _coerce(kind: str, value: Any, key: Optional[str] = None) -> Any:
    """A job spec's option value as the strategy uses it, held to the range its config key
    allows (`key`): finite numbers only (a NaN or infinite multiplier, delay or count is
    refused, as in the config file)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if kind == "duration":
        return parse_duration(value)  # finite, non-negative
    if kind == "int":
        if not math.isfinite(float(value)) or int(value) != float(value) or int(value) < 0:
            raise ValueError(f"expected a non-negative integer, got {value!r}")
        x: Any = int(value)
    else:
        x = float(value)
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"expected a finite non-negative number, got {value!r}")
    if key in KEYS:  # the config key's own range (e.g. backoff-multiplier 1..100)
        x = KEYS[key][0](x)
    return x


def validate_override(spec: Any) -> dict:
    """Check a job spec's restart-strategy entry; raise ValueError with the reason."""
    if not isinstance(spec, dict):
        raise ValueError("restart-strategy must be an object like {\"type\": \"fixed-delay\"}")
    kind = spec.get("type")
    if not isinstance(kind, str) or kind.lower() not in RESTART_TYPES:
        raise ValueError("restart-strategy.type must be one of none, fixed-delay, "
                         "exponential-delay, failure-rate")
    kind = RESTART_TYPES[kind.lower()]
    for name, value in spec.items():
        if name == "type":
            continue
        if name not in OPTIONS[kind]:
            raise ValueError(f"restart-strategy: unknown option {name!r} for {kind}")
        try:
            _coerce(OPTIONS[kind][name], value, f"restart-strategy.{kind}.{name}")
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"restart-strategy.{name}: {exc}")
    return dict(spec, type=kind)


@dataclass(frozen=True)
class RestartTracker:
    """What a strategy remembers between failures of one job attempt."""
    failures: tuple = ()              # failure times (monotonic; all, for failure-rate)
    attempts_since_reset: int = 0
    backoff: float = 0.0
    last_failure: Optional[float] = None


@dataclass(frozen=True)
class Decision:
    restart: bool
    delay: float = 0.0
    reason: str = ""


def on_failure(strategy: RestartStrategy, tracker: RestartTracker, now: float,
               rand: float = 0.5, hopeless: Optional[str] = None
               ) -> tuple[RestartTracker, Decision]:
    """Record a failure at `now` (monotonic seconds, the clock of every earlier `now` in
    `tracker`) and decide. `rand` in [0, 1) drives the jitter. A `hopeless` failure (why
    no restart can pass it: jm/policy/jobs/hopeless.py) is never restarted."""
    o = strategy.options
    kind = strategy.type
    if hopeless:
        return replace(tracker, failures=tracker.failures + (now,), last_failure=now), \
            Decision(False, reason=f"not restarted: {hopeless}")
    if kind == "none":
        return replace(tracker, failures=tracker.failures + (now,), last_failure=now), \
            Decision(False, reason="restart strategy is none")
    if kind == "fixed-delay":
        n = tracker.attempts_since_reset + 1
        t = replace(tracker, failures=tracker.failures + (now,), attempts_since_reset=n,
                    last_failure=now)
        if n > o["attempts"]:
            return t, Decision(False, reason=f"fixed-delay: {o['attempts']} restart attempts used")
        return t, Decision(True, o["delay"])
    if kind == "failure-rate":
        window = o["failure-rate-interval"]
        recent = tuple(x for x in tracker.failures if now - x < window) + (now,)
        t = replace(tracker, failures=recent, last_failure=now)
        if len(recent) > o["max-failures-per-interval"]:
            return t, Decision(False, reason=(f"failure-rate: more than "
                                              f"{o['max-failures-per-interval']} failures in "
                                              f"{window:g} s"))
        return t, Decision(True, o["delay"])
    # exponential-delay
    backoff, attempts = tracker.backoff, tracker.attempts_since_reset
    if (tracker.last_failure is not None
            and now - tracker.last_failure >= o["reset-backoff-threshold"]):
        backoff, attempts = 0.0, 0
    if backoff <= 0:
        backoff = o["initial-backoff"]
    else:
        backoff = min(backoff * o["backoff-multiplier"], o["max-backoff"])
    attempts += 1
    t = RestartTracker(tracker.failures[-20:] + (now,), attempts, backoff, now)
    if attempts > o["attempts-before-reset-backoff"]:
        return t, Decision(False, reason="exponential-delay: attempts-before-reset-backoff used")
    jitter = backoff * o["jitter-factor"] * (2 * rand - 1)
    return t, Decision(True, max(0.0, min(backoff + jitter, o["max-backoff"])))
