"""jm/policy/jobs/vocab.py says what raft/records.py says (the two sides that may not import
each other), and the copies are gone."""
import os
import re

from jm.policy.jobs import vocab
from raft import records
from tests.helpers import ROOT


def test_the_states_are_the_replicated_states():
    assert vocab.TERMINAL == records.TERMINAL
    assert set(vocab.JOB_STATES) == {getattr(records, s) for s in vocab.JOB_STATES}


def test_entries():
    assert vocab.ENTRY_RE.fullmatch("pipelines.clicks:main")
    for bad in ("pipelines.clicks", ":main", "a-b:c", "a:b\n", "1a:b"):
        assert not vocab.ENTRY_RE.fullmatch(bad), bad


def test_no_other_copy_of_the_terminal_states():
    copies = []
    pattern = re.compile(r"""["']FINISHED["'],\s*["']FAILED["'],\s*["']CANCELED["']""")
    for top in ("jm", "rest", "raft", "chaos", "bench", "tests", "examples"):
        for base, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(base, f)
                    with open(path, encoding="utf-8") as fh:
                        if pattern.search(fh.read()):
                            copies.append(os.path.relpath(path, ROOT))
    assert copies == ["jm/policy/jobs/vocab.py"], copies
