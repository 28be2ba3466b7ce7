"""Admission cases generated from the CRD's own schema: for every bound in
crds/rewardpool.io_rewardpools.yaml (minimum, maximum, minLength, maxLength, minItems, maxItems, pattern,
enum, required, and each CEL rule), a manifest just outside the bound (must be rejected, with a message that
names the field and the problem) and one at the bound (must be accepted, the value kept).

The walk is generic: a new bounded field gets its cases without anyone writing them. What cannot be derived
from the schema lives in explicit tables below:
- CEL_CASES: every x-kubernetes-validations rule, keyed by its exact text, or by (path, text) where one rule
  guards several fields (CEL cannot be inverted);
- VALID_STRINGS / INVALID_STRINGS: sample strings for a pattern the built-in candidates do not fit;
- CONTEXT: what else a manifest needs for a field to be valid (e.g. scorer.class needs scorer.name gone).
`coverage_problems()` lists every bound with no generated case, every schema keyword the generator does not
know, and every stale table entry; tests/unit/test_crd_bounds_meta.py fails when it is not empty.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CRD_PATH = REPO / "crds" / "rewardpool.io_rewardpools.yaml"

# A valid pool the cases start from (the admission tests' VALID, restated to keep this module import-light).
BASE = {
    "apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool", "metadata": {"name": "bounds"},
    "spec": {"image": "w:1", "scorer": {"name": "mean-intensity"}, "store": {"master": "mc:50051", "protocol": "tcp"},
             "sizing": {"samplesPerRollout": 8, "outputBytesPerSample": "10Mi"}},
}

GENERATED = {"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern", "enum", "required"}
CEL = "x-kubernetes-validations"
MODIFIERS = {"exclusiveMinimum", "exclusiveMaximum"}
# Schema keywords that bound nothing a manifest can get wrong beyond its type (which the structural schema
# enforces everywhere). Anything not listed here, in GENERATED, MODIFIERS or CEL fails the meta-test, so a new
# kind of bound (minProperties, multipleOf, ...) cannot be added without teaching the generator.
NOT_BOUNDS = {"type", "description", "properties", "items", "default", "format", "additionalProperties",
              "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type",
              "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "nullable", "title", "example"}

ITEM, VALUE = "[]", "{}"  # path segments: an array's items, a map's values


def load_schema(path: Path = CRD_PATH) -> dict:
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def walk(schema: dict, path: tuple = ()):
    """Every schema node with its path; `metadata` is the API server's, not ours."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if path == () and name == "metadata":
            continue
        yield from walk(sub, path + (name,))
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], path + (ITEM,))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], path + (VALUE,))


def dotted(path: tuple) -> str:
    """The path as the API server writes it in messages: spec.store.devices[0], a map value as [k]."""
    out = ""
    for seg in path:
        if seg == ITEM:
            out += "[0]"
        elif seg == VALUE:
            out += "[k]"
        else:
            out += ("." if out else "") + seg
    return out


@dataclass(frozen=True)
class Bound:
    path: tuple
    keyword: str
    detail: str = ""  # the required property, or the CEL rule's text
    value: object = None  # the bound itself: a number (with "exclusive "), length, pattern, enum, CEL message

    @property
    def id(self) -> str:
        tail = f"={self.detail}" if self.keyword == "required" else ""
        if self.keyword == CEL:
            return f"{dotted(self.path) or '<root>'}:cel[{self.detail[:40]}]"
        return f"{dotted(self.path) or '<root>'}:{self.keyword}{tail}"


def bounds(schema: dict | None = None) -> list[Bound]:
    schema = schema if schema is not None else load_schema()
    out = []
    for path, node in walk(schema):
        for kw in node:
            if kw in ("minimum", "maximum"):
                excl = node.get("exclusiveMinimum" if kw == "minimum" else "exclusiveMaximum")
                out.append(Bound(path, kw, value=f"exclusive {node[kw]}" if excl else node[kw]))
            elif kw in ("minLength", "maxLength", "minItems", "maxItems", "pattern"):
                out.append(Bound(path, kw, value=node[kw]))
            elif kw == "enum":
                out.append(Bound(path, kw, value=list(node[kw])))
            elif kw == "required":
                out += [Bound(path, kw, r, True) for r in node[kw]]
            elif kw == CEL:
                out += [Bound(path, kw, v["rule"], v.get("message") or v.get("messageExpression", "")) for v in node[kw]]
    return out


def snapshot(schema: dict | None = None) -> dict[str, object]:
    """Every bound's id and value: what tests/crd_bounds_expected.py holds, reviewed by hand."""
    return {b.id if b.keyword != CEL else f"{dotted(b.path) or '<root>'}:cel[{b.detail}]": b.value
            for b in bounds(schema)}


def unknown_keywords(schema: dict | None = None) -> list[str]:
    schema = schema if schema is not None else load_schema()
    known = GENERATED | MODIFIERS | NOT_BOUNDS | {CEL}
    return [f"{dotted(p) or '<root>'}: {kw}" for p, node in walk(schema) for kw in node if kw not in known]


# ---- values ------------------------------------------------------------------------------------------------------

# Candidates tried, in order, for a string that must match a pattern (and length bounds).
CANDIDATES = ["a", "a:1", "pkg.mod:Cls", "1Gi", "mlx5_0", "a/b", "x1", "A"]
BAD_CANDIDATES = ["!", "a b", "-", "*", "a!"]
# Per-field samples for patterns the candidates above do not fit: dotted path -> string.
VALID_STRINGS: dict[str, str] = {"spec.scorer.args.base_url": "http://judge:8000/v1",
                                  "spec.scorers[0].args.base_url": "https://api.example.com/v1"}
INVALID_STRINGS: dict[str, str] = {"spec.scorer.args.base_url": "http://judge:8000/v1",
                                  "spec.scorers[0].args.base_url": "https://api.example.com/v1",
                                  # an absolute path: the GGUF file is named under the model source
                                  "spec.scorer.engine.modelFile": "/judge.gguf",
                                  "spec.scorers[0].engine.modelFile": "/judge.gguf"}


class CannotDerive(Exception):
    pass


def _ok(s: str, node: dict) -> bool:
    if "pattern" in node and not re.search(node["pattern"], s):
        return False
    if len(s) < node.get("minLength", 0) or len(s) > node.get("maxLength", 1 << 30):
        return False
    return "enum" not in node or s in node["enum"]


