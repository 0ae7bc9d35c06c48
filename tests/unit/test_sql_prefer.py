"""rest/sql.py's reading of RFC 7240's Prefer header: `return=representation` asks for
a statement's first page in its answer, `wait=<seconds>` bounds how long it waits."""
import pytest
from multidict import CIMultiDict

from rest.sql import preferences


def headers(*values):
    return CIMultiDict(("Prefer", v) for v in values)


@pytest.mark.parametrize("values, want", [
    ((), {}),
    (("return=representation",), {"return": "representation"}),
    (("return=representation, wait=10",), {"return": "representation", "wait": "10"}),
    (("respond-async", "Wait = 2; x=y"), {"respond-async": "", "wait": "2"}),
    (('return="representation"',), {"return": "representation"}),
    (("RETURN=representation,,",), {"return": "representation"}),
])
def test_the_preferences(values, want):
    assert preferences(headers(*values)) == want
