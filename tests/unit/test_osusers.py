"""Unit tests for jm/cluster/members/osusers.py: which tenants' OS users a host lacks."""
from __future__ import annotations

from jm.cluster.members.osusers import MissingUsers


def test_names_the_tenants_whose_user_is_missing_and_looks_again_after_its_ttl():
    users = {"a": "etl", "b": "bi", "c": "etl"}
    present = {"bi"}
    lookups = []
    now = [0.0]

    def exists(user):
        lookups.append(user)
        return user in present

    missing = MissingUsers(lambda: users, exists, lambda: now[0], ttl=10.0)
    assert missing() == ("a", "c")
    assert sorted(lookups) == ["bi", "etl"]  # one look-up per user, not per tenant
    present.add("etl")  # useradd etl
    now[0] = 5.0
    assert missing() == ("a", "c") and len(lookups) == 2  # believed for ttl s
    now[0] = 10.0
    assert missing() == () and len(lookups) == 4
    del users["b"]
    assert missing() == () and "bi" not in missing._seen  # a user none names: forgotten
