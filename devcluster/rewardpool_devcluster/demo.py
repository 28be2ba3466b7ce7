"""The demo on its environment (environment.py): a 2-worker RewardPool of real containers on the real node,
then a training job's reward step scoring generated videos through it, and what to look at next."""
from __future__ import annotations

import json
import time

from .environment import DEMO_DIR, Environment, step
from .incluster import job_result, real_node_pool, rollout_job_objects, startup_breakdown

NS = "demo"
POOL = "pickscore-demo"
ATTACHMENT = f"{NS}/macvlan-store"


def run(env: Environment, t0: float) -> int:
    """0 when the job scored; 1 (environment left running, to look at) when the pool or the job failed.
    `t0`: when the demo began, environment included."""
    env.kubectl("create", "namespace", NS, check=False)
    env.apply([env.node.macvlan_attachment(NS)])
    if not _pool_ready(env):
        return 1
    step("a rollout job puts 32 generated videos (LTX-2.3-shaped uint8 tensors, scaled down) into the store, "
         "scores them through the pool client, releases them")
    result = _rollout(env)
    if result is None:
        return 1
    _report(env, result, t0)
    return 0


def _pool_ready(env: Environment) -> bool:
    step("applying a 2-worker RewardPool on the real node (macvlan secondary network, tcp store)")
    k = env.kubectl
    t_apply = time.monotonic()
    env.apply([real_node_pool(POOL, NS, env.node.images.worker, replicas=2, attachment=ATTACHMENT)])
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
    env.apply(rollout_job_objects("rollout", NS, env.node.images.worker, POOL, samples=32, frames=9, height=128,
                                  width=192, batch=4, attachment=ATTACHMENT))
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


def _report(env: Environment, r: dict, t0: float) -> None:
    k, key = env.kubectl, env.node.key
    print()
    print(f"scored {r['scored']} outputs in {r['seconds']:.2f} s ({r['scored'] / r['seconds']:.1f} outputs/s) "
          f"across {r['workers']} workers; {r['left']} left in the store")
    print(f"first scores: {r['first_scores']}")
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
