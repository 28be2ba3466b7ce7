"""The demo on its environment (environment.py): a 2-worker RewardPool of real containers on the real node
scoring as the origin's SD3.5 run scored (PickScore + HPS + OCR, miles' weighted mixture, its reward names as
keys), then a training job's reward step scoring generated images whose prompts quote the text to render through
Ray, beside an evaluation job in another namespace scoring over HTTP (the pool's Service and EndpointSlices, its
tenant token, no Ray), and what to look at next.

The workers run the production scorers on models with random weights (nothing can be downloaded here): a CLIP
for PickScore (its size is the demo's option, REWARDPOOL_DEMO_MODEL: tiny, small by default, or clip-h14,
PickScore's own shapes), HPS's open_clip on a small config, PaddleOCR's pipeline on small networks; each built
once per version into the cache. PickScore's weights reach the pods as an OCI image (packaged with buildah,
imported into the node's containerd, mounted as an `image` volume: scorer.model.image), the others from a local
PersistentVolume (scorer.model.pvc), the two ways a real cluster serves model weights."""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from pathlib import Path

from .environment import DEMO_DIR, Environment, step
from .incluster import http_job_objects, job_result, real_node_pool, rollout_job_objects, startup_breakdown
from .realnode_config import NODE_NAME

NS = "demo"
POOL = "sd35-demo"
EVAL_NS, TENANT = "demo-eval", "eval"  # the HTTP job's namespace, and its tenant of the pool
ATTACHMENT = f"{NS}/macvlan-store"
MODEL_CLAIM = "demo-model"
# The rollout's images: SD3.5 outputs, (C, 1, H, W) uint8 (a one-frame video, as the framework lays images out),
# scaled down; each prompt quotes the text the image should show (the OCR reward's target).
SAMPLES, FRAMES, HEIGHT, WIDTH = 32, 1, 256, 256
OUTPUT_BYTES = 3 * FRAMES * HEIGHT * WIDTH
PROMPT = 'a shop sign that reads "Grand Opening {i}"'
COMPONENTS = ("pickscore", "hps", "ocr")


def run(env: Environment, t0: float) -> int:
    """0 when the job scored; 1 (environment left running, to look at) when the pool or the job failed.
    `t0`: when the demo began, environment included."""
    size = os.environ.get("REWARDPOOL_DEMO_MODEL", "small")
    for ns in (NS, EVAL_NS):
        env.kubectl("create", "namespace", ns, check=False)
    models = demo_models(size)
    token = secrets.token_hex(16)  # the eval job's tenant token, in a Secret the pool lists
    env.apply([env.node.macvlan_attachment(NS), *model_volume(models["pickscore"]),
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{TENANT}-token", "namespace": NS},
                "stringData": {"token": token}}])
    step("packaging the PickScore weights as an OCI image (buildah, weights only) into the node's containerd")
    pick_image = env.node.import_model(models["pickscore"], f"pickscore-{size}")
    if not _pool_ready(env, {k: m.name for k, m in models.items()}, pick_image):
        return 1
    step(f"a rollout job puts {SAMPLES} generated images (SD3.5 outputs, (3, 1, {HEIGHT}, {WIDTH}) uint8, prompts "
         "like '" + PROMPT.format(i=0) + "') into the store, scores them through the pool client (Ray), releases "
         f"them; beside it an eval job in namespace {EVAL_NS} scores its own outputs over HTTP (tenant {TENANT})")
    env.apply(http_job_objects("eval-http", EVAL_NS, env.node.images.worker, POOL, NS, token, "guess", frames=1))
    result = _rollout(env)
    evaluation = _job(env, EVAL_NS, "eval-http")
    if result is None or evaluation is None:
        return 1
    _report(env, result, evaluation, t0, size)
    return 0


def demo_models(size: str) -> dict[str, Path]:
    """The random-weight models the workers load, each built once per (builder, library version) into one cache
    directory (the volume's): PickScore's CLIP of `size`, HPS's small open_clip, PaddleOCR's models."""
    from importlib.metadata import version as installed

    from . import random_clip, random_hps, random_ocr

    cache = Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool")) / "models"
    builds = {
        "pickscore": (f"clip-{size}", f"{size} {installed('transformers')}", random_clip,
                      lambda p: random_clip.build(p, size)),
        "hps": ("hps-tiny", f"tiny {installed('open_clip_torch')}", random_hps, lambda p: random_hps.build(p, "tiny")),
        "ocr": ("ppocr-random", installed("paddlepaddle"), random_ocr, lambda p: random_ocr.build(p)),
    }
    out = {}
    for component, (name, version, module, build) in builds.items():
        key = hashlib.sha256(f"{version} ".encode() + Path(module.__file__).read_bytes()).hexdigest()[:12]
        path = cache / f"{name}-{key}"
        if not (path / ".complete").exists():
            step(f"building the demo's random-weight {component} model into {path} (once per version)")
            shutil.rmtree(path, ignore_errors=True)
            build(path)
            (path / ".complete").touch()
        out[component] = path
    return out


