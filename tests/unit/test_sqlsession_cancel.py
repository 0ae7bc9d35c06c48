"""jm/client/sqlsession.py: Ctrl-C (KeyboardInterrupt) while a statement's answer is
awaited cancels that statement, by the operation handle its request id names, which is
the one the peer derives (jm/policy/sql/opid.py); then the interrupt goes on up (`jm sql`
says "cancelled" and reads the next statement)."""
import pytest

from jm.client.sqlsession import SqlSession


class _Client:
    """Records the requests; the statement's answer is interrupted (Ctrl-C)."""

    def __init__(self):
        self.sent = []
        self.max_attempts = None
        self.bases = ["http://p1"]
        self.base = "http://p1"

    def request(self, method, path, body=None, headers=None, budget=None):
        self.sent.append((method, path, dict(headers or {})))
        if path == "/v1/sessions":
            return {"sessionHandle": "sh-1"}
        if path.endswith("/statements"):
            raise KeyboardInterrupt
        return {"status": "CANCELED"}

    def get(self, path):
        return {"rest-url": "http://p1"}


def test_ctrl_c_before_the_answer_cancels_the_statement_it_sent():
    from jm.cluster.sql.sqlstatements import op_of   # (what the peer names it)
    client = _Client()
    session = SqlSession(client)
    with pytest.raises(KeyboardInterrupt):
        session.execute("SELECT count(*) FROM range(100000000000)")
    (_, _, headers), (method, path, _) = client.sent[-2:]
    assert headers["Prefer"] == "return=representation"
    op = op_of("sh-1", headers["X-Request-Id"])
    assert (method, path) == ("POST", f"/v1/sessions/sh-1/operations/{op}/cancel")
    assert session.running is None
