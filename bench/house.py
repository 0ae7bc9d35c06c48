"""The shape of the code, before and after a refactoring, from the source of jm, raft and
rest with the stdlib `ast` only (nothing of theirs is imported): the size of PeerGateway,
SqlGateway and RaftHost with their repository bases, of the Gateway protocols, of Peer's
attributes and the GatewayServices(...) call; private names imported across modules;
pysyncobj's mangled privates (SyncObj's `__x` seen from outside) and the classes built on
pysyncobj's;
spec[...] and conf[...] reads; the import graph's cycles and arrows up the layers, which
are, low to high (an import from a lower layer into a higher one is an arrow up):

  0 raft   1 jm.policy, jm.wire, jm.config* (config parsing, the `jm` package)
  2 jm.runtime   3 jm.cluster   4 rest
  5 jm.peer (the process that assembles a peer), jm.client, jm.local, jm.docgen,
    jm.testing (tools on top: they may import anything)

    .venv/bin/python bench/house.py
    .venv/bin/python bench/house.py --out /tmp/house-before.json
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.common import report  # noqa: E402

PACKAGES = ("jm", "raft", "rest")
LAYERS = {"raft": 0, "jm": 1, "jm.policy": 1, "jm.wire": 1, "jm.config": 1,
          "jm.configkeys": 1, "jm.configpeers": 1, "jm.configvalues": 1, "jm.runtime": 2,
          "jm.cluster": 3, "rest": 4, "jm.client": 5, "jm.local": 5, "jm.docgen": 5,
          "jm.testing": 5, "jm.peer": 5}
MANGLED = re.compile(r"_[A-Z]\w*__\w+")
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
KINDS = ("top", "function", "type-checking")


def load() -> dict[str, dict]:
    """Every module of the packages: dotted name -> {path, tree, lines, pkg (an __init__)};
    bindings() and classes_of() cache their answers in it too."""
    mods = {}
    for pkg in PACKAGES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, pkg)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(f for f in filenames if f.endswith(".py")):
                rel = os.path.relpath(os.path.join(dirpath, fn), ROOT)
                parts = rel[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                with open(os.path.join(ROOT, rel)) as f:
                    text = f.read()
                mods[".".join(parts)] = {"path": rel, "tree": ast.parse(text, rel),
                                         "lines": text.count("\n"), "pkg": fn == "__init__.py"}
    return mods


def from_base(mods: dict, mod: str, node: ast.ImportFrom) -> str:
    """The module a `from X import ...` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = mod.split(".") if mods[mod]["pkg"] else mod.split(".")[:-1]
    parts = parts[:len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def import_nodes(tree: ast.AST):
    """(import node, kind) for every import: kind 'top' (run on import, class bodies and
    try/if included), 'function' (deferred) or 'type-checking' (if TYPE_CHECKING)."""
    stack = [(tree, "top")]
    while stack:
        node, kind = stack.pop()
        for child in ast.iter_child_nodes(node):
            k = kind
            if isinstance(child, FUNCS + (ast.Lambda,)):
                k = "function"
            elif (isinstance(child, ast.If) and kind == "top"
                  and "TYPE_CHECKING" in ast.dump(child.test)):
                k = "type-checking"
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, k
            stack.append((child, k))


def bindings(mods: dict, mod: str) -> dict[str, tuple]:
    """Names a module binds by import (not in functions): name -> ('mod', dotted) or
    ('name', module, name), the module maybe outside the repository (pysyncobj)."""
    if "bind" not in mods[mod]:
        out = mods[mod]["bind"] = {}
        for node, kind in import_nodes(mods[mod]["tree"]):
            if kind != "function" and isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = (
                        "mod", a.name if a.asname else a.name.split(".")[0])
            elif kind != "function":
                base = from_base(mods, mod, node)
                for a in node.names:
                    full = base + "." + a.name
                    out[a.asname or a.name] = (("mod", full) if full in mods
                                               else ("name", base, a.name))
    return mods[mod]["bind"]


def classes_of(mods: dict, mod: str) -> dict[str, ast.ClassDef]:
    """The module's top-level classes by name."""
    if "classes" not in mods[mod]:
        mods[mod]["classes"] = {n.name: n for n in mods[mod]["tree"].body
                                if isinstance(n, ast.ClassDef)}
    return mods[mod]["classes"]


def resolve(mods: dict, mod: str, expr: "ast.expr | str", depth: int = 0):
    """A name or `module.Name` (a base class) seen in `mod` -> ('repo', module, class),
    ('ext', dotted) or None (a builtin, say); re-exports followed."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        b = bindings(mods, mod).get(expr.value.id)
        if b and b[0] == "mod":
            return resolve(mods, b[1], expr.attr, depth + 1)
        if b and b[1] not in mods:  # from pysyncobj import journal as pj; pj.FileJournal
            return ("ext", f"{b[1]}.{b[2]}.{expr.attr}")
        return None
    name = expr.id if isinstance(expr, ast.Name) else expr
    if not isinstance(name, str):
        return None
    if mod in mods and name in classes_of(mods, mod):
        return ("repo", mod, name)
    if mod not in mods or depth > 10:
        return ("ext", mod + "." + name)
    b = bindings(mods, mod).get(name)
    return resolve(mods, b[1], b[2], depth + 1) if b and b[0] == "name" else None


def find_class(mods: dict, name: str, mod: str) -> "tuple | None":
    """The class `name` of module `mod`, or else of the first module defining one."""
    hits = [("repo", m, name) for m in [mod] + sorted(mods)
            if m in mods and name in classes_of(mods, m)]
    return hits[0] if hits else None


def mro(mods: dict, key: tuple) -> list:
    """The C3 linearization of a repository class, a base outside the repository counted
    as one entry (its own bases and `object` left out)."""
    if key[0] == "ext":
        return [key]
    bases = [b for b in (resolve(mods, key[1], e)
                         for e in classes_of(mods, key[1])[key[2]].bases) if b]
    seqs, out = [mro(mods, b) for b in bases] + [bases], [key]
    while any(seqs):
        seqs = [s for s in seqs if s]
        head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), seqs[0][0])
        out.append(head)
        seqs = [[x for x in s if x != head] for s in seqs]
    return out


def methods(mods: dict, key: tuple) -> int:
    """Methods (def or async def) directly in a class's body."""
    return sum(isinstance(n, FUNCS) for n in classes_of(mods, key[1])[key[2]].body)


def class_shape(mods: dict, name: str, mod: str) -> dict:
    """Classes, files and methods of a class and its repository bases."""
    key = find_class(mods, name, mod)
    if not key:
        return {"found": False}
    line = mro(mods, key)
    repo = [k for k in line if k[0] == "repo"]
    return {"classes": len(repo), "files": len({mods[k[1]]["path"] for k in repo}),
            "methods": sum(methods(mods, k) for k in repo),
            "per-class": {f"{k[1]}.{k[2]}": methods(mods, k) for k in repo},
            "external-bases": [k[1] for k in line if k[0] == "ext"]}


def roles(mods: dict, name: str, mod: str) -> dict:
    """A class made of role objects (a dataclass of annotated fields): each field whose
    annotation names a repository class -> that class's methods (its own and its bases')."""
    key = find_class(mods, name, mod)
    if not key:
        return {"found": False}
    out = {}
    for node in classes_of(mods, key[1])[key[2]].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = node.annotation
            ann = ann.value if isinstance(ann, ast.Constant) else getattr(ann, "id", None)
            role = resolve(mods, key[1], ast.Name(ann)) if isinstance(ann, str) else None
            if role and role[0] == "repo":
                out[node.target.id] = sum(methods(mods, k) for k in mro(mods, role)
                                          if k[0] == "repo")
    return {"roles": len(out), "methods": sum(out.values()),
            "largest": max(out.values(), default=0), "per-role": out}


def parts(mods: dict, name: str, mod: str) -> dict:
    """A class made of role objects its constructor builds (`self.x = Role(...)`): each
    such attribute -> that class's methods (its own and its bases')."""
    key = find_class(mods, name, mod)
    if not key:
        return {"found": False}
    out = {}
    init = next((n for n in classes_of(mods, key[1])[key[2]].body
                 if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    for node in ast.walk(init) if init is not None else ():
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)):
            role = resolve(mods, key[1], node.value.func)
            if role and role[0] == "repo":
                out[node.targets[0].attr] = sum(methods(mods, k) for k in mro(mods, role)
                                                if k[0] == "repo")
    return {"parts": len(out), "methods": sum(out.values()),
            "largest": max(out.values(), default=0), "per-part": out}


def protocols(mods: dict, mod: str) -> dict:
    """Every Protocol class of a module -> its methods."""
    return {n: methods(mods, ("repo", mod, n)) for n, c in classes_of(mods, mod).items()
            if any(getattr(b, "id", None) == "Protocol" for b in c.bases)}


def peer_attributes(mods: dict) -> int:
    """Distinct `self.X` assigned (plain, annotated, augmented, unpacked) in Peer's methods."""
    key = find_class(mods, "Peer", "jm.peer.peer")
    names = set()
    for node in ast.walk(classes_of(mods, key[1])[key[2]]):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        names |= {x.attr for t in targets for x in ast.walk(t) if isinstance(x, ast.Attribute)
                  and isinstance(x.value, ast.Name) and x.value.id == "self"}
    return len(names)


def calls_to(mods: dict, name: str) -> list[dict]:
    """Every call `name(...)` or `x.name(...)`: where, and its argument counts."""
    return [{"at": f"{m['path']}:{n.lineno}", "positional": len(n.args),
             "keyword": len(n.keywords)}
            for m in mods.values() for n in ast.walk(m["tree"]) if isinstance(n, ast.Call)
            and name in (getattr(n.func, "id", None), getattr(n.func, "attr", None))]


def private_imports(mods: dict) -> dict:
    """`from <repo module> import _name` (one underscore) in another module."""
    found = []
    for mod, m in mods.items():
        for node, kind in import_nodes(m["tree"]):
            base = from_base(mods, mod, node) if isinstance(node, ast.ImportFrom) else ""
            if base.split(".")[0] in PACKAGES and base != mod:
                found += [f"{mod} <- {base}.{a.name} ({kind})" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return {"count": len(found), "imports": sorted(found)}


def pysyncobj_privates(mods: dict) -> dict:
    """Mangled privates (SyncObj's `__raftState` seen from outside) as attributes, names,
    defs (overrides) or whole strings (getattr); and the plain privates imported from
    pysyncobj."""
    refs, files, plain = [], {}, set()
    for m in mods.values():
        for n in ast.walk(m["tree"]):
            word = (n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name)
                    else n.name if isinstance(n, FUNCS) else
                    n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else "")
            if MANGLED.fullmatch(word):
                refs.append(word)
                files[m["path"]] = files.get(m["path"], 0) + 1
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("pysyncobj"):
                plain |= {a.name for a in n.names if a.name.startswith("_")}
    return {"references": len(refs), "distinct": len(set(refs)), "files": len(files),
            "by-file": dict(sorted(files.items())),
            "classes": sorted({r.split("__")[0][1:] for r in refs}),
            "private-imports": sorted(plain)}


def pysyncobj_subclasses(mods: dict) -> dict:
    """Repository classes with a pysyncobj class in their MRO; an MRO's length counts the
    class, its repository bases and the pysyncobj classes (not `object`)."""
    out = {}
    for mod in mods:
        for name in classes_of(mods, mod):
            line = mro(mods, ("repo", mod, name))
            if any(k[0] == "ext" and k[1].startswith("pysyncobj") for k in line):
                out[f"{mod}.{name}"] = [k[2] if k[0] == "repo" else k[1] for k in line]
    return {"count": len(out), "longest-mro": max(map(len, out.values()), default=0),
            "mro": out}


def reads(mods: dict, word: str) -> dict:
    """`word["k"]` (read, string key) and `word.get(...)`, `word` a Name or an attribute
    (`self.conf`); reads by other keys (`conf[KEY]`) counted apart."""
    def named(e):
        return isinstance(e, ast.Name) and e.id == word or (
            isinstance(e, ast.Attribute) and e.attr == word)
    subs = other = gets = 0
    files, keys = set(), set()
    for m in mods.values():
        for n in ast.walk(m["tree"]):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and named(n.value):
                key = n.slice.value if isinstance(n.slice, ast.Constant) else None
                subs, other = (subs + 1, other) if isinstance(key, str) else (subs, other + 1)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and n.func.attr == "get" and named(n.func.value)):
                gets += 1
                key = n.args[0].value if n.args and isinstance(n.args[0], ast.Constant) else None
            else:
                continue
            files.add(m["path"])
            keys.add(key)
    return {"total": subs + gets, "subscripts": subs, "gets": gets,
            "subscripts-other-keys": other, "distinct-keys": len(keys - {None}),
            "files": len(files)}


