"""A small renderer of Helm chart templates for the tests (tests/unit/test_helm_chart.py),
where no `helm` binary installs (none is packaged for Debian or PyPI on Linux): the subset
of Go's text/template and of Helm's functions the chart in deploy/helm/jobmanager uses
(if/with/define/end, variables, pipelines, include, toYaml, nindent, quote, default,
printf, merge, dict, int/add/mul/sub, trunc, trimSuffix, sha256sum). It raises on
anything else, so a template that strays from the subset fails the test instead of
rendering wrongly."""
from __future__ import annotations

import glob
import hashlib
import os
import re
import shlex
from typing import Any

import yaml

_ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.S)


class TemplateError(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    """[("text", s) | ("act", s)], with {{- and -}} trimming applied."""
    out: list[tuple[str, str]] = []
    pos, trim_next = 0, False
    for m in _ACTION.finditer(text):
        chunk = text[pos:m.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if m.group(1):
            chunk = chunk.rstrip()
        out.append(("text", chunk))
        out.append(("act", m.group(2)))
        trim_next, pos = bool(m.group(3)), m.end()
    chunk = text[pos:]
    out.append(("text", chunk.lstrip() if trim_next else chunk))
    return out


def _parse(tokens: list, i: int, defines: dict) -> tuple[list, int, str]:
    """Nodes until an `end`/`else` (returned as the stop word) or the end."""
    nodes: list = []
    while i < len(tokens):
        kind, s = tokens[i]
        i += 1
        if kind == "text":
            nodes.append(("text", s))
            continue
        if s.startswith("/*"):
            continue
        word = s.split(None, 1)[0] if s else ""
        if word in ("end", "else"):
            return nodes, i, word
        if word in ("if", "with", "define"):
            body, i, stop = _parse(tokens, i, defines)
            other: list = []
            if stop == "else":
                other, i, stop = _parse(tokens, i, defines)
            if stop != "end":
                raise TemplateError(f"{{{{{s}}}}} has no end")
            arg = s[len(word):].strip()
            if word == "define":
                defines[shlex.split(arg)[0]] = body
            else:
                nodes.append((word, arg, body, other))
            continue
        if word in ("range", "block", "template", "break", "continue"):
            raise TemplateError(f"not in the renderer's subset: {s}")
        nodes.append(("act", s))
    return nodes, i, ""


def _truthy(v: Any) -> bool:
    return bool(v) if v is not None else False


def _goformat(fmt: str, *args: Any) -> str:
    return re.sub(r"%[dsv]", "{}", fmt).format(*args)


def _merge(dst: dict, *srcs: dict) -> dict:
    for src in srcs:
        for k, v in (src or {}).items():
            if k not in dst:
                dst[k] = v
            elif isinstance(dst[k], dict) and isinstance(v, dict):
                _merge(dst[k], v)
    return dst


def _to_yaml(v: Any) -> str:
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n")


class Renderer:
    def __init__(self, chart_dir: str, values: dict, release: str = "jm",
                 namespace: str = "default") -> None:
        with open(os.path.join(chart_dir, "Chart.yaml")) as f:
            chart = yaml.safe_load(f)
        self.root = {"Values": values, "Release": {"Name": release, "Namespace": namespace},
                     "Chart": {"Name": chart["name"], "Version": chart["version"],
                               "AppVersion": chart.get("appVersion", "")}}
        self.defines: dict = {}
        self.files: dict = {}
        for path in sorted(glob.glob(os.path.join(chart_dir, "templates", "*"))):
            with open(path) as f:
                nodes, _, stop = _parse(_tokens(f.read()), 0, self.defines)
            if stop:
                raise TemplateError(f"{path}: a stray {{{{{stop}}}}}")
            self.files[os.path.basename(path)] = nodes
        self.funcs = {
            "include": lambda name, ctx: self._run(self.defines[name], ctx, {}),
            "nindent": lambda n, s: "\n" + "\n".join(" " * n + ln if ln else ln
                                                     for ln in str(s).split("\n")),
            "indent": lambda n, s: "\n".join(" " * n + ln for ln in str(s).split("\n")),
            "toYaml": _to_yaml, "quote": lambda v: '"' + str(v).replace('"', '\\"') + '"',
            "default": lambda d, v=None: v if _truthy(v) else d,
            "trunc": lambda n, s: str(s)[:n], "trimSuffix": lambda x, s: str(s).removesuffix(x),
            "printf": _goformat, "int": lambda v: int(v), "add": lambda *a: sum(int(x) for x in a),
            "mul": lambda a, b: int(a) * int(b), "sub": lambda a, b: int(a) - int(b),
            "merge": _merge, "dict": lambda *kv: dict(zip(kv[::2], kv[1::2])),
            "sha256sum": lambda s: hashlib.sha256(str(s).encode()).hexdigest(),
            "not": lambda v: not _truthy(v),
        }

    # ---- evaluation ------------------------------------------------------------------
    def _run(self, nodes: list, dot: Any, vars_: dict) -> str:
        out = []
        for node in nodes:
            kind = node[0]
            if kind == "text":
                out.append(node[1])
            elif kind == "act":
                v = self._statement(node[1], dot, vars_)
                out.append("" if v is None else str(v))
            else:
                value = self._pipeline(node[1], dot, vars_)
                if _truthy(value):
                    out.append(self._run(node[2], value if kind == "with" else dot, vars_))
                else:
                    out.append(self._run(node[3], dot, vars_))
        return "".join(out)

    def _statement(self, s: str, dot: Any, vars_: dict) -> Any:
        m = re.match(r"(\$\w+)\s*(:?=)\s*(.*)$", s, re.S)
        if m:
            vars_[m.group(1)] = self._pipeline(m.group(3), dot, vars_)
            return None
        return self._pipeline(s, dot, vars_)

    def _pipeline(self, s: str, dot: Any, vars_: dict) -> Any:
        value, first = None, True
        for cmd in _split(s, "|"):
            args = [self._arg(a, dot, vars_) for a in _words(cmd)]
            if not first:
                args.append(value)
            value = self._call(args, cmd)
            first = False
        return value

    def _call(self, args: list, cmd: str) -> Any:
        head = args[0]
        if isinstance(head, _Func):
            if head.name not in self.funcs:
                raise TemplateError(f"unknown function {head.name} in {cmd!r}")
            return self.funcs[head.name](*args[1:])
        if len(args) != 1:
            raise TemplateError(f"not a function call: {cmd!r}")
        return head

    def _arg(self, a: str, dot: Any, vars_: dict) -> Any:
        if a.startswith("("):
            return self._pipeline(a[1:-1], dot, vars_)
        if a.startswith('"'):
            return a[1:-1].replace('\\"', '"')
        if re.fullmatch(r"-?\d+", a):
            return int(a)
        if a.startswith("$"):
            name, _, path = a.partition(".")
            return _field(vars_[name] if name != "$" else self.root, path)
        if a == ".":
            return dot
        if a.startswith("."):
            return _field(dot, a[1:])
        return _Func(a)

    def render(self) -> dict[str, str]:
        return {name: self._run(nodes, self.root, {}) for name, nodes in self.files.items()
                if not name.startswith("_")}


class _Func:
    def __init__(self, name: str) -> None:
        self.name = name


def _field(v: Any, path: str) -> Any:
    for part in filter(None, path.split(".")):
        if not isinstance(v, dict):
            raise TemplateError(f"no field {part} in {v!r}")
        v = v.get(part)
    return v


def _split(s: str, sep: str) -> list[str]:
    """Split at `sep` outside quotes and parentheses."""
    out, depth, quote, cur = [], 0, False, ""
    for ch in s:
        if ch == '"':
            quote = not quote
        elif not quote and ch == "(":
            depth += 1
        elif not quote and ch == ")":
            depth -= 1
        if ch == sep and not quote and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def _words(cmd: str) -> list[str]:
    return [w for w in _split(cmd.replace("\t", " "), " ") if w]


def render_chart(chart_dir: str, overrides: dict | None = None, **kw: Any) -> list[dict]:
    """Every object the chart renders with its values.yaml (and `overrides` merged over
    them), parsed."""
    with open(os.path.join(chart_dir, "values.yaml")) as f:
        values = yaml.safe_load(f)
    for k, v in (overrides or {}).items():
        values[k] = v
    docs = []
    for name, text in Renderer(chart_dir, values, **kw).render().items():
        if name.endswith((".yaml", ".yml")):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs
