"""The code's layering, read from the source (every import, module-level and deferred alike): no import cycle,
no import that runs upward, the operator holding nothing of the worker but its contract, and nothing shipped
importing dev tooling. The allowed directions are the design (docs/layout.md), written here, not derived."""
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

# Which layer may import which (besides itself). devcluster is dev tooling: on top of everything.
ALLOWED = {
    "contract": set(),
    "bottom": {"contract"},
    "scorers": {"contract", "bottom"},
    "client": {"contract", "bottom"},
    "runtime": {"contract", "bottom", "scorers"},
    "integrations": {"contract", "bottom", "client", "scorers"},
    "operator": {"contract"},
    "devcluster": {"contract", "bottom", "scorers", "client", "runtime", "integrations", "operator", "worker"},
    "worker": set(),  # the package's own __init__: imports nothing
}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "rewardpool_operator":
        return "operator"
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
