"""rest/openapi.py describes exactly the routes the router serves."""
import pathlib
import re

from rest import openapi
from rest.app import make_app

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _routes() -> set:
    class Gateway:  # (make_app only stores it)
        pass
    app = make_app(Gateway(), 1 << 20)
    out = set()
    for route in app.router.routes():
        info = route.resource.get_info()
        path = info.get("path") or info.get("formatter")
        if route.method != "HEAD" and path:  # (static files: a prefix, not a route)
            out.add((route.method, path))
    return out


def test_every_route_is_described_and_every_description_is_a_route():
    described, served = openapi.operations(openapi.document()), _routes()
    assert served - described == set(), "describe them in rest/openapi.py"
    assert described - served == set(), "rest/openapi.py describes routes that do not exist"
    assert len(served) > 80


def test_the_description_is_valid_openapi_with_every_path_parameter():
    from openapi_spec_validator import validate
    doc = openapi.document()
    validate(doc)
    for path, ops in doc["paths"].items():
        for op in ops.values():
            declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
            assert declared == set(re.findall(r"{(\w+)}", path)), path
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert doc["info"]["version"] == version.group(1)
