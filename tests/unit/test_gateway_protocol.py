"""The peer's gateway answers every question rest/ may ask (rest/gateway.py): each role
protocol's methods exist on the object that plays the role, with the same parameters, and
a protocol's nested roles are played by attributes of the same name."""
from __future__ import annotations

import inspect
import typing

import pytest

from jm.cluster.api.gateway import PeerGateway
from rest import gateway as protocols


def _is_protocol(tp) -> bool:
    return isinstance(tp, type) and getattr(tp, "_is_protocol", False)


def _own_members(proto: type) -> dict:
    return {n: v for n, v in vars(proto).items()
            if not n.startswith("_") and callable(v)}


def _pairs(proto: type, impl: type, path: str):
    """(path, protocol, implementation) for `proto` and every role nested in it."""
    yield path, proto, impl
    wanted = typing.get_type_hints(proto)
    have = typing.get_type_hints(impl)
    for name, tp in wanted.items():
        if _is_protocol(tp):
            assert name in have, f"{impl.__name__} has no role {name!r} ({path}.{name})"
            yield from _pairs(tp, have[name], f"{path}.{name}")


PAIRS = list(_pairs(protocols.Gateway, PeerGateway, "gw"))


def test_every_role_protocol_is_reached():
    named = {p for _, p, _ in PAIRS}
    declared = {v for v in vars(protocols).values() if _is_protocol(v) and v is not typing.Protocol}
    assert declared - named == set(), "a protocol of rest/gateway.py no role plays"


@pytest.mark.parametrize("path,proto,impl", PAIRS, ids=[p for p, _, _ in PAIRS])
def test_role_has_the_protocols_methods(path, proto, impl):
    for name, want in _own_members(proto).items():
        got = getattr(impl, name, None)
        assert callable(got), f"{path}: {impl.__name__} has no {name}()"
        wp = [p for p in inspect.signature(want).parameters if p != "self"]
        gp = [p for p in inspect.signature(got).parameters if p != "self"]  # (or static)
        assert gp[:len(wp)] == wp, f"{path}.{name}: {gp} where the protocol says {wp}"
        assert inspect.iscoroutinefunction(want) == inspect.iscoroutinefunction(got), \
            f"{path}.{name}: async in one and not the other"


@pytest.mark.parametrize("path,proto,impl", PAIRS, ids=[p for p, _, _ in PAIRS])
def test_role_sets_the_protocols_values(path, proto, impl):
    hints = typing.get_type_hints(proto)
    source = inspect.getsource(impl)
    for name, tp in hints.items():
        if _is_protocol(tp):
            continue
        assert name in typing.get_type_hints(impl) or f"self.{name}" in source, \
            f"{path}: {impl.__name__} never sets {name}"
