"""The generated reference pages in docs/reference/, each written from the code it
describes, so that neither can drift (tests/unit/test_docgen.py compares them):

* config.md: the configuration keys (jm/config.py `KEYS`, jm/configkeys.py descriptions);
* routes.md: every REST route (rest/openapi.py, served as GET /openapi.json);
* cli.md: the `jm` command line (jm/client/cli.py's argument parser).

    python -m jm.docgen                 # rewrite all three
    python -m jm.docgen config          # print one (config, routes or cli)
    python -m jm.docgen --check         # exit 1 naming every page that differs

Each page is a pure function of the code: no clock, no environment, no terminal width.
"""
from __future__ import annotations

import os
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config() -> str:
    from jm.docgen.config import render
    return render()


def _routes() -> str:
    from jm.docgen.routes import render
    return render()


def _cli() -> str:
    from jm.docgen.cli import render
    return render()


# name -> (path in the repository, renderer)
PAGES: dict[str, tuple[str, Callable[[], str]]] = {
    "config": ("docs/reference/config.md", _config),
    "routes": ("docs/reference/routes.md", _routes),
    "cli": ("docs/reference/cli.md", _cli),
}


def render(name: str) -> str:
    return PAGES[name][1]()


def path(name: str) -> str:
    return os.path.join(ROOT, PAGES[name][0])


def stale() -> list[str]:
    """The pages whose file is not what the code renders."""
    out = []
    for name in PAGES:
        try:
            with open(path(name), encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != render(name):
            out.append(name)
    return out


def regenerate_hint(name: str) -> str:
    return f"regenerate: python -m jm.docgen {name} > {PAGES[name][0]}"
