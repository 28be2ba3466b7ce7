"""The demo on its environment (environment.py): a 2-worker PickScore RewardPool of real containers on the real
node, then a training job's reward step scoring generated videos through it, and what to look at next.

The workers run the production PickScore scorer on a CLIP with random weights (nothing can be downloaded
here), built once per version into the cache and served to the pods from a local PersistentVolume, as a real
cluster serves model weights from a volume. Its size is the demo's option (REWARDPOOL_DEMO_MODEL: tiny, small
by default, or clip-h14, PickScore's own shapes, which two cores score at ~0.15 frames/s)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from .environment import DEMO_DIR, Environment, step
from .incluster import MODELS_DIR, job_result, real_node_pool, rollout_job_objects, startup_breakdown
from .realnode_config import NODE_NAME

NS = "demo"
POOL = "pickscore-demo"
ATTACHMENT = f"{NS}/macvlan-store"
MODEL_CLAIM = "demo-model"
# The rollout's videos: LTX-2.3's 121 frames, (C, F, H, W) uint8 as the framework lays them out, scaled down in
# height and width; PickScore picks 3 frames, so a worker reads 3/121 of each output.
SAMPLES, FRAMES, HEIGHT, WIDTH, NUM_FRAMES = 32, 121, 96, 128, 3
OUTPUT_BYTES = 3 * FRAMES * HEIGHT * WIDTH


def run(env: Environment, t0: float) -> int:
    """0 when the job scored; 1 (environment left running, to look at) when the pool or the job failed.
    `t0`: when the demo began, environment included."""
    size = os.environ.get("REWARDPOOL_DEMO_MODEL", "small")
    env.kubectl("create", "namespace", NS, check=False)
    model = demo_model(size)
    env.apply([env.node.macvlan_attachment(NS), *model_volume(model)])
    if not _pool_ready(env, f"{MODELS_DIR}/{model.name}"):
        return 1
    step(f"a rollout job puts {SAMPLES} generated videos (LTX-2.3-shaped (3, {FRAMES}, {HEIGHT}, {WIDTH}) uint8) "
         "into the store, scores them through the pool client, releases them")
    result = _rollout(env)
    if result is None:
        return 1
    _report(env, result, t0, size)
    return 0


def demo_model(size: str) -> Path:
    """The random-weight CLIP the workers load, built once per (size, builder, transformers version)."""
    import transformers

    from . import random_clip

    key = hashlib.sha256(f"{size} {transformers.__version__} ".encode()
                         + Path(random_clip.__file__).read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool")) / "models"
    path = cache / f"clip-{size}-{key}"
    if not (path / ".complete").exists():
        step(f"building the demo's random-weight CLIP ({size}) into {path} (once per version)")
        shutil.rmtree(path, ignore_errors=True)
        random_clip.build(path, size)
        (path / ".complete").touch()
    return path


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


def _pool_ready(env: Environment, model_path: str) -> bool:
    step("applying a 2-worker PickScore RewardPool on the real node (macvlan secondary network, tcp store, the "
         "model from the volume, read slots sized for the picked frames)")
    k = env.kubectl
    t_apply = time.monotonic()
    scorer = {"name": "pickscore", "numFrames": NUM_FRAMES, "batchSize": 4, "modelPath": model_path,
              "modelMemory": "512Mi", "framesPerForward": 12}
    env.apply([real_node_pool(POOL, NS, env.node.images.worker, replicas=2, attachment=ATTACHMENT, scorer=scorer,
                              samples=SAMPLES, output_bytes=str(OUTPUT_BYTES), frames_per_sample=FRAMES,
                              model_claim=MODEL_CLAIM)])
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
    """The job's JSON result, or None (its log printed) when it did not succeed."""
    k = env.kubectl
    env.apply(rollout_job_objects("rollout", NS, env.node.images.worker, POOL, samples=SAMPLES, frames=FRAMES,
                                  height=HEIGHT, width=WIDTH, batch=4, attachment=ATTACHMENT))
    deadline = time.monotonic() + 300
    while True:
        st = json.loads(k("get", "job", "-n", NS, "rollout", "-o", "json").stdout).get("status", {})
        if st.get("succeeded") or st.get("failed") or time.monotonic() > deadline:
            break
        time.sleep(1)
    logs = k("logs", "-n", NS, "job/rollout", "--tail=200", check=False).stdout
    if not st.get("succeeded"):
        print(logs)
        step("the rollout job failed (log above)")
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


def _report(env: Environment, r: dict, t0: float, size: str) -> None:
    k, key = env.kubectl, env.node.key
    w = worker_figures(_worker_metrics(env))
    print()
    print(f"scored {r['scored']} outputs in {r['seconds']:.2f} s ({r['scored'] / r['seconds']:.1f} outputs/s) "
          f"across {r['workers']} workers; {r['left']} left in the store")
    print(f"first scores: {r['first_scores']}  (PickScore on the random-weight `{size}` CLIP: real code, "
          "meaningless values)")
    print(f"per output, on the workers: read {w['read_s'] * 1000:.1f} ms ({w['read_bytes'] / 1e3:.0f} kB moved: "
          f"{NUM_FRAMES} of {FRAMES} frames of a {OUTPUT_BYTES / 1e6:.2f} MB output), score "
          f"{w['score_s'] * 1000:.1f} ms ({w['outputs']} outputs)")
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
