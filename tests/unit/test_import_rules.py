"""The dependency directions of docs/architecture.md, checked on every module's imports
(top-level and inside functions), following our own modules transitively:

* raft/ imports nothing of ours outside raft/;
* jm/policy/ is pure: no aiohttp, pysyncobj, pyspark, asyncio or clock (time, datetime),
  and nothing of the peer's services or the job runtime; so is jm/wire/ (wire formats);
* jm/client/ is the standard library only (no server code, no third-party package but
  argcomplete, jm-client's one dependency: shell completion), plus jm/policy/ (pure; what
  a policy module imports is checked the same way); the one exception is the SQLAlchemy
  dialect (jm/client/sqla/), which may import sqlalchemy (and its Superset engine spec,
  superset) and which no other client module imports;
* rest/ imports nothing of ours but its gateway protocols (rest/gateway.py), the
  vocabulary it shares with the peer (jm/api.py, the standard library only) and the JSON
  codec they share (jm/fastjson.py: orjson and the standard library only);
* jm/cluster/ imports nothing of rest/: the peer is assembled above both, in jm/peer/ (the
  process), which no module below imports;
* the rooms of jm/cluster/ and of jm/policy/ (spark, jobs, sql and members, api) import only
  rooms below them, and their packages' own modules no room;
* pyspark is imported only by the job runtime (jm/runtime/);
* the child processes' code (jm/runtime's zygote, job process, SQL worker, Livy REPL) imports
  no asyncio, aiohttp or pysyncobj and nothing of the peer (jm/cluster, raft.node, rest).
"""
import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OURS = ("jm", "raft", "rest", "chaos")


def _modules() -> dict[str, str]:
    out = {}
    for top in OURS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


MODULES = _modules()


def imports_of(module: str) -> set[str]:
    """Absolute names imported anywhere in the module (`from a import b` gives a.b if
    that is a module of ours, else a)."""
    tree = ast.parse(open(MODULES[module]).read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names
                       if f"{node.module}.{a.name}" in MODULES)
    return out


def closure(module: str) -> set[str]:
    """Everything the module imports, through our own modules."""
    seen, todo, out = set(), [module], set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for name in imports_of(m):
            out.add(name)
            if name in MODULES:
                todo.append(name)
    return out


def _top(name: str) -> str:
    return name.split(".")[0]


def _under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _in(pkg: str) -> list[str]:
    return sorted(m for m in MODULES if _under(m, [pkg]))


def test_the_packages_are_there():
    for pkg in ("raft", "rest", "jm.policy", "jm.wire", "jm.client", "jm.cluster",
                "jm.runtime"):
        assert len(_in(pkg)) >= 2, pkg


@pytest.mark.parametrize("module", _in("raft"))
def test_raft_imports_nothing_of_ours_outside_raft(module):
    bad = {n for n in closure(module) if _top(n) in OURS and _top(n) != "raft"}
    assert not bad, f"{module} imports {sorted(bad)}"


POLICY_FORBIDDEN = ("aiohttp", "pysyncobj", "pyspark", "asyncio", "time", "datetime",
                    "jm.cluster", "jm.runtime", "jm.client", "jm.local", "raft.node", "rest")


@pytest.mark.parametrize("module", _in("jm.policy") + _in("jm.wire"))
def test_policy_is_pure(module):
    bad = {n for n in closure(module) if _under(n, POLICY_FORBIDDEN)}
    assert not bad, f"{module} imports {sorted(bad)}"


# the SQLAlchemy dialect: an optional extra (jm-cluster[sqlalchemy]) that SQLAlchemy itself
# loads through its entry point, and its Superset engine spec, which only Superset loads
# (its entry point, in Superset's environment); the light client never imports them
CLIENT_EXTRAS = {"jm.client.sqla": ("sqlalchemy",), "jm.client.sqla.types": ("sqlalchemy",),
                 "jm.client.sqla.superset": ("sqlalchemy", "superset")}
CLIENT_DEPENDENCIES = ("argcomplete",)  # clients/jm-client/pyproject.toml's dependencies


@pytest.mark.parametrize("module", _in("jm.client"))
def test_client_is_standard_library_only(module):
    bad = {n for n in closure(module)
           if not _under(n, ["jm.client", "jm.policy", *CLIENT_DEPENDENCIES,
                             *CLIENT_EXTRAS.get(module, ())])
           and _top(n) not in sys.stdlib_module_names}
    assert not bad, f"{module} imports {sorted(bad)}"
    if module not in CLIENT_EXTRAS:
        assert not set(CLIENT_EXTRAS) & closure(module), f"{module} imports the dialect"


