"""The code's layering, read from the source (every import, module-level and deferred alike): no import cycle,
no import that runs upward, the operator's rooms (pure ones import no client; only `cluster` calls the API), the
operator holding nothing of the worker but its contract, and nothing shipped importing dev tooling. The allowed
directions are the design (docs/layout.md), written here, not derived."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"rewardpool_operator": REPO / "operator", "rewardpool_worker": REPO / "worker",
         "rewardpool_devcluster": REPO / "devcluster"}
BOTTOM = {"errors", "records", "store", "frames", "httpapi"}

# The operator's rooms. Pure: the API's types and words, a pool's decisions, the model cache's names and plans
# (and the copy pod's file copy). I/O: cluster (the only room that calls the API), the pool's controller, the
# cache's controller and agent, then handlers (kopf) and the command line on top.
OPERATOR = {
    "op.api": {"contract"},
    "op.cache": {"contract"},  # modelcache.layout, modelcache.copier
    "op.pool": {"contract", "op.api", "op.cache"},
    "op.cluster": {"contract", "op.api", "op.cache"},
    "op.controller": {"contract", "op.api", "op.cache", "op.pool", "op.cluster"},
    "op.modelcache": {"contract", "op.api", "op.cache", "op.cluster"},  # its controller and node agent
    "op.top": {"contract", "op.api", "op.cache", "op.cluster", "op.controller", "op.modelcache"},  # handlers
    "op.cli": {"contract", "op.api", "op.cache", "op.pool", "op.cluster", "op.modelcache", "op.top"},
}
PURE_ROOMS = {"op.api", "op.cache", "op.pool"}
CLIENTS = {"kubernetes_asyncio", "kubernetes", "kopf", "aiohttp", "requests", "urllib3", "httpx"}

# Which layer may import which (besides itself). devcluster is dev tooling: on top of everything.
ALLOWED = {
    "contract": set(),
    "bottom": {"contract"},
    "scorers": {"contract", "bottom"},
    "client": {"contract", "bottom"},
    "runtime": {"contract", "bottom", "scorers"},
    "integrations": {"contract", "bottom", "client", "scorers"},
    **OPERATOR,
    "devcluster": {"contract", "bottom", "scorers", "client", "runtime", "integrations", "worker", *OPERATOR},
    "worker": set(),  # the package's own __init__: imports nothing
}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "rewardpool_operator":
        room = parts[1] if len(parts) > 1 else "handlers"
        if room == "modelcache" and parts[2:3] in (["layout"], ["copier"], []):
            return "op.cache"
        return "op." + ("top" if room == "handlers" else room)
    if parts[0] == "rewardpool_devcluster":
        return "devcluster"
    if len(parts) == 1:
        return "worker"
    return "bottom" if parts[1] in BOTTOM else parts[1]


def modules() -> dict[str, Path]:
    found = {}
    for pkg, root in ROOTS.items():
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file (a name imported from a package resolves to its
    submodule when there is one)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


KNOWN = modules()
GRAPH = {m: imports(m, p, KNOWN) for m, p in KNOWN.items()}


def test_the_layout_is_what_the_readme_says():
    worker = {m for m in KNOWN if m.startswith("rewardpool_worker")}
    assert {"rewardpool_worker.contract", "rewardpool_worker.scorers.base", "rewardpool_worker.runtime.main",
            "rewardpool_worker.runtime.actor", "rewardpool_worker.runtime.slots", "rewardpool_worker.client.router",
            "rewardpool_worker.client.async_client", "rewardpool_worker.client.blocking"} <= worker
    assert not any("bench" in m or "random_clip" in m for m in worker)  # benchmarks are dev tooling


@pytest.mark.parametrize("module", sorted(KNOWN))
def test_no_import_runs_upward(module):
    bad = {t for t in GRAPH[module] if layer(t) != layer(module) and layer(t) not in ALLOWED[layer(module)]}
    assert not bad, f"{module} ({layer(module)}) imports {sorted(bad)}"


def third_party(path: Path) -> set[str]:
    """The top-level names of everything a file imports that is not of this project."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - set(ROOTS)


OPERATOR_MODULES = sorted(m for m in KNOWN if m.startswith("rewardpool_operator"))


def test_every_operator_module_stands_in_a_room():
    assert {layer(m) for m in OPERATOR_MODULES} <= set(OPERATOR)
    assert layer("rewardpool_operator.pool.plan") == "op.pool" and layer("rewardpool_operator.handlers") == "op.top"
    assert layer("rewardpool_operator.modelcache.layout") == "op.cache"
    assert layer("rewardpool_operator.modelcache.agent") == "op.modelcache"


@pytest.mark.parametrize("module", OPERATOR_MODULES)
def test_pure_rooms_import_no_client_and_only_cluster_calls_the_api(module):
    clients = third_party(KNOWN[module]) & CLIENTS
    room = layer(module)
    if room in PURE_ROOMS:
        assert not clients, f"{module} is pure ({room}) but imports {sorted(clients)}"
    if room != "op.cluster":
        assert not clients & {"kubernetes_asyncio", "kubernetes"}, f"{module} calls the API outside cluster/"
    if room not in ("op.top", "op.cli"):
        assert "kopf" not in clients, f"{module}: kopf is the handlers' (and the CLI's, which starts it)"


def test_the_room_rules_see_a_client():
    # The oracle: the cluster room's modules do import the client, and a planted import is seen.
    assert "kubernetes_asyncio" in third_party(KNOWN["rewardpool_operator.cluster.kube"])
    assert "kopf" in third_party(KNOWN["rewardpool_operator.handlers"])


def test_no_import_cycle():
    # Tarjan's strongly connected components: any with more than one module is a cycle.
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_graph_sees_imports():
    # The oracle itself: a deferred import and a relative one are both edges (else every test above passes).
    assert "rewardpool_worker.runtime.actor" in GRAPH["rewardpool_worker.runtime.main"]  # deferred
    assert "rewardpool_worker.contract" in GRAPH["rewardpool_operator.pool.builders"]
    assert layer("rewardpool_worker.client.demand") == "client" and layer("rewardpool_worker.store") == "bottom"


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return set(out.split())


HEAVY = {"torch", "ray", "mooncake", "transformers", "numpy", "rewardpool_devcluster"}


def test_the_operator_command_imports_no_worker_code_and_nothing_heavy():
    # `rewardpool operator --help`, then what the operator itself runs (its handlers, the reconciler).
    loaded = _loaded_after("from rewardpool_operator import cli\ntry:\n    cli.main(['operator', '--help'])\n"
                           "except SystemExit:\n    pass\nimport rewardpool_operator.handlers")
    assert "rewardpool_operator.handlers" in loaded and "kopf" in loaded
    assert not {m.split(".")[0] for m in loaded} & HEAVY
    assert {m for m in loaded if m.startswith("rewardpool_worker")} == {"rewardpool_worker",
                                                                         "rewardpool_worker.contract"}


def test_the_operator_image_copies_only_the_contract_of_the_worker():
    text = (REPO / "Dockerfile").read_text()
    stage = text.split("AS operator\n", 1)[1].split("\nFROM ", 1)[0]
    copied = [line.split()[1:-1] for line in stage.splitlines() if line.startswith("COPY ")]
    sources = [s for srcs in copied for s in srcs]
    assert "operator/rewardpool_operator" in sources
    assert sorted(s for s in sources if s.startswith("worker/")) == ["worker/rewardpool_worker/__init__.py",
                                                                    "worker/rewardpool_worker/contract.py"]
