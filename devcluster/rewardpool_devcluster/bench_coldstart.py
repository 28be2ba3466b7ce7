"""`rewardpool-bench coldstart`: from `replicas: 0` to the first output scored, on the real node, with the model
from a PersistentVolumeClaim on the node's disk (scorer.model.pvc; issue 34's case (a)), from an OCI image in the
node's containerd mounted as an `image` volume (scorer.model.image; case (b), PickScore only: the file set as an
image would sit on this disk three times, in buildah's store, containerd's content and its snapshot) and from a
RewardModelCache's copy on the node (scorer.model.cache; case (c)), broken down by phase. The cache is filled and
the image imported first (their times are reported) and are not part of the cold start: a pool scaling from zero
finds them there.

Two models: PickScore at its real shapes (CLIP-H/14 built with random weights through transformers' own CLIP:
about 3.9 GB of float32 safetensors) and a file set of a judge's size (--fileset-gb, 16 by default) read whole by
a scorer that streams every byte from the disk into the process (16 MiB reads, nothing kept: the loader's disk
traffic without the RAM a 16 GB model would need on this machine). Each run first drops the page cache, so the
weights come from the disk; the disk's own read time for the same files (dd, O_DIRECT, page cache dropped) is
measured in the same run as the limit. The phases: the pod's (created, scheduled, container started, Ready) from
its conditions, the worker's own start-up steps from its /healthz (imports, network, Ray, model wait, actor:
store client and buffers, weight load with its bytes, warm-up, registration), and the first score: a request
through the API server's pod proxy the moment the pool is Ready. Needs the demo's environment (it starts it, and
stops it at the end):

  make down; REWARDPOOL_NETNS=rewardpool-demo bash scripts/in-netns.sh python -m rewardpool_devcluster.bench coldstart
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from .environment import Environment, down, step, up
from .incluster import real_node_pool
from .realnode_config import NODE_NAME
from .stack import OPERATOR_NS

NS, CLAIM = "coldstart", "coldstart-models"
SOURCE_CLAIM = "coldstart-models-source"  # the same directory, claimed in the operator's namespace: caches' source
CHUNK = 16 << 20
FILESET_SCORER = '''"""A scorer whose model is a file set it reads whole at start (bench_coldstart): the disk traffic of loading a
judge's weights, streamed (nothing kept)."""
import os
import time


class FileSetScorer:
    quantise = "truncate"

    def __init__(self, model_path):
        t0, self.bytes = time.perf_counter(), 0
        for root, _, files in os.walk(model_path):
            for name in sorted(files):
                with open(os.path.join(root, name), "rb", buffering=0) as f:
                    while chunk := f.read(16 << 20):
                        self.bytes += len(chunk)
        self.read_seconds = time.perf_counter() - t0

    def warmup(self):
        pass

    def score_batch(self, outputs, prompts):
        return [float(o.float().mean()) / 255.0 for o in outputs]