def layer(mod: str) -> int:
    """The layer of the longest matching prefix in LAYERS."""
    return LAYERS[max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)]


def import_graph(mods: dict) -> dict:
    """Edges between repository modules by kind: `import a.b` and `from a import b` go to
    the module a.b when it is one, else to its longest prefix that is."""
    edges = {k: set() for k in KINDS}
    for mod, m in mods.items():
        for node, kind in import_nodes(m["tree"]):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [from_base(mods, mod, node) + "." + a.name for a in node.names])
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    edges[kind].add((mod, t))
    return edges


def tarjan(nodes: list[str], edges: set) -> list[list[str]]:
    """Strongly connected components (Tarjan's, iterative)."""
    succ = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, on, stack, comps = {}, {}, set(), [], []
    for root in nodes:
        work = [] if root in index else [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while not comp or comp[-1] != v:
                    comp.append(stack.pop())
                    on.discard(comp[-1])
                comps.append(sorted(comp))
            if work:  # back in the parent
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
    return comps


def imports(mods: dict) -> dict:
    """Edge counts, the cycles among top-level imports, and the arrows up the layers."""
    edges = import_graph(mods)
    cycles = [c for c in tarjan(sorted(mods), edges["top"]) if len(c) > 1]
    up = {k: sorted(f"{a} -> {b}" for a, b in edges[k] if layer(a) < layer(b)) for k in KINDS}
    return {"edges": {k: len(v) for k, v in edges.items()},
            "cycles": len(cycles), "cycle-members": cycles,
            "arrows-up": sum(map(len, up.values())),
            "arrows-up-by-kind": {k: len(v) for k, v in up.items()},
            "arrows-up-edges": up}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    mods = load()
    out = {
        "peer-gateway": class_shape(mods, "PeerGateway", "jm.cluster.api.gateway"),
        "peer-gateway-roles": roles(mods, "PeerGateway", "jm.cluster.api.gateway"),
        "gateway-protocol-methods": protocols(mods, "rest.gateway"),
        "sql-gateway": class_shape(mods, "SqlGateway", "jm.cluster.sql.sqlgateway"),
        "sql-gateway-parts": parts(mods, "SqlGateway", "jm.cluster.sql.sqlgateway"),
        "raft-host": class_shape(mods, "RaftHost", "raft.node"),
        "raft-host-parts": parts(mods, "RaftHost", "raft.node"),
        "peer-attributes": peer_attributes(mods),
        "gateway-services-args": calls_to(mods, "GatewayServices"),
        "private-imports-across-modules": private_imports(mods),
        "pysyncobj-privates": pysyncobj_privates(mods),
        "pysyncobj-subclasses": pysyncobj_subclasses(mods),
        "spec-reads": reads(mods, "spec"),
        "conf-reads": reads(mods, "conf"),
        "imports": imports(mods),
        "modules": len(mods),
        "lines": sum(m["lines"] for m in mods.values()),
    }
    report(out, args.out)


if __name__ == "__main__":
    main()
