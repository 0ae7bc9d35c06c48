"""docs/config.md, README's Configuration table and jm.config.KEYS stay equal."""
import os

from jm import configdoc
from tests.helpers import ROOT


def _readme():
    return open(os.path.join(ROOT, "README.md")).read()


def test_every_key_is_documented_and_every_documented_key_exists():
    readme = _readme()
    assert configdoc.undocumented(readme) == []
    assert configdoc.unknown(readme) == []


def test_docs_config_md_is_generated_from_them():
    with open(os.path.join(ROOT, "docs", "config.md")) as f:
        assert f.read() == configdoc.generate(_readme()), \
            "regenerate: python -m jm.configdoc > docs/config.md"
