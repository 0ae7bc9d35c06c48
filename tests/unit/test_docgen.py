"""The generated reference pages (docs/reference/config.md, routes.md, cli.md) stay equal
to the code they describe, and every configuration key has a description
(jm/configkeys.py, beside jm/config.py's KEYS)."""
import pytest

from jm import docgen
from jm.config import KEYS
from jm.configkeys import DESCRIPTIONS
from jm.docgen import config as configpage


def test_every_key_is_described_and_every_description_is_a_key():
    assert configpage.undocumented() == [], "describe these keys in jm/configkeys.py"
    assert configpage.unknown() == [], "jm/configkeys.py describes keys jm/config.py lacks"
    assert list(DESCRIPTIONS) == list(KEYS), "keep jm/configkeys.py in jm/config.py's order"


@pytest.mark.parametrize("name", sorted(docgen.PAGES))
def test_the_page_is_what_the_code_renders(name):
    with open(docgen.path(name), encoding="utf-8") as f:
        assert f.read() == docgen.render(name), docgen.regenerate_hint(name)


@pytest.mark.parametrize("name", sorted(docgen.PAGES))
def test_rendering_is_deterministic(name, monkeypatch):
    first = docgen.render(name)
    monkeypatch.setenv("COLUMNS", "37")   # argparse's width must not matter
    monkeypatch.setenv("JM_ADDRESS", "http://elsewhere:1")
    assert docgen.render(name) == first


def test_every_key_is_on_the_config_page():
    page = docgen.render("config")
    for key in KEYS:
        assert f"| `{key}` |" in page


def test_every_route_and_command_is_on_its_page():
    from jm.client.cli import make_parser
    from rest.openapi import document, operations
    routes = docgen.render("routes")
    for method, path in operations(document()):
        folded = any(path.startswith(p + "/") and f"`{path[3:]}` (also under" in routes
                     for p in ("/v1", "/v2"))
        assert f"| {method} | `{path}`" in routes or folded, (method, path)
    cli = docgen.render("cli")
    sub = next(a for a in make_parser()._actions if hasattr(a, "choices") and a.choices
               and a.dest == "command")
    for name in sub.choices:
        assert f"## jm {name}\n" in cli