'''


def add_arguments(ap) -> None:
    ap.add_argument("--fileset-gb", type=int, default=16, help="the judge-sized file set, GB")
    ap.add_argument("--runs", type=int, default=1, help="cold starts per model")
    ap.add_argument("--keep", action="store_true", help="leave the environment running at the end")


def models_dir() -> Path:
    return Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool")) / "coldstart-models"


def build_models(root: Path, fileset_gb: int) -> dict[str, Path]:
    """The models, each built once into `root` (the claim's directory): PickScore's CLIP-H/14 shapes and the file
    set. Returns component -> directory."""
    from importlib.metadata import version as installed

    from . import random_clip

    clip = root / f"clip-h14-{installed('transformers')}"
    if not (clip / ".complete").exists():
        step(f"building a CLIP-H/14-shaped model with random weights into {clip} (once; ~4 GB)")
        random_clip.build(clip, "clip-h14")
        (clip / ".complete").touch()
    fileset = root / f"fileset-{fileset_gb}g"
    if not (fileset / ".complete").exists():
        step(f"writing a {fileset_gb} GB file set into {fileset} (once)")
        fileset.mkdir(parents=True, exist_ok=True)
        block = os.urandom(64 << 20)
        for i in range(fileset_gb):
            with open(fileset / f"shard-{i:03d}.bin", "wb") as f:
                for _ in range((1 << 30) // len(block)):
                    f.write(block)
        (fileset / ".complete").touch()
    return {"pickscore": clip, "fileset": fileset}


def _local_claim(root: Path, namespace: str, claim: str) -> list[dict]:
    pv = f"rewardpool-{claim}"
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
         "spec": {"capacity": {"storage": "64Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "persistentVolumeReclaimPolicy": "Retain", "local": {"path": str(root)},
                  "claimRef": {"namespace": namespace, "name": claim},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                  "resources": {"requests": {"storage": "64Gi"}}}}]


def volume(root: Path) -> list[dict]:
    return [*_local_claim(root, NS, CLAIM),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coldstart-scorer", "namespace": NS},
             "data": {"fileset_scorer.py": FILESET_SCORER}}]


def cache_name(model: str) -> str:
    return f"coldstart-{model}"


def caches(root: Path, models: dict[str, Path]) -> list[dict]:
    """The source claim in the operator's namespace and one RewardModelCache per model (on the real node)."""
    return [*_local_claim(root, OPERATOR_NS, SOURCE_CLAIM), *(
        {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardModelCache", "metadata": {"name": cache_name(m)},
         "spec": {"source": {"pvc": {"claimName": SOURCE_CLAIM, "subPath": path.name}}}}
        for m, path in models.items())]


def pools(image: str, models: dict[str, Path], source: str = "pvc", refs: dict[str, str] | None = None) -> list[dict]:
    """The PickScore and file-set pools, at replicas 0, their models from the claim (`pvc`), the caches or the
    model images (`refs`: the models that have one; the others get no pool of this source)."""
    def model(name: str) -> dict:
        if source == "cache":
            return {"cache": {"name": cache_name(name)}}
        if source == "image":  # a model without an image: its pool is dropped below
            return {"image": {"reference": (refs or {}).get(name, "-"), "pullPolicy": "IfNotPresent"}}
        return {"pvc": {"claimName": CLAIM, "subPath": models[name].name}}
    suffix = "" if source == "pvc" else f"-{source}"
    pick = real_node_pool(f"cold-pickscore{suffix}", NS, image, replicas=0, cpu="500m",
                          scorer={"name": "pickscore", "batchSize": 1, "framesPerForward": 1, "model": model("pickscore"),
                                  "modelMemory": "9Gi"})
    files = real_node_pool(f"cold-fileset{suffix}", NS, image, replicas=0, cpu="500m",
                           scorer={"class": "fileset_scorer:FileSetScorer", "batchSize": 1, "model": model("fileset"),
                                   "modelMemory": "256Mi"})
    worker = files["spec"]["podTemplate"]["spec"]["containers"][0]
    worker["env"].append({"name": "PYTHONPATH", "value": "/bench"})
    worker["volumeMounts"] = [{"name": "scorer", "mountPath": "/bench", "readOnly": True}]
    files["spec"]["podTemplate"]["spec"]["volumes"] = [{"name": "scorer", "configMap": {"name": "coldstart-scorer"}}]
    if source == "image":
        return [p for p, m in ((pick, "pickscore"), (files, "fileset")) if m in (refs or {})]
    return [pick, files]


def fill_caches(env: Environment, models: dict[str, Path]) -> dict[str, dict]:
    """Wait until each model's cache is Ready on the real node; its node entry (bytes, digest) and fill seconds."""
    out = {}
    for m in models:
        t0 = time.monotonic()
        step(f"filling the cache {cache_name(m)} on the node (copy, verify, publish)")
        while True:
            st = json.loads(env.kubectl("get", "rewardmodelcache", cache_name(m), "-o", "json").stdout).get("status")
            entry = next((e for e in (st or {}).get("nodes") or [] if e["node"] == NODE_NAME), None)
            if entry and entry["phase"] == "Ready":
                break
            if entry and entry["phase"] == "Failed" or time.monotonic() - t0 > 1800:
                raise SystemExit(f"cache {cache_name(m)}: {entry}")
            time.sleep(1)
        out[m] = {**entry, "seen_seconds": round(time.monotonic() - t0, 1)}
        print(json.dumps(out[m]), flush=True)
    return out


def remove_model_images(env: Environment) -> None:
    """The bench's model images out of the node's containerd and buildah's store (4 GB each: this disk is small)."""
    from .realnode_images import MODEL_IMAGE

    prefix = f"{MODEL_IMAGE}coldstart-"
    for ref in env.node.ctr("images", "ls", "-q", check=False).stdout.split():
        if ref.startswith(prefix):
            env.node.ctr("images", "rm", "--sync", ref, check=False)
    buildah = env.node.images.buildah()
    for ref in subprocess.run([*buildah, "images", "--format", "{{.Name}}:{{.Tag}}"], capture_output=True,
                              text=True).stdout.split():
        if ref.startswith(prefix):
            subprocess.run([*buildah, "rmi", "-f", ref], capture_output=True)


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def disk_read(directory: Path) -> tuple[float, int]:
    """Seconds and bytes to read every file of `directory` from the disk (dd, O_DIRECT, the page cache dropped)."""
    drop_caches()
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.stat().st_size >= 4096)
    t0, total = time.monotonic(), 0
    for f in files:
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=16M", "iflag=direct", "status=none"], check=True)
        total += f.stat().st_size
    return time.monotonic() - t0, total


def _ts(s: str) -> float:
    return datetime.strptime(s.rstrip("Z"), "%Y-%m-%dT%H:%M:%S").timestamp()


def cold_start(env: Environment, pool: str) -> dict:
    """Scale `pool` from 0 to 1 with the page cache dropped; the phases of its one worker, and the first score."""
    k = env.kubectl
    body = json.dumps({"items": [{"tensor": _safetensors_b64()}], "prompts": ["a cat"]}).encode()  # a small inline output
    drop_caches()
    t0 = time.time()
    k("scale", "rewardpool", "-n", NS, pool, "--replicas=1")
    deadline = time.monotonic() + 900
    while True:
        st = json.loads(k("get", "rewardpool", "-n", NS, pool, "-o", "json").stdout).get("status") or {}
        if st.get("readyReplicas") == 1 and any(c["type"] == "Ready" and c["status"] == "True"
                                                 for c in st.get("conditions", [])):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{pool}: not Ready in 900 s: {json.dumps(st)[:2000]}")
        time.sleep(0.2)
    ready_seen = time.time()
    (pod,) = json.loads(k("get", "pods", "-n", NS, "-l", f"rewardpool.io/pool={pool}", "-o", "json").stdout)["items"]
    name = pod["metadata"]["name"]
    # straight to the pod (this runs in the node's network namespace): the API server's pod proxy forwards a body
    # chunked, which the worker refuses (411: it bounds bodies by their Content-Length)
    url = f"http://{pod['status']['podIP']}:8000/v1/score"
    out = urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}),
                                 timeout=120).read()
    first = time.time()
    reply = json.loads(out)
    health = json.loads(k("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}:8000/proxy/healthz").stdout)
    conds = {c["type"]: _ts(c["lastTransitionTime"]) for c in pod["status"]["conditions"]}
    started = _ts(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    created = _ts(pod["metadata"]["creationTimestamp"])
    k("scale", "rewardpool", "-n", NS, pool, "--replicas=0")
    while json.loads(k("get", "pods", "-n", NS, "-l", f"rewardpool.io/pool={pool}", "-o", "json").stdout)["items"]:
        time.sleep(0.5)
    return {"pool": pool, "scale_to_created": created - t0, "created_to_scheduled": conds.get("PodScheduled", created)
            - created, "scheduled_to_started": started - conds.get("PodScheduled", created),
            "startup": health.get("startup") or {}, "ready_at": conds.get("Ready", ready_seen) - t0,
            "pool_ready_seen": ready_seen - t0, "first_score": first - t0, "score": reply["scores"][0],
            "errors": reply.get("errors")}


def _safetensors_b64() -> str:
    import torch
    from safetensors.torch import save

    return base64.b64encode(save({"o": torch.full((3, 1, 64, 64), 128, dtype=torch.uint8)})).decode()


def table(rows: list[dict], disk: dict[str, tuple[float, int]]) -> str:
    """The phases of each cold start as a markdown table (seconds; the weight load next to the disk's time)."""
    lines = ["| phase | " + " | ".join(r["label"] for r in rows) + " |", "|---|" + "---|" * len(rows)]

    def row(name, f):
        lines.append(f"| {name} | " + " | ".join(f(r) for r in rows) + " |")
    s = lambda key: (lambda r: f"{r['startup'].get(key, 0.0):.2f}")  # noqa: E731
    row("scale to 0 -> 1 -> pod created", lambda r: f"{r['scale_to_created']:.1f}")
    row("pod created -> scheduled", lambda r: f"{r['created_to_scheduled']:.1f}")
    row("scheduled -> container started (sandbox, CNI + Multus, the claim mounted)",
        lambda r: f"{r['scheduled_to_started']:.1f}")
    row("worker: imports and config", s("imports_seconds"))
    row("worker: network status (RoCE address)", s("network_seconds"))
    row("worker: Ray node + connect", s("ray_seconds"))
    row("worker: model wait (files present)", s("model_wait_seconds"))
    row("worker: actor, store client and registered buffers (outside the weight load)",
        lambda r: f"{r['startup'].get('actor_seconds', 0) - r['startup'].get('weight_load_seconds', 0) - r['startup'].get('warmup_seconds', 0):.2f}")
    row("worker: **weight load**", s("weight_load_seconds"))
    row("worker: beside it, store client and registered buffers", s("store_seconds"))
    row("worker: beside it, the weights' digest", s("digest_seconds"))
    row("weights read", lambda r: f"{r['startup'].get('weight_bytes', 0) / 1e9:.2f} GB")
    row("**disk's own read of the same files (dd, O_DIRECT)**", lambda r: f"{disk[r['pool']][0]:.2f}")
    row("weight load / disk read", lambda r: f"{r['startup'].get('weight_load_seconds', 0) / disk[r['pool']][0]:.2f}x")
    row("worker: warm-up forward", s("warmup_seconds"))
    row("worker: actor registered, HTTP up", s("registered_seconds"))
    row("pool Ready seen (readiness probe, operator status)", lambda r: f"{r['pool_ready_seen']:.1f}")
    row("**zero to first score**", lambda r: f"**{r['first_score']:.1f}**")
    return "\n".join(lines)


def run(args) -> int:
    env = up()
    try:
        env.kubectl("create", "namespace", NS, check=False)
        root = models_dir()
        models = build_models(root, args.fileset_gb)
        env.apply(volume(root))
        made = caches(root, models)
        env.apply(made)
        filled = fill_caches(env, models)
        from rewardpool_operator.modelcache.layout import ROOT, copy_dir, source_identity
        identity = {c["metadata"]["name"]: source_identity(c["spec"]) for c in made if c["kind"] == "RewardModelCache"}

        step("packaging the CLIP-H/14 weights as an OCI image (buildah, no base) into the node's containerd")
        t = time.monotonic()
        refs = {"pickscore": env.node.import_model(models["pickscore"], "coldstart-pickscore")}
        imported = round(time.monotonic() - t, 1)
        print(f"model image {refs['pickscore']} built and imported in {imported} s", flush=True)
        w = env.node.images.worker
        env.apply(pools(w, models) + pools(w, models, "image", refs) + pools(w, models, "cache"))
        rows, disk = [], {}
        copies = {m: Path(ROOT) / copy_dir(cache_name(m), identity[cache_name(m)]) for m in models}
        # (b)'s limit: the same files on the same disk (the image's snapshot is unpacked beside them)
        for label, pool, model in (
                ("(a) PVC: CLIP-H/14 (PickScore)", "cold-pickscore", models["pickscore"]),
                ("(b) image: CLIP-H/14 (PickScore)", "cold-pickscore-image", models["pickscore"]),
                ("(c) cache: CLIP-H/14 (PickScore)", "cold-pickscore-cache", copies["pickscore"]),
                (f"(a) PVC: file set {args.fileset_gb} GB", "cold-fileset", models["fileset"]),
                (f"(c) cache: file set {args.fileset_gb} GB", "cold-fileset-cache", copies["fileset"])):
            for i in range(args.runs):
                step(f"cold start {i + 1}/{args.runs} of {pool} (page cache dropped)")
                r = cold_start(env, pool)
                r["label"] = label if args.runs == 1 else f"{label} #{i + 1}"
                print(json.dumps(r), flush=True)
                rows.append(r)
            step(f"the disk's own read of {model.name} (dd, O_DIRECT)")
            disk[pool] = disk_read(model)
            print(f"disk: {disk[pool][1] / 1e9:.2f} GB in {disk[pool][0]:.2f} s "
                  f"({disk[pool][1] / disk[pool][0] / 1e9:.2f} GB/s)", flush=True)
        print(table(rows, disk), flush=True)
        for r in rows:
            r["disk_seconds"] = disk[r["pool"]][0]
        out = Path(".rewardpool") / "coldstart.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"rows": rows, "disk": disk, "cache_fill": filled,
                                   "image_import_seconds": imported}, indent=1))
        from .plots import coldstart_timeline

        print(f"timeline: {coldstart_timeline(rows, out.with_suffix('.png'))}", flush=True)
        for m, e in filled.items():
            print(f"cache fill {cache_name(m)}: {e['bytes'] / 1e9:.2f} GB copied and verified, Ready after "
                  f"{e['seen_seconds']} s ({e['message']})", flush=True)
        return 0
    finally:
        if not args.keep:
            remove_model_images(env)
            down()
            from rewardpool_operator.modelcache.layout import ROOT

            for m in ("pickscore", "fileset"):  # the node's copies (a cluster gone leaves no agent to remove them)
                shutil.rmtree(Path(ROOT) / cache_name(m), ignore_errors=True)
