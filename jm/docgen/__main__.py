"""python -m jm.docgen [NAME | --check]: see jm/docgen/__init__.py."""
from __future__ import annotations

import sys

from jm.docgen import PAGES, path, regenerate_hint, render, stale


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        bad = stale()
        for name in bad:
            print(f"{PAGES[name][0]} is stale: {regenerate_hint(name)}", file=sys.stderr)
        return 1 if bad else 0
    if len(argv) == 1 and argv[0] in PAGES:
        sys.stdout.write(render(argv[0]))
        return 0
    if argv:
        print(f"usage: python -m jm.docgen [{'|'.join(PAGES)}|--check]", file=sys.stderr)
        return 2
    for name in PAGES:
        with open(path(name), "w", encoding="utf-8") as f:
            f.write(render(name))
        print(f"wrote {PAGES[name][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
