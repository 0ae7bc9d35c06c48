"""The Connect endpoint's sessions (jm/policy/spark/connectbook.py): events in, what to
do out, time passed in."""
from __future__ import annotations

from jm.api import ANYONE, Credential
from jm.policy.spark import connectbook as B

ANA = Credential("ana", "submit", "sales")
BO = Credential("bo", "submit", "ops")


def opened(book: B.ConnectBook, sid: str, who=ANA, now: float = 0.0) -> None:
    assert book.handle(B.Call(sid, who, "u"), now) == [B.Open(sid, who.tenant, who.name, "u")]
    assert book.handle(B.Opened(sid), now) == []


def test_admission_says_why():
    assert B.admission(None).code is B.Code.UNAUTHENTICATED
    reader = B.admission(Credential("r", "read", None))
    assert reader.code is B.Code.PERMISSION_DENIED and "submit role" in reader.message
    assert B.admission(ANA) is None and B.admission(ANYONE) is None


def test_the_first_call_opens_and_the_others_wait_for_it():
    book = B.ConnectBook()
    assert book.handle(B.Call("s", ANA), 1.0) == [B.Open("s", "sales", "ana", "")]
    assert book.handle(B.Call("s", ANA), 1.1) == [B.Wait("s")]
    book.handle(B.Opened("s"), 1.2)
    assert book.handle(B.Call("s", ANA), 1.3) == [B.Forward("s")]


def test_a_refused_opening_leaves_nothing_behind():
    book = B.ConnectBook()
    book.handle(B.Call("s", ANA), 0.0)
    book.handle(B.Opened("s", B.Refuse(B.Code.RESOURCE_EXHAUSTED, "quota")), 0.1)
    assert book.sessions == {} and book.closed == {}
    assert isinstance(book.handle(B.Call("s", ANA), 0.2)[0], B.Open)  # (tried again)


def test_another_credential_cannot_use_a_session():
    book = B.ConnectBook()
    opened(book, "s")
    [step] = book.handle(B.Call("s", BO), 1.0)
    assert step.code is B.Code.PERMISSION_DENIED
    assert book.handle(B.Call("s", ANA), 1.0) == [B.Forward("s")]


def test_an_idle_session_closes_and_its_id_says_why():
    book = B.ConnectBook()
    opened(book, "s", now=0.0)
    assert book.handle(B.Tick(60.0), 59.0) == []
    assert book.handle(B.Tick(60.0), 60.0) == [B.Close("s", "idle", in_spark=True)]
    [step] = book.handle(B.Call("s", ANA), 61.0)
    assert step.code is B.Code.NOT_FOUND and "idle for more than 60 s" in step.message


def test_a_running_call_keeps_its_session():
    book = B.ConnectBook()
    opened(book, "s", now=0.0)
    book.handle(B.Call("s", ANA), 10.0)           # a long query
    assert book.handle(B.Tick(60.0), 500.0) == []
    book.handle(B.CallDone("s"), 500.0)
    assert book.handle(B.Tick(60.0), 559.0) == []
    assert book.handle(B.Tick(60.0), 560.0) == [B.Close("s", "idle", in_spark=True)]


def test_a_released_session_closes_without_another_release():
    book = B.ConnectBook()
    opened(book, "s")
    assert book.handle(B.Released("s"), 1.0) == [B.Close("s", "released", in_spark=False)]
    assert book.handle(B.Released("s"), 1.0) == []
    assert book.handle(B.Call("s", ANA), 2.0)[0].code is B.Code.NOT_FOUND


def test_closing_all_and_the_bound_on_remembered_ids():
    book = B.ConnectBook()
    opened(book, "a")
    book.handle(B.Call("b", ANA), 0.0)  # (still opening: Spark holds nothing of it)
    assert book.close_all("stop") == [B.Close("a", "stop", in_spark=True)]
    for i in range(B.REMEMBER_CLOSED + 5):
        book._remember(f"x{i}", "gone")
    assert len(book.closed) == B.REMEMBER_CLOSED and "x0" not in book.closed
