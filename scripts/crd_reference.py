"""The CRD field reference (docs/reference/*.md), generated from crds/: every field with its type, default,
bounds and description, and the CEL rules with their messages. `python scripts/crd_reference.py` rewrites
it; `--check` exits 1 when the pages are not what crds/ says (tests/unit/test_docs.py runs it)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))
OUT = ROOT / "docs" / "reference"
# Below these, the schema is Kubernetes' own (a PodSpec subset): listed to this depth, described by Kubernetes.
KUBERNETES_OWN = ("spec.podTemplate.spec.",)
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
          "maxItems", "minProperties", "maxProperties", "pattern", "format")


def _type(node: dict) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    t = node.get("type", "any" if node.get("x-kubernetes-preserve-unknown-fields") else "object")
    if t == "array":
        return f"[]{_type(node.get('items', {}))}"
    if t == "object" and "additionalProperties" in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    return t


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _constraints(node: dict) -> str:
    parts = [f"{k} `{node[k]}`" for k in BOUNDS if k in node]
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    return _cell("; ".join(parts))


def _walk(node: dict, path: str, required: bool, rows: list, rules: list) -> None:
    own = any(path.startswith(p) for p in KUBERNETES_OWN)
    default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
    desc = node.get("description", "(Kubernetes' own field)" if own else "")
    rows.append(f"| `{path}` | {_cell(_type(node))} | {'yes' if required else ''} | {_cell(default)} | "
                f"{_constraints(node)} | {_cell(desc)} |")
    for r in node.get("x-kubernetes-validations", []):
        msg = r.get("message") or r.get("messageExpression", "")
        rules.append(f"| `{path}` | {_cell(msg)} | `{_cell(r['rule'])}` |")
    if own and path.count(".") >= 4:
        return
    children = node.get("properties", {})
    if node.get("type") == "array" and "properties" in node.get("items", {}):
        children, path, node = node["items"]["properties"], path + "[]", node["items"]
        for r in node.get("x-kubernetes-validations", []):
            msg = r.get("message") or r.get("messageExpression", "")
            rules.append(f"| `{path}` | {_cell(msg)} | `{_cell(r['rule'])}` |")
    req = set(node.get("required", []))
    for name in children:
        _walk(children[name], f"{path}.{name}", name in req, rows, rules)


def render(crd_file: Path) -> tuple[str, str]:
    crd = yaml.safe_load(crd_file.read_text())
    names, group = crd["spec"]["names"], crd["spec"]["group"]
    out = [f"# {names['kind']} field reference", "",
           f"Generated from `crds/{crd_file.name}` by `python scripts/crd_reference.py` (a unit test fails when it "
           "is not current). `kubectl explain` gives the same descriptions on a cluster.", ""]
    for v in crd["spec"]["versions"]:
        schema = v["schema"]["openAPIV3Schema"]
        out += [f"## {group}/{v['name']}", "",
                f"Plural `{names['plural']}`, short names {', '.join(f'`{s}`' for s in names.get('shortNames', []))}; "
                f"subresources: {', '.join(sorted(v.get('subresources', {}))) or 'none'}.", ""]
        if v.get("additionalPrinterColumns"):
            out += ["Columns of `kubectl get`:", "", "| column | from | type |", "|---|---|---|"]
            out += [f"| {c['name']} | `{c['jsonPath']}` | {c['type']} |" for c in v["additionalPrinterColumns"]]
            out.append("")
        for top in ("spec", "status"):
            if top not in schema.get("properties", {}):
                continue
            rows, rules = [], []
            _walk(schema["properties"][top], top, top in schema.get("required", []), rows, rules)
            out += [f"### {top}", "", "| field | type | required | default | bounds | description |",
                    "|---|---|---|---|---|---|", *rows, ""]
            if rules:
                out += [f"Rules on {top} (CEL, checked at admission):", "", "| on | message | rule |", "|---|---|---|",
                        *rules, ""]
    return f"{names['singular']}.md", "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    pages = dict(render(f) for f in CRDS)
    if "--check" in argv:
        stale = [n for n, text in pages.items() if not (OUT / n).exists() or (OUT / n).read_text() != text]
        if stale:
            print(f"docs/reference/{', '.join(stale)} not current: run python scripts/crd_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (OUT / name).write_text(text)
        print(f"wrote docs/reference/{name} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