@pytest.mark.parametrize("module", _in("rest"))
def test_rest_imports_only_its_gateway_protocol(module):
    bad = {n for n in closure(module)
           if _top(n) in OURS and not _under(n, ["rest", "jm.api", "jm.fastjson"])}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_json_codec_imports_orjson_and_the_standard_library_only():
    bad = {n for n in closure("jm.fastjson")
           if n != "jm.fastjson" and _top(n) not in ("orjson", *sys.stdlib_module_names)}
    assert not bad, f"jm.fastjson imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_from_another_module(module):
    """A name with a leading underscore is its module's own: another module that needs it
    asks for a public name (bench/house.py counts these; there were 35)."""
    tree = ast.parse(open(MODULES[module]).read())
    bad = [f"{n.module}.{a.name}" for n in ast.walk(tree)
           if isinstance(n, ast.ImportFrom) and n.level == 0 and _top(n.module or "") in OURS
           for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, f"{module} imports {bad}"


# the rooms of jm/cluster and of jm/policy, low to high (sql and members side by side:
# neither imports the other); a package's own modules (jm/cluster/*.py: batching, waits,
# TLS, metrics, blobs...) import none of its rooms
ROOM_RANKS = {"spark": 0, "jobs": 1, "sql": 2, "members": 2, "api": 3}
HOUSES = ("jm.cluster", "jm.policy")


def _room(module: str, house: str):
    """The room of `module` in `house`: "" for the house's own modules, None outside."""
    if not _under(module, [house]) or module == house:
        return None
    part = module[len(house) + 1:].split(".")[0]
    return part if part in ROOM_RANKS else ""


@pytest.mark.parametrize("house", HOUSES)
def test_the_rooms_are_there(house):
    assert {r for m in _in(house) if (r := _room(m, house))} == set(ROOM_RANKS)


@pytest.mark.parametrize("module", [m for h in HOUSES for m in _in(h) if m != h])
def test_a_room_imports_no_room_above_or_beside_it(module):
    house = next(h for h in HOUSES if _under(module, [h]))
    mine = _room(module, house)
    rank = ROOM_RANKS.get(mine, -1)
    bad = sorted(n for n in closure(module) if _room(n, house)
                 and _room(n, house) != mine and ROOM_RANKS[_room(n, house)] >= rank)
    assert not bad, f"{module} ({mine or 'shared'}) imports {bad}"


# what runs in a peer's child processes (`python -m` each, or forked from the zygote): a
# fork of a process with an event loop or a Raft tick thread is not safe, and a child that
# imported the peer's services would drag Raft and the REST app into every job process
CHILD_MAINS = ("jm.runtime.zygote", "jm.runtime.jobexec", "jm.runtime.jobrun",
               "jm.runtime.classarchive",
               "jm.runtime.sqlworker", "jm.runtime.livyrepl", "jm.runtime.pdeathsig")
CHILD_FORBIDDEN = ("asyncio", "aiohttp", "pysyncobj", "jm.cluster", "jm.peer", "raft.node",
                   "rest")


@pytest.mark.parametrize("module", CHILD_MAINS)
def test_child_process_code_imports_no_event_loop_and_nothing_of_the_peer(module):
    bad = {n for n in closure(module) if _under(n, CHILD_FORBIDDEN)}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_every_entry_point_of_the_runtime_is_a_child_s():
    """A new `python -m jm.runtime.x` is held to the rule above (or said to be no child's)."""
    def runs_as_main(module: str) -> bool:  # a module-level `if __name__ == "__main__":`
        return any(isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                   and getattr(n.test.left, "id", None) == "__name__"
                   for n in ast.parse(open(MODULES[module]).read()).body)
    mains = {m for m in _in("jm.runtime") if runs_as_main(m)}
    assert "jm.runtime.zygote" in mains
    assert mains <= set(CHILD_MAINS), sorted(mains - set(CHILD_MAINS))


def test_the_shared_vocabulary_is_standard_library_only():
    bad = {n for n in closure("jm.api") if _top(n) not in sys.stdlib_module_names}
    assert not bad, f"jm.api imports {sorted(bad)}"




@pytest.mark.parametrize("module", _in("jm.cluster"))
def test_the_peer_s_parts_import_nothing_of_rest(module):
    bad = {n for n in imports_of(module) if _top(n) == "rest"}
    assert not bad, f"{module} imports {sorted(bad)} (the shared words are in jm/api.py)"


@pytest.mark.parametrize("module", [m for m in MODULES if not _under(m, ["jm.peer", "jm.testing"])
                                    and _top(m) in ("jm", "raft", "rest")])
def test_nothing_below_imports_the_process_that_assembles_a_peer(module):
    bad = {n for n in imports_of(module) if _under(n, ["jm.peer"])}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not _under(m, ["jm.runtime"])))
def test_pyspark_only_in_the_job_runtime(module):
    bad = {n for n in imports_of(module) if _under(n, ["pyspark"])}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_checker_sees_what_it_must():
    """Imports through our own modules count (peer -> raft.node -> pysyncobj), and so do
    imports inside functions (Livy's runner imports its process's client only to start one)."""
    assert "pysyncobj" in closure("jm.peer.peer")
    assert "pysyncobj" not in imports_of("jm.peer.peer")
    assert "jm.runtime.livyclient" in imports_of("jm.cluster.sql.livyrunner")
    assert _under("aiohttp.web", POLICY_FORBIDDEN) and not _under("aiohttpx", ["aiohttp"])


def test_the_light_client_wheel_holds_every_module_the_client_imports():
    """jm/local/clientdist.py's FILES (what bin/build-client.sh packs) cover the client's
    import closure: a client module importing a policy module not packed fails at the
    user's first `jm` command (tests/integration/test_light_client.py, in the slow half)."""
    import glob
    from jm.local.clientdist import FILES, ROOT
    packed = {os.path.relpath(p, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
              for pattern in FILES for p in glob.glob(os.path.join(ROOT, pattern))}
    needed = {n for m in _in("jm.client") if m not in CLIENT_EXTRAS for n in closure(m)
              if _top(n) in OURS}
    assert needed <= packed, f"not in the client wheel: {sorted(needed - packed)}"