def model_volume(model: Path) -> list[dict]:
    """A local PersistentVolume on the real node holding the model directory's parent, bound to one claim."""
    pv = f"rewardpool-{MODEL_CLAIM}"
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
         "spec": {"capacity": {"storage": "8Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "persistentVolumeReclaimPolicy": "Retain", "local": {"path": str(model.parent)},
                  "claimRef": {"namespace": NS, "name": MODEL_CLAIM},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": MODEL_CLAIM, "namespace": NS},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                  "resources": {"requests": {"storage": "8Gi"}}}},
    ]


def pool_scorers(dirs: dict[str, str], pick_image: str | None = None) -> tuple[dict, list[dict]]:
    """The pool's scorer (what the components share) and its components: miles' SD3.5 mixture, ocr optional (a
    prompt without quoted text scores the others). Each component's weights are a directory (`dirs`) of the model
    claim, which the operator mounts for it (scorer.model.pvc with its subPath) at /models/<component>; PickScore's
    come from `pick_image` when given (scorer.model.image, an `image` volume)."""
    from .random_hps import TINY

    def model(name: str) -> dict:
        if name == "pickscore" and pick_image:
            return {"image": {"reference": pick_image, "pullPolicy": "IfNotPresent"}}
        return {"pvc": {"claimName": MODEL_CLAIM, "subPath": dirs[name]}}
    shared = {"batchSize": 4}
    return shared, [
        {"name": "pickscore", "model": model("pickscore"), "weight": 1.0, "modelMemory": "512Mi",
         "framesPerForward": 12},
        {"name": "hps", "model": model("hps"), "args": {"architecture": TINY}, "weight": 1.0,
         "modelMemory": "256Mi"},
        {"name": "ocr", "model": model("ocr"), "weight": 1.0, "required": False, "modelMemory": "512Mi"}]


def _pool_ready(env: Environment, paths: dict[str, str], pick_image: str) -> bool:
    step("applying a 2-worker RewardPool scoring pickscore + hps + ocr on the real node (macvlan secondary "
         "network, tcp store; PickScore from its image, the others from the claim, all mounted by the operator: "
         "scorer.model.image, scorer.model.pvc)")
    k = env.kubectl
    t_apply = time.monotonic()
    scorer, scorers = pool_scorers(paths, pick_image)
    env.apply([real_node_pool(POOL, NS, env.node.images.worker, replicas=2, attachment=ATTACHMENT, scorer=scorer,
                              scorers=scorers, samples=SAMPLES, output_bytes=str(OUTPUT_BYTES),
                              frames_per_sample=FRAMES,
                              tenants=[{"name": TENANT, "tokenSecret": {"name": f"{TENANT}-token"}}])])
    deadline = time.monotonic() + 300
    while k("wait", "--for=condition=Ready", "-n", NS, f"rewardpool/{POOL}", "--timeout=10s",
            check=False).returncode != 0:
        if time.monotonic() > deadline:
            print(k("describe", "rewardpool", "-n", NS, POOL, check=False).stdout)
            print(k("get", "pods", "-n", NS, "-o", "wide", check=False).stdout)
            return False
        listing = k("get", "pods", "-n", NS, "--no-headers", check=False).stdout.strip()
        print("    ...", listing.replace("\n", "\n    ... "), flush=True)
    step(f"pool Ready {time.monotonic() - t_apply:.1f}s after apply (2 real containers, image present)")
    pods = json.loads(k("get", "pods", "-n", NS, "-l", f"rewardpool.io/pool={POOL}", "-o", "json").stdout)["items"]
    for pod in pods:
        print(f"    start-up of {pod['metadata']['name']}:")
        for phase, secs in startup_breakdown(k, NS, pod):
            print(f"      {secs:6.1f}s  {phase}")
    return True


def _rollout(env: Environment) -> dict | None:
    """The rollout job's JSON result, or None (its log printed) when it did not succeed."""
    env.apply(rollout_job_objects("rollout", NS, env.node.images.worker, POOL, samples=SAMPLES, frames=FRAMES,
                                  height=HEIGHT, width=WIDTH, batch=4, attachment=ATTACHMENT, pattern="poster",
                                  prompt=PROMPT))
    return _job(env, NS, "rollout")


def _job(env: Environment, ns: str, name: str) -> dict | None:
    """A job's JSON result line, or None (its log printed) when it did not succeed."""
    k = env.kubectl
    deadline = time.monotonic() + 300
    while True:
        st = json.loads(k("get", "job", "-n", ns, name, "-o", "json").stdout).get("status", {})
        if st.get("succeeded") or st.get("failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    logs = k("logs", "-n", ns, f"job/{name}", "--tail=200", check=False).stdout
    if not st.get("succeeded"):
        print(logs)
        step(f"the {name} job failed (log above)")
        return None
    return job_result(logs)


def worker_figures(metrics_texts: list[str]) -> dict:
    """Per output, over the pool's workers (their /metrics): read and score seconds, and bytes read."""
    from prometheus_client.parser import text_string_to_metric_families

    total: dict[str, float] = {}
    for text in metrics_texts:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                total[s.name] = total.get(s.name, 0.0) + s.value
    n = total.get("rewardpool_worker_scored_outputs_total", 0.0)
    per = lambda name: total.get(name, 0.0) / max(total.get(name.replace("_sum", "_count"), 0.0), 1)  # noqa: E731
    return {"outputs": int(n), "read_s": per("rewardpool_worker_output_read_seconds_sum"),
            "score_s": per("rewardpool_worker_output_score_seconds_sum"),
            "read_bytes": total.get("rewardpool_worker_read_bytes_total", 0.0) / max(n, 1)}


def _worker_metrics(env: Environment) -> list[str]:
    """Each worker's /metrics through the API server's pod proxy (what Prometheus scrapes), after the one
    second the entrypoint takes to copy the actor's counts."""
    time.sleep(2)
    pods = json.loads(env.kubectl("get", "pods", "-n", NS, "-l", f"rewardpool.io/pool={POOL}", "-o",
                                  "json").stdout)["items"]
    return [env.kubectl("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}:8000/proxy/metrics",
                        check=False).stdout for p in pods]


def _report(env: Environment, r: dict, evaluation: dict, t0: float, size: str) -> None:
    k, key = env.kubectl, env.node.key
    w = worker_figures(_worker_metrics(env))
    print()
    print(f"scored {r['scored']} outputs in {r['seconds']:.2f} s ({r['scored'] / r['seconds']:.1f} outputs/s) "
          f"across {r['workers']} workers; {r['left']} left in the store")
    means = r.get("component_means") or {}
    print("mean per component: " + ", ".join(f"{k} {means.get(k)}" for k in (*COMPONENTS, "weighted"))
          + f"  (random weights: real code, meaningless values; PickScore on the `{size}` CLIP)")
    print(f"first scores: {r['first_scores'][:2]}")
    print(f"per output, on the workers: read {w['read_s'] * 1000:.1f} ms ({w['read_bytes'] / 1e3:.0f} kB moved of "
          f"a {OUTPUT_BYTES / 1e3:.0f} kB image), score {w['score_s'] * 1000:.1f} ms by the three scorers "
          f"({w['outputs']} outputs)")
    c = evaluation["client"]
    print(f"eval job over HTTP ({EVAL_NS}, tenant {TENANT}, no Ray): {evaluation.get('scored')} items (stored images, "
          f"a PNG, a safetensors image) in {evaluation['seconds']:.2f} s through {POOL}-score; again through the "
          f"Python client, which routed over {c['members'] if not c['via_service'] else 'the Service'}: "
          f"{c['scored']} scored; no token {evaluation['codes']['no_token']}, a wrong one "
          f"{evaluation['codes']['wrong_token']}, a pickle naming a class {evaluation['codes']['pickled_class']}")
    print()
    print(k("get", "nodes", "-o", "wide").stdout)  # the real node next to the kwok ones
    print(k("get", "rp", "-A").stdout)
    print(k("get", "pods", "-A", "-o", "wide").stdout)
    print(f"export KUBECONFIG={env.cluster.kubeconfig}   # kubectl from inside the namespace: "
          f"nsenter --net=/run/netns/{key} kubectl ...")
    print(f"nsenter --net=/run/netns/{key} rewardpool status -n {NS} {POOL} --watch   # the pool, live")
    if env.prom:
        print(f"Prometheus: nsenter --net=/run/netns/{key} curl -s '{env.prom.url}/api/v1/query' --data-urlencode "
              f"'query=sum by (pool) (rewardpool_worker_scored_outputs_total)'   # the dashboard: "
              "charts/rewardpool-operator/dashboards/rewardpool.json")
    print(f"logs: {DEMO_DIR} (kubelet.log, containerd.log, cp/*.log)")
    print(f"demo took {time.monotonic() - t0:.0f}s; stop everything with: make down")
