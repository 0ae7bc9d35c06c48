"""Every relative link in README.md and docs/**/*.md points to a file that exists and,
with a #fragment, to a heading of that file (GitHub's anchors)."""
import glob
import os
import re

import pytest

from tests.helpers import ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _pages() -> list[str]:
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                  glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                            recursive=True))


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as '-', and a
    '-N' suffix for repeats."""
    out, seen = set(), {}
    for title in HEADING.findall(FENCE.sub("", text)):
        title = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(text: str) -> list[str]:
    return [a or b for a, b in LINK.findall(FENCE.sub("", text))]


def test_anchors_follow_github():
    assert anchors("# Livy batches (Airflow)\n## The `jm` CLI\n## A\n## A\n") == {
        "livy-batches-airflow", "the-jm-cli", "a", "a-1"}


@pytest.mark.parametrize("page", _pages())
def test_relative_links_resolve(page):
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    bad = []
    for link in links(text):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, fragment = link.partition("#")
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target)) \
            if target else os.path.join(ROOT, page)
        if not os.path.exists(path):
            bad.append(f"{link}: no such file")
        elif fragment and path.endswith(".md") and \
                fragment not in anchors(open(path, encoding="utf-8").read()):
            bad.append(f"{link}: no such heading")
    assert not bad, f"{page}: " + "; ".join(bad)


def test_the_readme_stays_a_front_page_with_the_two_commands():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert len(text.splitlines()) <= 250, "README.md is the front page: move details to docs/"
    assert "bin/quickstart.sh " in text and "\nbin/test.sh " in text
