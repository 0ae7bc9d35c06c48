"""jm/policy/sql/sqlop.py: a SQL operation's status changes, each allowed and each refused
one (the table is written out here, not read from the module), and the gateway's
`Operation.update_state` that applies them."""
import pytest

from jm.policy.sql.sqlop import OpState, OpStatus, Refused, update_state

RUNNING, FINISHED, CANCELED, ERROR, CLOSED = (OpStatus.RUNNING, OpStatus.FINISHED,
                                              OpStatus.CANCELED, OpStatus.ERROR,
                                              OpStatus.CLOSED)
ALLOWED = {(RUNNING, FINISHED), (RUNNING, CANCELED), (RUNNING, ERROR), (RUNNING, CLOSED),
           (FINISHED, ERROR), (FINISHED, CLOSED),
           (CANCELED, CLOSED),
           (ERROR, CLOSED)}
PAIRS = [(a, b) for a in OpStatus for b in OpStatus]


def test_the_statuses_are_flinks_names():
    assert [s.value for s in OpStatus] == ["RUNNING", "FINISHED", "CANCELED", "ERROR",
                                           "CLOSED"]
    assert OpState() == OpState(RUNNING, None)


@pytest.mark.parametrize("current,to", sorted(ALLOWED))
def test_allowed(current, to):
    assert update_state(OpState(current), to) == OpState(to)


@pytest.mark.parametrize("current,to", [p for p in PAIRS if p not in ALLOWED])
def test_refused(current, to):
    state = OpState(current, "earlier" if current is ERROR else None)
    assert update_state(state, to, "why") == Refused(current, to)


def test_error_keeps_its_reason_and_only_error_has_one():
    assert update_state(OpState(), ERROR, "boom") == OpState(ERROR, "boom")
    assert update_state(OpState(FINISHED), ERROR, "lost") == OpState(ERROR, "lost")
    assert update_state(OpState(), FINISHED, "ignored") == OpState(FINISHED, None)
    assert update_state(OpState(ERROR, "boom"), CLOSED) == OpState(CLOSED, None)


def test_a_refusal_says_what_may_happen_instead():
    assert str(Refused(CANCELED, FINISHED)) == \
        "an operation that is CANCELED cannot become FINISHED (it may become: CLOSED)"
    assert str(Refused(CLOSED, ERROR)).endswith("(it may become: nothing)")


def test_the_gateways_operation_changes_only_through_the_table():
    from jm.cluster.sql.sqlops import Operation
    op = Operation("o", "SELECT 1", "read")
    assert op.update_state(CANCELED) and op.status is CANCELED
    assert not op.update_state(FINISHED) and op.status is CANCELED  # cancelled first: stays
    assert not op.update_state(ERROR, "late") and op.error is None
    assert op.update_state(CLOSED) and op.status is CLOSED