def valid_string(node: dict, path: tuple, length: int | None = None) -> str:
    if length is None and dotted(path) in VALID_STRINGS:
        return VALID_STRINGS[dotted(path)]
    if length is None:
        tries = [node["default"]] if isinstance(node.get("default"), str) else []
        tries += CANDIDATES
    else:
        tries = [c * length for c in "a0xA_"]
        if dotted(path) in VALID_STRINGS:
            v = VALID_STRINGS[dotted(path)]
            tries.insert(0, (v * (length // max(len(v), 1) + 1))[:length])
    for s in tries:
        if (length is None or len(s) == length) and _ok(s, node):
            return s
    raise CannotDerive(f"{dotted(path)}: no valid string{'' if length is None else f' of length {length}'} "
                       f"for {node.get('pattern', '(no pattern)')}: add one to VALID_STRINGS")


def invalid_pattern_string(node: dict, path: tuple) -> str:
    tries = ([INVALID_STRINGS[dotted(path)]] if dotted(path) in INVALID_STRINGS else []) + BAD_CANDIDATES
    relaxed = {k: v for k, v in node.items() if k != "pattern"}
    for s in tries:
        if not re.search(node["pattern"], s) and _ok(s, relaxed):
            return s
    raise CannotDerive(f"{dotted(path)}: no string that breaks only {node['pattern']}: add one to INVALID_STRINGS")


def _num_range(node: dict) -> tuple[float | None, float | None, float]:
    step = 1 if node.get("type") == "integer" else 0.001
    lo, hi = node.get("minimum"), node.get("maximum")
    if lo is not None and node.get("exclusiveMinimum"):
        lo = lo + step
    if hi is not None and node.get("exclusiveMaximum"):
        hi = hi - step
    return lo, hi, step


def fill(node: dict, path: tuple):
    """The smallest valid value for a schema node (its default when it has one)."""
    if "default" in node and node.get("type") != "object":
        return copy.deepcopy(node["default"])
    if "enum" in node:
        return node["enum"][0]
    t = node.get("type")
    if node.get("x-kubernetes-int-or-string") or t == "string":
        return valid_string(node, path)
    if t in ("integer", "number"):
        lo, hi, _ = _num_range(node)
        return lo if lo is not None else (min(1, hi) if hi is not None else 1)
    if t == "boolean":
        return False
    if t == "array":
        return [fill(node["items"], path + (ITEM,)) for _ in range(node.get("minItems", 0))]
    if t == "object":
        obj = copy.deepcopy(node["default"]) if isinstance(node.get("default"), dict) else {}
        for r in node.get("required", []):
            if r not in obj:
                obj[r] = fill(node["properties"][r], path + (r,))
        return obj
    return {}


def defaulted(node: dict, value):
    """`value` as the API server keeps it: the schema's defaults filled in, in objects and in array items."""
    if isinstance(value, list) and "items" in node:
        return [defaulted(node["items"], v) for v in value]
    if isinstance(value, dict) and node.get("type") == "object":
        out = dict(value)
        for k, prop in (node.get("properties") or {}).items():
            if k not in out and "default" in prop:
                out[k] = copy.deepcopy(prop["default"])
            if k in out:
                out[k] = defaulted(prop, out[k])
        return out
    return value


def child(node: dict, seg: str) -> dict:
    if seg == ITEM:
        return node["items"]
    if seg == VALUE:
        return node["additionalProperties"]
    return node["properties"][seg]


def ensure(obj: dict, schema: dict, path: tuple):
    """Make every container on `path` exist in obj (filled with required fields); return (parent, key, node)."""
    node, cur = schema, obj
    for i, seg in enumerate(path):
        sub = child(node, seg)
        last = i == len(path) - 1
        if seg == ITEM:
            if not cur:
                cur.append(fill(sub, path[:i + 1]))
            key = 0
        else:
            key = "k" if seg == VALUE else seg
            if key not in cur and not last:
                cur[key] = fill(sub, path[:i + 1])
        if last:
            return cur, key, sub
        cur, node = cur[key], sub
    raise ValueError("empty path")


def set_at(obj: dict, schema: dict, path: tuple, value) -> dict:
    parent, key, _ = ensure(obj, schema, path)
    parent[key] = value  # a list's item 0 or a mapping's key
    return obj


def get_at(obj, path: tuple):
    for seg in path:
        obj = obj[0] if seg == ITEM else obj["k" if seg == VALUE else seg]
    return obj


# ---- cases ------------------------------------------------------------------------------------------------------

@dataclass
class Case:
    bound: Bound
    accept: bool
    manifest: dict  # for a status bound: the whole object, whose status is written through /status
    what: str
    expect: list[str] = field(default_factory=list)  # substrings of the rejection message
    check: tuple | None = None  # (path, value) an accepted object must keep

    @property
    def id(self) -> str:
        return f"{self.bound.id}:{'accept' if self.accept else 'reject'}:{self.what}"

    @property
    def status(self) -> bool:
        return self.bound.path[:1] == ("status",)


def base() -> dict:
    return copy.deepcopy(BASE)


def _drop(obj, path):
    parent = get_at(obj, path[:-1])
    parent.pop(path[-1], None)
    return obj


def _mixture(m: dict) -> dict:
    """spec.scorers set: the shared scorer names no scorer, and every entry names exactly one (distinct), a class
    with its key."""
    _drop(m, ("spec", "scorer", "name"))
    for i, entry in enumerate(m["spec"].get("scorers") or []):
        if isinstance(entry, dict) and "name" not in entry and "class" not in entry:
            entry["class"] = f"pkg.mod:Scorer{i}"
        if isinstance(entry, dict) and "class" in entry:
            entry.setdefault("key", f"scorer{i}")  # a custom class in a mixture needs its key
        if isinstance(entry, dict):
            entry.setdefault("weight", 1)  # the API server's defaults, so "kept as sent" compares like with like
            entry.setdefault("required", True)
    return m


def _engine(entry: dict) -> None:
    """A scorer hosting an engine: a judge, whose engine has weights (and, for llamacpp, its GGUF file)."""
    if "class" not in entry:
        entry["name"] = "openai-judge"
    entry.pop("args", None)
    eng = entry["engine"]
    if not eng.get("model"):
        eng["model"] = {"pvc": {"claimName": "w"}}
    if eng.get("kind") == "llamacpp":
        eng.setdefault("modelFile", "judge.gguf")


# What a manifest needs besides the field itself for the field to be valid: dotted-path prefix -> edit.
CONTEXT = {
    "spec.scorer.class": lambda m: _drop(m, ("spec", "scorer", "name")),
    "spec.scorers": _mixture,
    "spec.scorer.engine": lambda m: _engine(m["spec"]["scorer"]),
    "spec.scorers[0].engine": lambda m: _engine(m["spec"]["scorers"][0]),
    "spec.scorer.device": lambda m: m["spec"]["scorer"].setdefault("gpus", 1),  # device cuda needs a GPU
    # GCS fault tolerance needs the Ray cluster's address (spec.ray's CEL rule)
    "spec.ray.gcsFaultTolerance": lambda m: m["spec"].setdefault("ray", {}).setdefault("address", "ray-head:6379"),
}


def with_context(m: dict, path: tuple) -> dict:
    d = dotted(path)
    for prefix, edit in CONTEXT.items():
        if d == prefix or d.startswith(prefix + ".") or d.startswith(prefix + "["):
            edit(m)
    return m


def manifest(schema: dict, path: tuple, value) -> dict:
    return with_context(set_at(base(), schema, path, value), path)


def _fmt(n) -> str:
    return str(int(n)) if float(n).is_integer() else str(n)


def cases_for(b: Bound, schema: dict) -> list[Case]:
    if b.keyword == CEL:
        return cel_cases(b)
    node = get_node(schema, b.path)
    p, where = b.path, dotted(b.path)
    out: list[Case] = []

    def pair(ok_value, bad_value, expect, what_ok, what_bad):
        out.append(Case(b, True, manifest(schema, p, ok_value), what_ok, check=(p, ok_value)))
        out.append(Case(b, False, manifest(schema, p, bad_value), what_bad, [where, *expect]))

    kw = b.keyword
    if kw in ("minimum", "maximum"):
        lo, hi, step = _num_range(node)
        if kw == "minimum":
            excl = bool(node.get("exclusiveMinimum"))
            pair(lo, lo - step, [f"greater than {'' if excl else 'or equal to '}{_fmt(node['minimum'])}"],
                 f"{lo}", f"{lo - step}")
        else:
            excl = bool(node.get("exclusiveMaximum"))
            pair(hi, hi + step, [f"less than {'' if excl else 'or equal to '}{_fmt(node['maximum'])}"],
                 f"{hi}", f"{hi + step}")
    elif kw == "minLength":
        n = node["minLength"]
        if n == 0:
            raise CannotDerive(f"{where}: minLength 0 bounds nothing; remove it")
        pair(valid_string(node, p, n), valid_string({**node, "minLength": 0}, p, n - 1) if n > 1 else "",
             [f"at least {n} chars long"], f"len{n}", f"len{n - 1}")
    elif kw == "maxLength":
        n = node["maxLength"]
        pair(valid_string(node, p, n), valid_string({**node, "maxLength": n + 1}, p, n + 1),
             ["Too long", f"{n}"], f"len{n}", f"len{n + 1}")
    elif kw in ("minItems", "maxItems"):
        n = node[kw]
        items = distinct_items(node["items"], p + (ITEM,), n + 1, node.get("x-kubernetes-list-map-keys") or [])
        if kw == "maxItems":
            pair(items[:n], items[:n + 1], ["Too many", f"must have at most {n} items"], f"{n}items", f"{n + 1}items")
        else:
            if n == 0:
                raise CannotDerive(f"{where}: minItems 0 bounds nothing; remove it")
            pair(items[:n], items[:n - 1], [f"should have at least {n} items"], f"{n}items", f"{n - 1}items")
    elif kw == "pattern":
        pair(valid_string(node, p), invalid_pattern_string(node, p), ["should match"], "match", "nomatch")
    elif kw == "enum":
        for v in node["enum"]:
            out.append(Case(b, True, manifest(schema, p, v), f"{v}", check=(p, v)))
        bad = "zz-not-allowed" if all(isinstance(v, str) for v in node["enum"]) else 987654
        out.append(Case(b, False, manifest(schema, p, bad), "other",
                        [where, "Unsupported value", *[f'"{v}"' for v in node["enum"]]]))
    elif kw == "required":
        m = base()
        if p:
            ensure(m, schema, p + (b.detail,))
            parent = get_at(m, p)
            parent.setdefault(b.detail, fill(child(node, b.detail), p + (b.detail,)))
        with_context(m, p + (b.detail,))
        out.append(Case(b, True, copy.deepcopy(m), "present"))
        get_at(m, p).pop(b.detail)
        out.append(Case(b, False, m, "missing", [dotted(p + (b.detail,)), "Required value"]))
    else:
        raise CannotDerive(f"{where}: the generator does not handle {kw}")
    return out


def distinct_items(node: dict, path: tuple, n: int, map_keys: list[str] = ()) -> list:
    """n valid items, distinct where the schema needs it: strings, and a map list's keys (the API server refuses
    two items with one key)."""
    if node.get("type") == "string" or node.get("x-kubernetes-int-or-string"):
        first = valid_string(node, path)
        items = [first] + [f"{first}{i}" for i in range(1, n)]
        if all(_ok(s, node) for s in items):
            return items
        raise CannotDerive(f"{dotted(path)}: cannot make {n} distinct valid items")
    items = [fill(node, path) for _ in range(n)]
    for key in map_keys:
        keys = distinct_items(child(node, key), path + (key,), n)
        for item, k in zip(items, keys):
            item[key] = k
    return items


def get_node(schema: dict, path: tuple) -> dict:
    node = schema
    for seg in path:
        node = child(node, seg)
    return node


# ---- CEL rules: cases written by hand, keyed by the rule's exact text ----------------------------------------

def _spec(**edits) -> dict:
    m = base()
    for dotted_path, value in edits.items():
        parts = dotted_path.split("__")
        node = m["spec"]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is _DROP:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return m


_DROP = object()
_JUDGE = ("!has(self.name) || self.name != 'openai-judge' || has(self.engine) || (has(self.args) && "
          "has(self.args.base_url) && has(self.args.model))")
_ENGINE = {"kind": "vllm", "model": {"pvc": {"claimName": "qwen-vl"}}}
_ENGINE_JUDGE_ONLY = "!has(self.engine) || !has(self.name) || self.name == 'openai-judge'"
_ENGINE_NO_URL = "!has(self.engine) || !has(self.args) || (!has(self.args.base_url) && !has(self.args.model))"
_ENGINE_OWN_WEIGHTS = "!has(self.engine) || (!has(self.model) && (!has(self.modelPath) || self.modelPath == ''))"
_ENGINE_GGUF = "self.kind != 'llamacpp' || has(self.modelFile)"
_ENGINE_TP = "!has(self.tensorParallel) || !has(self.gpus) || self.gpus == 0 || self.tensorParallel <= self.gpus"
_SOURCE = "[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1"
_HPS_VERSION = ("!has(self.name) || self.name != 'hps' || !has(self.args) || !has(self.args.version) || "
                "self.args.version in ['v2.1', 'v2.0']")
_JUDGE_ARGS = {"base_url": "http://judge:8000/v1", "model": "qwen2.5-vl"}
_NO_SECRET = "!has(self.api_key) && !has(self.apiKey) && !has(self.token) && !has(self.password)"
_SECCOMP = "!has(self.seccompProfile) || !has(self.seccompProfile.type) || self.seccompProfile.type != 'Unconfined'"
_APPARMOR = "!has(self.appArmorProfile) || !has(self.appArmorProfile.type) || self.appArmorProfile.type != 'Unconfined'"


def _pod_sc(**sc) -> dict:
    return _spec(podTemplate={"spec": {"securityContext": sc}})


def _container(kind: str, **fields) -> dict:
    return _spec(podTemplate={"spec": {kind: [{"name": "c", "image": "x", **fields}]}})


def _container_cel_cases(kind: str) -> dict:
    """The same four rules guard containers and initContainers: one case table per kind."""
    at = f"spec.podTemplate.spec.{kind}[0]"
    return {
        (f"{at}.ports[0]", "!has(self.hostPort) || self.hostPort == 0"): [
            (False, f"{kind}-host-port", _container(kind, ports=[{"containerPort": 80, "hostPort": 80}]),
             [f"{at}.ports[0].hostPort", "hostPort is not allowed"]),
            (True, f"{kind}-container-port", _container(kind, ports=[{"containerPort": 80, "hostPort": 0}]), []),
        ],
        (f"{at}.securityContext", "!has(self.privileged) || !self.privileged"): [
            (False, f"{kind}-privileged", _container(kind, securityContext={"privileged": True}),
             [f"{at}.securityContext.privileged", "privileged containers are not allowed"]),
            (True, f"{kind}-unprivileged", _container(kind, securityContext={"privileged": False}), []),
        ],
        (f"{at}.securityContext", _SECCOMP): [
            (False, f"{kind}-seccomp-unconfined", _container(kind, securityContext={"seccompProfile": {"type": "Unconfined"}}),
             [f"{at}.securityContext.seccompProfile.type", "seccompProfile Unconfined"]),
            (True, f"{kind}-seccomp-default", _container(kind, securityContext={"seccompProfile": {"type": "RuntimeDefault"}}), []),
        ],
        (f"{at}.securityContext", _APPARMOR): [
            (False, f"{kind}-apparmor-unconfined", _container(kind, securityContext={"appArmorProfile": {"type": "Unconfined"}}),
             [f"{at}.securityContext.appArmorProfile.type", "appArmorProfile Unconfined"]),
            (True, f"{kind}-apparmor-default", _container(kind, securityContext={"appArmorProfile": {"type": "RuntimeDefault"}}), []),
        ],
    }

# rule -> list of (accept?, what, manifest, expected substrings when rejected)
CEL_CASES = {
    "!(has(self.maxSurge) && has(self.maxUnavailable) && string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])": [
        (False, "both-zero", _spec(rollout={"maxSurge": 0, "maxUnavailable": 0}),
         ["spec.rollout.maxUnavailable", "cannot both be 0"]),
        (False, "both-zero-percent", _spec(rollout={"maxSurge": "0%", "maxUnavailable": 0}),
         ["spec.rollout.maxUnavailable", "cannot both be 0"]),
        (True, "no-surge", _spec(rollout={"maxSurge": 0, "maxUnavailable": 1}), []),
        (True, "none-unavailable", _spec(rollout={"maxSurge": "10%", "maxUnavailable": "0%"}), []),
        (True, "defaults", _spec(rollout={}), []),
    ],
    "!has(self.gcsFaultTolerance) || (has(self.address) && self.address != '')": [
        (False, "ft-no-address", _spec(ray={"gcsFaultTolerance": {}}), ["spec.ray.gcsFaultTolerance", "set ray.address"]),
        (False, "ft-empty-address", _spec(ray={"address": "", "gcsFaultTolerance": {}}),
         ["spec.ray.gcsFaultTolerance", "set ray.address"]),
        (True, "ft-with-address", _spec(ray={"address": "ray-head.ray.svc:6379", "gcsFaultTolerance": {}}), []),
        (True, "no-ft-no-address", _spec(ray={"namespace": "rewardpool"}), []),
    ],
    "!has(self.framesPerSample) || !has(self.outputShape) || size(self.outputShape) != 4 || self.outputShape[1] == self.framesPerSample": [
        (False, "frames-disagree", _spec(sizing__framesPerSample=120, sizing__outputShape=[3, 121, 8, 8]),
         ["spec.sizing.framesPerSample", "must equal the frame count F of sizing.outputShape"]),
        (True, "frames-agree", _spec(sizing__framesPerSample=121, sizing__outputShape=[3, 121, 8, 8]), []),
        (True, "image-shape", _spec(sizing__framesPerSample=121, sizing__outputShape=[3, 8, 8]), []),
        (True, "frames-alone", _spec(sizing__framesPerSample=121), []),
        (True, "shape-alone", _spec(sizing__outputShape=[3, 121, 8, 8]), []),
    ],
    "self.store.protocol != 'rdma' || self.placement.rdmaResource.count > 0 || (has(self.store.devices) && size(self.store.devices) > 0)": [
        (False, "rdma-no-device", _spec(store__protocol="rdma", placement={"rdmaResource": {"count": 0}}),
         ["spec.store.protocol", "rdma needs an RDMA device"]),
        (False, "rdma-empty-devices", _spec(store__protocol="rdma", store__devices=[], placement={"rdmaResource": {"count": 0}}),
         ["spec.store.protocol", "rdma needs an RDMA device"]),
        (True, "rdma-one-device", _spec(store__protocol="rdma", store__devices=["mlx5_0"], placement={"rdmaResource": {"count": 0}}), []),
        (True, "rdma-count-1", _spec(store__protocol="rdma", placement={"rdmaResource": {"count": 1}}), []),
        (True, "tcp-no-device", _spec(placement={"rdmaResource": {"count": 0}}), []),
    ],
    "!(type(self.store.segmentSize) == string && self.store.segmentSize == 'auto') || has(self.sizing)": [
        (False, "auto-no-sizing", _spec(sizing=_DROP), ["spec.store.segmentSize", "computed from spec.sizing"]),
        (False, "explicit-auto-no-sizing", _spec(sizing=_DROP, store__segmentSize="auto"),
         ["spec.store.segmentSize", "computed from spec.sizing"]),
        (True, "fixed-no-sizing", _spec(sizing=_DROP, store__segmentSize="1Gi"), []),
        (True, "zero-int-no-sizing", _spec(sizing=_DROP, store__segmentSize=0), []),
    ],
    "!has(self.autoscaling) || !self.autoscaling.enabled || (self.replicas >= self.autoscaling.minReplicas && self.replicas <= self.autoscaling.maxReplicas)": [
        (False, "below-min", _spec(replicas=1, autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 4}),
         ["spec.replicas", "within [autoscaling.minReplicas, autoscaling.maxReplicas]"]),
        (False, "above-max", _spec(replicas=5, autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 4}),
         ["spec.replicas", "within [autoscaling.minReplicas, autoscaling.maxReplicas]"]),
        (True, "at-min", _spec(replicas=2, autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 4}), []),
        (True, "at-max", _spec(replicas=4, autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 4}), []),
        (True, "disabled-outside", _spec(replicas=9, autoscaling={"enabled": False, "minReplicas": 2, "maxReplicas": 4}), []),
    ],
    "has(self.name) != has(self.class)": [  # a spec.scorers entry
        (False, "entry-both", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity", "class": "p.m:C"}]),
         ["spec.scorers[0]", "exactly one of name"]),
        (False, "entry-neither", _spec(scorer={"batchSize": 4}, scorers=[{"weight": 1}]),
         ["spec.scorers[0]", "exactly one of name"]),
        (True, "entry-name", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity"}]), []),
        (True, "entry-class", _spec(scorer={"batchSize": 4}, scorers=[{"class": "p.m:C", "key": "ocr"}]), []),
    ],
    "has(self.name) || has(self.key)": [
        (False, "entry-class-no-key", _spec(scorer={"batchSize": 4}, scorers=[{"class": "p.m:C"}]),
         ["spec.scorers[0].key", "a custom class in scorers needs key"]),
        (True, "entry-name-no-key", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity"}]), []),
        (True, "entry-name-own-key", _spec(scorer={"batchSize": 4}, scorers=[{"name": "openai-judge", "key": "openai_api",
                                                                              "args": _JUDGE_ARGS}]), []),
    ],
    "!has(self.key) || self.key != 'weighted'": [
        (False, "entry-key-weighted", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity",
                                                                               "key": "weighted"}]),
         ["spec.scorers[0].key", "key weighted is the mixture's weighted sum"]),
        (True, "entry-key-ocr", _spec(scorer={"batchSize": 4}, scorers=[{"class": "p.m:C", "key": "ocr"}]), []),
    ],
    "self.all(a, !has(a.key) && !has(a.name) || self.exists_one(b, (has(b.key) ? b.key : has(b.name) ? b.name : '') == (has(a.key) ? a.key : a.name)))": [
        (False, "scorers-name-twice", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity"},
                                                                              {"name": "mean-intensity"}]),
         ["spec.scorers", "names the reward key mean-intensity twice"]),
        (False, "scorers-key-twice", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity", "key": "ocr"},
                                                                             {"class": "p.m:C", "key": "ocr"}]),
         ["spec.scorers", "names the reward key ocr twice"]),
        (False, "scorers-key-is-a-name", _spec(scorer={"batchSize": 4}, scorers=[
            {"name": "mean-intensity"}, {"class": "p.m:C", "key": "mean-intensity"}]),
         ["spec.scorers", "names the reward key mean-intensity twice"]),
        (True, "scorers-one-renamed", _spec(scorer={"batchSize": 4}, scorers=[
            {"name": "mean-intensity"}, {"name": "mean-intensity", "key": "brightness"}]), []),
    ],
    "has(self.scorers) ? !has(self.scorer.name) && !has(self.scorer.class) : has(self.scorer.name) != has(self.scorer.class)": [
        (False, "both", _spec(scorer={"name": "mean-intensity", "class": "pkg.mod:Cls"}), ["spec", "exactly one of scorer.name"]),
        (False, "neither", _spec(scorer={"batchSize": 4}), ["spec", "exactly one of scorer.name"]),
        (False, "named-with-scorers", _spec(scorer={"name": "mean-intensity"}, scorers=[{"name": "mean-intensity"}]),
         ["spec", "neither"]),
        (True, "name-only", _spec(scorer={"name": "mean-intensity"}), []),
        (True, "class-only", _spec(scorer={"class": "pkg.mod:Cls"}), []),
        (True, "scorers-only", _spec(scorer={"batchSize": 4}, scorers=[{"name": "mean-intensity"}]), []),
    ],
    "!has(self.dtype) || self.dtype == 'float32' || !has(self.device) || self.device != 'cpu'": [
        (False, "half-on-cpu", _spec(scorer__device="cpu", scorer__dtype="float16"), ["spec.scorer.dtype", "are for GPUs"]),
        (True, "float32-on-cpu", _spec(scorer__device="cpu", scorer__dtype="float32"), []),
        (True, "half-on-auto", _spec(scorer__device="auto", scorer__dtype="bfloat16"), []),
    ],
    "!has(self.device) || self.device != 'cuda' || (has(self.gpus) && self.gpus > 0)": [
        (False, "cuda-no-gpus", _spec(scorer__device="cuda"), ["spec.scorer.gpus", "needs scorer.gpus >= 1"]),
        (False, "cuda-zero-gpus", _spec(scorer__device="cuda", scorer__gpus=0), ["spec.scorer.gpus", "needs scorer.gpus"]),
        (True, "cuda-one-gpu", _spec(scorer__device="cuda", scorer__gpus=1), []),
    ],
    "!(has(self.ipvlan) && has(self.attachment))": [
        (False, "both", _spec(network={"ipvlan": {"master": "bond0", "ipam": {}}, "attachment": "roce"}),
         ["spec.network", "at most one of network.ipvlan"]),
        (True, "ipvlan-only", _spec(network={"ipvlan": {"master": "bond0", "ipam": {}}}), []),
        (True, "attachment-only", _spec(network={"attachment": "roce"}), []),
    ],
    "self.minReplicas <= self.maxReplicas": [
        (False, "min-above-max", _spec(autoscaling={"minReplicas": 5, "maxReplicas": 4}),
         ["spec.autoscaling", "minReplicas must not exceed autoscaling.maxReplicas"]),
        (True, "min-equals-max", _spec(autoscaling={"minReplicas": 4, "maxReplicas": 4}), []),
    ],
    "!has(self.name) || self.name != 'pickscore' || (has(self.modelPath) && self.modelPath != '') || has(self.model)": [
        (False, "pickscore-no-model", _spec(scorer={"name": "pickscore"}), ["spec.scorer.modelPath", "needs scorer.model"]),
        (False, "pickscore-empty-model", _spec(scorer={"name": "pickscore", "modelPath": ""}),
         ["spec.scorer.modelPath", "needs scorer.model"]),
        (True, "pickscore-with-model", _spec(scorer={"name": "pickscore", "modelPath": "/m"}), []),
        (True, "pickscore-with-source", _spec(scorer={"name": "pickscore", "model": {"image": {"reference": "r/m:1"}}}), []),
        (True, "other-no-model", _spec(scorer={"name": "mean-intensity"}), []),
    ],
    ("spec.scorer", "!has(self.model) || !has(self.modelPath) || self.modelPath == ''"): [
        (False, "model-and-path", _spec(scorer={"name": "pickscore", "modelPath": "/m", "model": {"pvc": {"claimName": "w"}}}),
         ["spec.scorer.model", "not both"]),
        (True, "model-empty-path", _spec(scorer={"name": "pickscore", "modelPath": "", "model": {"pvc": {"claimName": "w"}}}), []),
        (True, "model-alone", _spec(scorer={"name": "pickscore", "model": {"pvc": {"claimName": "w", "subPath": "pick"}}}), []),
    ],
    ("spec.scorers[0]", "!has(self.model) || !has(self.modelPath) || self.modelPath == ''"): [
        (False, "entry-model-and-path", _spec(scorer={"batchSize": 4}, scorers=[
            {"name": "hps", "modelPath": "/m", "model": {"pvc": {"claimName": "w"}}}]), ["spec.scorers[0].model", "not both"]),
        (True, "entry-model-alone", _spec(scorer={"batchSize": 4}, scorers=[
            {"name": "hps", "model": {"image": {"reference": "r/hps:1", "pullPolicy": "IfNotPresent"}}}]), []),
    ],
    ("spec.scorer.model", "[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1"): [
        (False, "source-both", _spec(scorer={"name": "pickscore", "model": {"pvc": {"claimName": "w"}, "image": {"reference": "r"}}}),
         ["spec.scorer.model", "exactly one source"]),
        (False, "source-none", _spec(scorer={"name": "pickscore", "model": {}}), ["spec.scorer.model", "exactly one source"]),
        (True, "source-image", _spec(scorer={"name": "pickscore", "model": {"image": {"reference": "r/m:1"}}}), []),
        (False, "source-cache-and-pvc", _spec(scorer={"name": "pickscore", "model": {"cache": {"name": "c"},
                                                                                      "pvc": {"claimName": "w"}}}),
         ["spec.scorer.model", "exactly one source"]),
        (True, "source-cache", _spec(scorer={"name": "pickscore", "model": {"cache": {"name": "pick",
                                                                                      "placement": "Preferred"}}}), []),
    ],
    ("spec.scorers[0].model", "[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1"): [
        (False, "entry-source-none", _spec(scorer={"batchSize": 4}, scorers=[{"name": "hps", "model": {}}]),
         ["spec.scorers[0].model", "exactly one source"]),
        (True, "entry-source-pvc", _spec(scorer={"batchSize": 4}, scorers=[{"name": "hps", "model": {"pvc": {"claimName": "w"}}}]), []),
    ],
    "!has(self.range) || isCIDR(self.range)": [
        (False, "range-no-prefix", _spec(network={"ipvlan": {"master": "bond0", "ipam": {"range": "10.1.0.0"}}}),
         ["spec.network.ipvlan.ipam.range", "must be a CIDR"]),
        (True, "range-cidr", _spec(network={"ipvlan": {"master": "bond0", "ipam": {"range": "10.1.0.0/24"}}}), []),
    ],
    "!has(self.subnet) || isCIDR(self.subnet)": [
        (False, "subnet-bad-prefix", _spec(network={"ipvlan": {"master": "bond0", "ipam": {"subnet": "10.1.0.0/40"}}}),
         ["spec.network.ipvlan.ipam.subnet", "must be a CIDR"]),
        (True, "subnet-cidr", _spec(network={"ipvlan": {"master": "bond0", "ipam": {"subnet": "fd00::/64"}}}), []),
    ],
    "self.all(k, !k.startsWith('rewardpool.io/') && k != 'app.kubernetes.io/component')": [
        (False, "pool-label", _spec(podTemplate={"metadata": {"labels": {"rewardpool.io/pool": "x"}}}),
         ["spec.podTemplate.metadata.labels", "cannot set rewardpool.io/*"]),
        (False, "component-label", _spec(podTemplate={"metadata": {"labels": {"app.kubernetes.io/component": "x"}}}),
         ["spec.podTemplate.metadata.labels", "cannot set rewardpool.io/*"]),
        (True, "own-label", _spec(podTemplate={"metadata": {"labels": {"team": "rl"}}}), []),
    ],
    "self.all(k, !k.startsWith('rewardpool.io/'))": [
        (False, "drain-annotation", _spec(podTemplate={"metadata": {"annotations": {"rewardpool.io/x": "y"}}}),
         ["spec.podTemplate.metadata.annotations", "cannot set rewardpool.io/*"]),
        (True, "own-annotation", _spec(podTemplate={"metadata": {"annotations": {"team": "rl"}}}), []),
    ],
    "!has(self.hostNetwork) || self.hostNetwork != true": [
        (False, "host-network", _spec(podTemplate={"spec": {"hostNetwork": True}}), ["hostNetwork is not allowed"]),
        (True, "no-host-network", _spec(podTemplate={"spec": {"hostNetwork": False}}), []),
    ],
    "!has(self.hostPID) || self.hostPID != true": [
        (False, "host-pid", _spec(podTemplate={"spec": {"hostPID": True}}), ["hostPID is not allowed"]),
        (True, "no-host-pid", _spec(podTemplate={"spec": {"hostPID": False}}), []),
    ],
    "!has(self.hostIPC) || self.hostIPC != true": [
        (False, "host-ipc", _spec(podTemplate={"spec": {"hostIPC": True}}), ["hostIPC is not allowed"]),
        (True, "no-host-ipc", _spec(podTemplate={"spec": {"hostIPC": False}}), []),
    ],
    "!has(self.nodeName)": [
        (False, "node-name", _spec(podTemplate={"spec": {"nodeName": "n"}}), ["nodeName is not allowed"]),
        (True, "no-node-name", _spec(podTemplate={"spec": {"priorityClassName": "high"}}), []),
    ],
    "!has(self.serviceAccountName) && !has(self.serviceAccount)": [
        (False, "service-account-name", _spec(podTemplate={"spec": {"serviceAccountName": "a"}}),
         ["serviceAccountName is not allowed"]),
        (False, "service-account", _spec(podTemplate={"spec": {"serviceAccount": "a"}}), ["serviceAccountName is not allowed"]),
        (True, "no-service-account", _spec(podTemplate={"spec": {}}), []),
    ],
    "self.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || self[k] == '' || self[k] == 'runtime/default' || self[k].startsWith('localhost/'))": [
        (False, "apparmor-annotation-unconfined", _spec(podTemplate={"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}}}),
         ["spec.podTemplate.metadata.annotations", "AppArmor profile other than runtime/default"]),
        (True, "apparmor-annotation-localhost", _spec(podTemplate={"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/worker": "localhost/k8s-worker"}}}), []),
    ],
    ("spec.scorer", _JUDGE): [
        (False, "judge-no-args", _spec(scorer={"name": "openai-judge"}), ["spec.scorer.args", "needs args.base_url"]),
        (False, "judge-no-model", _spec(scorer={"name": "openai-judge", "args": {"base_url": "http://j:8000/v1"}}),
         ["spec.scorer.args", "and args.model"]),
        (True, "judge-complete", _spec(scorer={"name": "openai-judge", "args": _JUDGE_ARGS}), []),
        (True, "judge-hosted", _spec(scorer={"name": "openai-judge", "engine": _ENGINE}), []),
    ],
    ("spec.scorer", _ENGINE_JUDGE_ONLY): [
        (False, "engine-for-pickscore", _spec(scorer={"name": "pickscore", "modelPath": "/m", "engine": _ENGINE}),
         ["spec.scorer.engine", "an engine serves a judge"]),
        (True, "engine-for-a-class", _spec(scorer={"class": "p.m:Judge", "engine": _ENGINE}), []),
    ],
    ("spec.scorer", _ENGINE_NO_URL): [
        (False, "engine-and-base-url", _spec(scorer={"name": "openai-judge", "args": {"base_url": "http://j/v1"},
                                                     "engine": _ENGINE}), ["spec.scorer.args", "drop base_url and model"]),
        (False, "engine-and-model-arg", _spec(scorer={"name": "openai-judge", "args": {"model": "m"},
                                                      "engine": _ENGINE}), ["spec.scorer.args", "drop base_url and model"]),
        (True, "engine-and-form", _spec(scorer={"name": "openai-judge", "args": {"form": "yes-probability"},
                                                "engine": _ENGINE}), []),
    ],
    ("spec.scorer", _ENGINE_OWN_WEIGHTS): [
        (False, "engine-and-scorer-model", _spec(scorer={"name": "openai-judge", "model": {"pvc": {"claimName": "w"}},
                                                         "engine": _ENGINE}),
         ["spec.scorer.engine.model", "the engine's weights go in engine.model"]),
        (False, "engine-and-model-path", _spec(scorer={"name": "openai-judge", "modelPath": "/m", "engine": _ENGINE}),
         ["spec.scorer.engine.model", "not in the scorer's model or modelPath"]),
        (True, "engine-alone", _spec(scorer={"name": "openai-judge", "engine": _ENGINE}), []),
    ],
    ("spec.scorer.engine", _ENGINE_GGUF): [
        (False, "llamacpp-no-file", _spec(scorer={"name": "openai-judge", "engine": {**_ENGINE, "kind": "llamacpp"}}),
         ["spec.scorer.engine.modelFile", "llamacpp serves one GGUF file"]),
        (True, "llamacpp-file", _spec(scorer={"name": "openai-judge", "engine": {**_ENGINE, "kind": "llamacpp",
                                                                                "modelFile": "q4.gguf"}}), []),
    ],
    ("spec.scorer.engine", _ENGINE_TP): [
        (False, "tp-over-gpus", _spec(scorer={"name": "openai-judge", "engine": {**_ENGINE, "gpus": 2,
                                                                                "tensorParallel": 4}}),
         ["spec.scorer.engine.tensorParallel", "more than its GPUs"]),
        (True, "tp-of-gpus", _spec(scorer={"name": "openai-judge", "engine": {**_ENGINE, "gpus": 4,
                                                                             "tensorParallel": 2}}), []),
        (True, "tp-without-gpus", _spec(scorer={"name": "openai-judge", "engine": {**_ENGINE, "tensorParallel": 2}}),
         []),
    ],
    ("spec.scorer.engine.model", _SOURCE): [
        (False, "engine-source-none", _spec(scorer={"name": "openai-judge", "engine": {"kind": "vllm", "model": {}}}),
         ["spec.scorer.engine.model", "exactly one source"]),
        (True, "engine-source-cache", _spec(scorer={"name": "openai-judge", "engine": {
            "kind": "vllm", "model": {"cache": {"name": "qwen"}}}}), []),
    ],
    ("spec.scorers[0].engine.model", _SOURCE): [
        (False, "entry-engine-source-two", _spec(scorer={"batchSize": 1}, scorers=[{"name": "openai-judge", "engine": {
            "kind": "vllm", "model": {"pvc": {"claimName": "w"}, "image": {"reference": "r"}}}}]),
         ["spec.scorers[0].engine.model", "exactly one source"]),
        (True, "entry-engine-source-image", _spec(scorer={"batchSize": 1}, scorers=[{"name": "openai-judge", "engine": {
            "kind": "vllm", "model": {"image": {"reference": "r/qwen:1"}}}}]), []),
    ],
    ("spec.scorers[0]", _ENGINE_JUDGE_ONLY): [
        (False, "entry-engine-for-ocr", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "ocr", "modelPath": "/m", "engine": _ENGINE}]), ["spec.scorers[0].engine", "an engine serves a judge"]),
        (True, "entry-engine-for-judge", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": _ENGINE}]), []),
    ],
    ("spec.scorers[0]", _ENGINE_NO_URL): [
        (False, "entry-engine-and-base-url", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "args": _JUDGE_ARGS, "engine": _ENGINE}]),
         ["spec.scorers[0].args", "drop base_url and model"]),
        (True, "entry-engine-and-rubric", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "args": {"rubric": "Is it good?"}, "engine": _ENGINE}]), []),
    ],
    ("spec.scorers[0]", _ENGINE_OWN_WEIGHTS): [
        (False, "entry-engine-and-model", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "modelPath": "/m", "engine": _ENGINE}]),
         ["spec.scorers[0].engine.model", "the engine's weights go in engine.model"]),
        (True, "entry-engine-weights", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": _ENGINE}]), []),
    ],
    ("spec.scorers[0].engine", _ENGINE_GGUF): [
        (False, "entry-llamacpp-no-file", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": {**_ENGINE, "kind": "llamacpp"}}]),
         ["spec.scorers[0].engine.modelFile", "llamacpp serves one GGUF file"]),
        (True, "entry-llamacpp-file", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": {**_ENGINE, "kind": "llamacpp", "modelFile": "j.gguf"}}]), []),
    ],
    ("spec.scorers[0].engine", _ENGINE_TP): [
        (False, "entry-tp-over-gpus", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": {**_ENGINE, "gpus": 1, "tensorParallel": 2}}]),
         ["spec.scorers[0].engine.tensorParallel", "more than its GPUs"]),
        (True, "entry-tp-equal", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": {**_ENGINE, "gpus": 2, "tensorParallel": 2}}]), []),
    ],
    "!has(self.scorers) || !has(self.scorer.engine)": [
        (False, "shared-engine", _spec(scorer={"batchSize": 1, "engine": _ENGINE}, scorers=[
            {"name": "openai-judge", "args": _JUDGE_ARGS}]), ["spec.scorer.engine", "name the engine on the component"]),
        (True, "component-engine", _spec(scorer={"batchSize": 1}, scorers=[{"name": "openai-judge", "engine": _ENGINE}]),
         []),
    ],
    "!has(self.name) || self.name != 'hps' || (has(self.modelPath) && self.modelPath != '') || has(self.model)": [
        (False, "hps-no-model", _spec(scorer={"name": "hps"}), ["spec.scorer.modelPath", "hps needs scorer.model"]),
        (True, "hps-with-model", _spec(scorer={"name": "hps", "modelPath": "/m/HPS_v2.1_compressed.pt"}), []),
    ],
    "!has(self.name) || self.name != 'ocr' || (has(self.modelPath) && self.modelPath != '') || has(self.model)": [
        (False, "ocr-no-model", _spec(scorer={"name": "ocr"}), ["spec.scorer.modelPath", "ocr needs scorer.model"]),
        (True, "ocr-with-model", _spec(scorer={"name": "ocr", "modelPath": "/models/ocr"}), []),
    ],
    ("spec.scorer", _HPS_VERSION): [
        (False, "hps-version-unknown", _spec(scorer={"name": "hps", "modelPath": "/m", "args": {"version": "v3"}}),
         ["spec.scorer.args.version", "v2.1 (the default) or v2.0"]),
        (True, "hps-version-v2.0", _spec(scorer={"name": "hps", "modelPath": "/m", "args": {"version": "v2.0"}}), []),
        (True, "other-version-any", _spec(scorer={"class": "p.m:C", "args": {"version": 7}}), []),
    ],
    ("spec.scorers[0]", _HPS_VERSION): [
        (False, "entry-hps-version-unknown", _spec(scorer={"batchSize": 1, "modelPath": "/m"}, scorers=[
            {"name": "hps", "args": {"version": "2.1"}}]), ["spec.scorers[0].args.version", "v2.1 (the default)"]),
        (True, "entry-hps-version-v2.1", _spec(scorer={"batchSize": 1, "modelPath": "/m"}, scorers=[
            {"name": "hps", "args": {"version": "v2.1"}}]), []),
    ],
    ("spec.scorers[0]", _JUDGE): [
        (False, "entry-judge-no-base-url", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "args": {"model": "m"}}]), ["spec.scorers[0].args", "needs args.base_url"]),
        (True, "entry-judge-complete", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "args": _JUDGE_ARGS}]), []),
        (True, "entry-judge-hosted", _spec(scorer={"batchSize": 1}, scorers=[
            {"name": "openai-judge", "engine": _ENGINE}]), []),
    ],
    ("spec.scorer.args", _NO_SECRET): [
        (False, "api-key-inline", _spec(scorer={"name": "openai-judge", "args": {**_JUDGE_ARGS, "api_key": "sk-1"}}),
         ["spec.scorer.args", "a key never goes in args", "apiKeySecret"]),
        (False, "token-inline", _spec(scorer={"class": "p.m:C", "args": {"token": "t"}}),
         ["spec.scorer.args", "a key never goes in args"]),
        (True, "plain-args", _spec(scorer={"class": "p.m:C", "args": {"threshold": 3}}), []),
    ],
    ("spec.scorers[0].args", _NO_SECRET): [
        (False, "entry-api-key-inline", _spec(scorer={"batchSize": 1}, scorers=[
            {"class": "p.m:C", "key": "c", "args": {"apiKey": "k"}}]), ["spec.scorers[0].args", "a key never goes in args"]),
        (True, "entry-plain-args", _spec(scorer={"batchSize": 1}, scorers=[{"class": "p.m:C", "key": "c", "args": {"x": 1}}]),
         []),
    ],
    ("spec.podTemplate.spec.securityContext", _SECCOMP): [
        (False, "pod-seccomp-unconfined", _pod_sc(seccompProfile={"type": "Unconfined"}),
         ["spec.podTemplate.spec.securityContext.seccompProfile.type", "seccompProfile Unconfined is not allowed"]),
        (True, "pod-seccomp-localhost", _pod_sc(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}), []),
    ],
    ("spec.podTemplate.spec.securityContext", _APPARMOR): [
        (False, "pod-apparmor-unconfined", _pod_sc(appArmorProfile={"type": "Unconfined"}),
         ["spec.podTemplate.spec.securityContext.appArmorProfile.type", "appArmorProfile Unconfined is not allowed"]),
        (True, "pod-apparmor-default", _pod_sc(appArmorProfile={"type": "RuntimeDefault"}), []),
    ],
    **_container_cel_cases("containers"),
    **_container_cel_cases("initContainers"),
    ("spec.podTemplate.spec.volumes[0]", "!has(self.hostPath)"): [
        (False, "host-path", _spec(podTemplate={"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}}),
         ["spec.podTemplate.spec.volumes[0].hostPath", "hostPath volumes are not allowed"]),
        (True, "empty-dir", _spec(podTemplate={"spec": {"volumes": [{"name": "e", "emptyDir": {}}]}}), []),
    ],
    "!has(self.automountServiceAccountToken) || self.automountServiceAccountToken != true": [
        (False, "automount", _spec(podTemplate={"spec": {"automountServiceAccountToken": True}}),
         ["automountServiceAccountToken is not allowed"]),
        (True, "no-automount", _spec(podTemplate={"spec": {"automountServiceAccountToken": False}}), []),
    ],
}


def cel_cases(b: Bound) -> list[Case]:
    key = (dotted(b.path), b.detail) if (dotted(b.path), b.detail) in CEL_CASES else b.detail
    if key not in CEL_CASES:
        raise CannotDerive(f"{dotted(b.path) or '<root>'}: CEL rule {b.detail!r} has no entry in CEL_CASES")
    return [Case(b, ok, copy.deepcopy(m), what, [] if ok else expect) for ok, what, m, expect in CEL_CASES[key]]


def all_cases(schema: dict | None = None) -> tuple[list[Case], list[str]]:
    """Every generated case, and every bound for which none could be generated (with why)."""
    schema = schema if schema is not None else load_schema()
    cases, problems = [], []
    for b in bounds(schema):
        try:
            got = cases_for(b, schema)
        except (CannotDerive, KeyError) as e:
            problems.append(f"{b.id}: {e}")
            continue
        if not any(c.accept for c in got) or not any(not c.accept for c in got):
            problems.append(f"{b.id}: needs both an accepted and a rejected case")
        cases += got
    return cases, problems


def coverage_problems(schema: dict | None = None) -> list[str]:
    schema = schema if schema is not None else load_schema()
    _, problems = all_cases(schema)
    problems += [f"unknown schema keyword {k}: teach tests/crd_bounds.py what it bounds" for k in unknown_keywords(schema)]
    rules = {b.detail for b in bounds(schema) if b.keyword == CEL}
    rules |= {(dotted(b.path), b.detail) for b in bounds(schema) if b.keyword == CEL}
    problems += [f"CEL_CASES entry for a rule the CRD no longer has: {r!r}" for r in CEL_CASES if r not in rules]
    paths = {dotted(p) for p, _ in walk(schema)}
    problems += [f"{t} names a field the CRD does not have: {k}" for t, table in
                 (("VALID_STRINGS", VALID_STRINGS), ("INVALID_STRINGS", INVALID_STRINGS), ("CONTEXT", CONTEXT))
                 for k in table if k not in paths]
    return problems
