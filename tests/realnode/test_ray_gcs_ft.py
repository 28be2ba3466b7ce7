"""A fault-tolerant Ray GCS on the real node: a Ray head whose GCS keeps its tables in an external Redis
(Debian's redis-server next to the control plane, as KubeRay's gcsFaultToleranceOptions sets a head up), and a
pool that says so (spec.ray.gcsFaultTolerance). The head's pod is deleted under a running rollout job: its
Deployment starts a new head (a new pod, a new address) that reloads the actors and their names from Redis, so
the workers keep their actors, models and buffers (no restart, unlike a head without fault tolerance, see
test_realnode), and the job scores every output."""
from __future__ import annotations

import time

import pytest

from tests.conftest import wait_for
from tests.realnode.conftest import fault_under_job, pool_ready, store_namespace

POOL = "ft"
HEAD = "ray-head-ft"
RECONNECT = 600  # what KubeRay sets on its worker pods under GCS fault tolerance


@pytest.fixture(scope="module")
def redis(node, tmp_path_factory):
    from rewardpool_devcluster.raygcs import Redis
    from rewardpool_devcluster.realnode_config import NODE_IP

    r = Redis(tmp_path_factory.mktemp("redis"), host=NODE_IP)  # the node's address: the pods reach it
    yield r
    r.stop()


@pytest.fixture(scope="module")
def ft_head(kube, node, infra, redis):
    from rewardpool_devcluster.incluster import ray_head_objects

    objs = ray_head_objects(HEAD, node.images.worker, infra, redis=redis.address,
                            attachment=f"{infra}/macvlan-store")
    kube.apply(objs)
    kube("rollout", "status", "-n", infra, f"deployment/{HEAD}", "--timeout=180s", timeout=200)
    yield HEAD
    kube("delete", "-n", infra, "deployment", HEAD, "--wait=false", check=False)
    kube("delete", "-n", infra, "service", HEAD, "--wait=false", check=False)


@pytest.fixture(scope="module")
def ft_ns(kube, incluster_operator, infra):
    yield from store_namespace(kube, incluster_operator, "ray-ft")


def _workers(kube, ns):
    return {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
            for p in kube.pods(ns, f"rewardpool.io/pool={POOL}") if not p["metadata"].get("deletionTimestamp")}


def _ready(kube, ns):
    return next(c for c in kube.json("rewardpool", "-n", ns, POOL)["status"]["conditions"] if c["type"] == "Ready")


def test_a_fault_tolerant_ray_head_restart_under_a_rollout_keeps_the_workers_and_loses_nothing(
        kube, node, ft_ns, ft_head, redis, infra):
    from rewardpool_devcluster.incluster import real_node_pool

    kube.apply([real_node_pool(POOL, ft_ns, node.images.worker, replicas=2, attachment=f"{ft_ns}/macvlan-store",
                               ray_head=ft_head, gcs_reconnect=RECONNECT, cpu="300m")])
    wait_for(pool_ready(kube, ft_ns, POOL, 2), timeout=300, interval=1, what="2 Ready workers on the FT head")
    assert redis.keys() > 0, "the head's GCS wrote nothing to its Redis: it is not fault tolerant"
    before = _workers(kube, ft_ns)
    old_head = kube.pods(infra, f"app.kubernetes.io/name={HEAD}")[0]["metadata"]["name"]
    seen_down: list[str] = []

    def restart_head():
        kube("delete", "pod", "-n", infra, old_head, "--wait=false", "--grace-period=1")
        # the new head pod up, and the workers' pods through it: the pool may say not Ready meanwhile
        def new_head():
            pods = [p for p in kube.pods(infra, f"app.kubernetes.io/name={HEAD}")
                    if p["metadata"]["name"] != old_head and any(
                        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
            c = _ready(kube, ft_ns)
            if c["status"] == "False":
                seen_down.append(c["message"])
            return pods or None
        wait_for(new_head, timeout=180, interval=0.5, what="a new Ray head pod Ready")

    result, recovered = fault_under_job(kube, node, ft_ns, "fault-ray-head", POOL, restart_head, rounds=40,
                                        pause=0.5, ray_head=ft_head, gcs_reconnect=RECONNECT)
    t_back = time.monotonic()
    wait_for(lambda: _ready(kube, ft_ns)["status"] == "True" and pool_ready(kube, ft_ns, POOL, 2)(), timeout=180,
             interval=1, what="the pool Ready again on the new head")
    # the same worker pods, never restarted: their actors outlived the head
    assert _workers(kube, ft_ns) == before, (before, _workers(kube, ft_ns))
    print(f"\nFAULT Ray head restart with GCS fault tolerance: first batch scored again {recovered:.1f}s after the "
          f"delete; workers kept ({before}); pool Ready {time.monotonic() - t_back:.0f}s after the job ended; "
          f"pool out of Ready during it: {seen_down[-1] if seen_down else 'never seen'}; "
          f"{result['asked_again']} samples asked again, retries {result['retries']}")
    kube("delete", "rewardpool", "-n", ft_ns, POOL, "--wait=false")
