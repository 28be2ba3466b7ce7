"""On the dev cluster's real node (kubelet + containerd + runc + CNI bridge + kube-proxy + CoreDNS + Multus):
the operator runs from its chart and image, worker pods run the worker image as real containers, and a
training job's reward step (a pod) scores stored outputs through them. Tests run in file order: the later ones
disturb the pool (crash a container, delete the operator pod, scale in) and check that nothing is lost."""
from __future__ import annotations

import base64
import json
import time

import pytest

from rewardpool_worker.contract import version_label
from tests.conftest import wait_for
from tests.realnode.conftest import (fault_under_job, job_result_of, node_of, pool_ready, run_job, start_job,
                                    store_namespace)

POOL = "rn"
TENANT_TOKEN = "grpo-" + "0123456789abcdef" * 2
IPC_LOCK_BIT = 14


@pytest.fixture(scope="module")
def pool_ns(kube, incluster_operator, infra):
    yield from store_namespace(kube, incluster_operator, "realnode-pool")


@pytest.fixture(scope="module")
def pool(kube, node, pool_ns):
    from rewardpool_devcluster.incluster import real_node_pool

    # an HTTP tenant (test_a_job_in_another_namespace_scores_over_http_...): its token Secret before the pool
    kube.apply([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "grpo-token", "namespace": pool_ns},
                 "stringData": {"token": TENANT_TOKEN}}])
    kube.apply([real_node_pool(POOL, pool_ns, node.images.worker, replicas=2,
                               attachment=f"{pool_ns}/macvlan-store",
                               tenants=[{"name": "grpo", "weight": 2, "tokenSecret": {"name": "grpo-token"}}])])
    pods = wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=300, interval=1,
                    what="2 worker pods Running and Ready on the real node")
    return pods


def test_operator_runs_from_its_chart_with_in_cluster_config(kube, incluster_operator):
    pods = kube.pods("rewardpool-system", "app.kubernetes.io/name=rewardpool-operator")
    assert len(pods) == 1
    pod = pods[0]
    assert pod["spec"]["nodeName"] == "realnode"
    assert pod["spec"]["serviceAccountName"] == "rewardpool-rewardpool-operator"
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["containerID"].startswith("containerd://")
    assert status["image"].endswith(incluster_operator.images.operator.split("/", 1)[1])
    # in-cluster config: it logged in with the ServiceAccount through the `kubernetes` Service (kube-proxy)
    logs = wait_for(lambda: (lambda out: out if "Initial authentication has finished" in out else None)(
        kube("logs", "-n", "rewardpool-system", pod["metadata"]["name"]).stdout), timeout=60,
        what="the operator's in-cluster login in its log")
    # and it can reach the API from inside: the pool CRD's watch is up (no login errors since)
    assert "Unauthorized" not in logs and "certificate verify failed" not in logs


def test_every_node_daemon_read_its_whole_config_and_each_node_keeps_its_own_pod_logs(kube, node, pool, pool_ns):
    """A misspelt field is not an error to the kubelet or kube-proxy: they decode leniently and log it, and the
    setting silently does not apply (podLogsDirectory for podLogsDir put both nodes' logs in the host's
    /var/log/pods, where each kubelet removed the other's as orphans). So: no strict-decoding failure in any
    node's logs, and each worker's log is under its own node's folder."""
    for n in node.nodes:
        for daemon in ("kubelet", "kube-proxy"):
            log = (n.workdir / f"{daemon}.log").read_text(errors="replace")
            assert "strict decoding error" not in log, next(
                line for line in log.splitlines() if "strict decoding error" in line)
    for pod in pool:
        own = node_of(node, pod).workdir / "pod-logs"
        uid = pod["metadata"]["uid"]
        assert [d.name for d in own.iterdir() if d.name.endswith(uid)], f"{pod['metadata']['name']}: no logs in {own}"
        assert kube("logs", "-n", pool_ns, pod["metadata"]["name"], "--tail=5").stdout.strip()


def test_worker_pods_are_real_containers_with_the_pod_contract(kube, node, pool, pool_ns):
    pool_obj = kube.json("rewardpool", "-n", pool_ns, POOL)
    for pod in pool:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] in ("realnode", "realnode2")  # never a kwok node: selected and tolerated
        cs = pod["status"]["containerStatuses"][0]
        assert cs["containerID"].startswith("containerd://") and cs["image"].endswith(
            node.images.worker.split("/", 1)[1])
        # IPC_LOCK effective inside the container (and every other capability dropped)
        status = kube.exec(pool_ns, name, "cat", "/proc/1/status")
        cap_eff = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff")), 16)
        assert cap_eff == 1 << IPC_LOCK_BIT, hex(cap_eff)
        # /dev/shm is memory-backed (tmpfs), with the sizing's limit
        mounts = kube.exec(pool_ns, name, "cat", "/proc/mounts")
        shm = next(line for line in mounts.splitlines() if line.split()[1] == "/dev/shm")
        assert shm.split()[2] == "tmpfs", shm
        # the memory limit the kubelet enforces (the container's cgroup) is the pool's sizing
        limit = int(kube.exec(pool_ns, name, "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        spec_limit = pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
        from rewardpool_operator.api.quantity import parse_bytes
        assert limit == parse_bytes(spec_limit)
        from rewardpool_operator.pool import sizing
        from rewardpool_operator.api.spec import PoolSpec
        assert limit == sizing.compute(PoolSpec.model_validate(pool_obj["spec"])).memory_bytes
        # the Downward API annotations file, and the worker read the Multus network-status from it
        ann = kube.exec(pool_ns, name, "cat", "/etc/podinfo/annotations")
        assert "k8s.v1.cni.cncf.io/network-status" in ann
        status_ann = json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
        net1 = next(n["ips"][0] for n in status_ann if n.get("interface") == "net1")
        health = json.loads(kube.exec(pool_ns, name, "python3", "-c",
                                      "import urllib.request;print(urllib.request.urlopen("
                                      "'http://127.0.0.1:8000/healthz').read().decode())"))
        # the store client is bound to the secondary network (its segment is announced as net1:port)
        assert health["store_hostname"].rsplit(":", 1)[0] == net1, health


def _net_bytes(kube, ns, pod) -> dict[str, tuple[int, int]]:
    """(rx, tx) bytes per interface inside a pod (/proc/net/dev of its network namespace)."""
    out = {}
    for line in kube.exec(ns, pod, "cat", "/proc/net/dev").splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        out[name.strip()] = (int(f[0]), int(f[8]))
    return out


def test_outputs_scored_through_real_pods_over_the_secondary_network(kube, node, pool, pool_ns):
    names = [p["metadata"]["name"] for p in pool]
    before = {n: _net_bytes(kube, pool_ns, n) for n in names}
    samples, frames, height, width = 16, 9, 64, 96
    result = run_job(kube, node, pool_ns, "rollout-1", POOL, samples=samples, frames=frames, height=height,
                     width=width, batch=4, attachment=f"{pool_ns}/macvlan-store")
    assert result["scored"] == samples and result["released"] == samples and result["left"] == 0, result
    assert result["workers"] == 2, result  # both real pods scored
    # store traffic on the secondary network: the job announced its segment on its net1 address, and the
    # workers' net1 interfaces received the bytes of the frames the pool scores (eth0 carries only Ray's RPCs).
    # The pool's scorer picks 4 of the 9 frames (numFrames 4), and the workers read only those: the interfaces
    # saw at least the picked bytes, and less than the whole outputs.
    job_net1 = result["store_hostname"].rsplit(":", 1)[0]
    assert job_net1.startswith("10.252."), result
    after = {n: _net_bytes(kube, pool_ns, n) for n in names}
    net1_rx = sum(after[n]["net1"][0] - before[n]["net1"][0] for n in names)
    eth0_rx = sum(after[n]["eth0"][0] - before[n]["eth0"][0] for n in names)
    whole = samples * frames * 3 * height * width
    picked = samples * 4 * 3 * height * width
    assert picked <= net1_rx < whole, (net1_rx, eth0_rx, picked, whole)
    assert eth0_rx < picked, (net1_rx, eth0_rx, picked)


def _workers(kube, ns):
    return [p for p in kube.pods(ns, f"rewardpool.io/pool={POOL}") if not p["metadata"].get("deletionTimestamp")]


def _start_job(kube, node, ns, name, **kw):
    start_job(kube, node, ns, name, POOL, **kw)


def test_a_crashed_worker_container_restarts_and_nothing_is_lost(kube, node, pool, pool_ns):
    victim = _workers(kube, pool_ns)[0]
    name = victim["metadata"]["name"]
    restarts = victim["status"]["containerStatuses"][0]["restartCount"]
    cid = victim["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    _start_job(kube, node, pool_ns, "rollout-crash", samples=8, batch=2, rounds=8, pause=0.5)
    # the worker process dies (a crash), not a graceful stop: killed through its own node's containerd
    node_of(node, victim).ctr("tasks", "kill", "-s", "KILL", cid)
    result = job_result_of(kube, pool_ns, "rollout-crash")
    assert result["scored"] == 64 and result["released"] == 64 and result["left"] == 0, result
    # the kubelet restarted the container in the same pod, and it is Ready again
    wait_for(lambda: (lambda p: p["status"]["containerStatuses"][0]["restartCount"] > restarts
                      and p["status"]["containerStatuses"][0]["ready"])(kube.json("pod", "-n", pool_ns, name)),
             timeout=240, interval=1, what=f"{name} restarted and Ready")
    wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=240, interval=1, what="the pool back to 2 Ready workers")


def test_operator_pod_deleted_mid_reconcile_a_new_one_takes_over_without_duplicates(kube, node, pool, pool_ns):
    """Under a running rollout job: the operator is not on the data path, so the job scores on through it."""
    old = kube.pods("rewardpool-system", "app.kubernetes.io/name=rewardpool-operator")[0]["metadata"]["name"]
    _start_job(kube, node, pool_ns, "rollout-operator", samples=8, batch=2, rounds=10, pause=0.5)
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p", '{"spec":{"replicas":3}}')
    kube("delete", "pod", "-n", "rewardpool-system", old, "--wait=false")

    def new_operator_ready():
        pods = [p for p in kube.pods("rewardpool-system", "app.kubernetes.io/name=rewardpool-operator")
                if p["metadata"]["name"] != old and not p["metadata"].get("deletionTimestamp")]
        return pods if pods and all(c.get("ready") for p in pods for c in p["status"].get("containerStatuses", [])) \
            else None
    assert len(wait_for(new_operator_ready, timeout=180, interval=1, what="a new operator pod Ready")) == 1
    wait_for(pool_ready(kube, pool_ns, POOL, 3), timeout=300, interval=1, what="3 Ready workers")
    # no duplicates: exactly the 3 it asked for, and they stay 3 over a few resyncs
    for _ in range(10):
        assert len(_workers(kube, pool_ns)) == 3
        time.sleep(1)
    result = job_result_of(kube, pool_ns, "rollout-operator")
    assert result["scored"] == 80 and result["released"] == 80 and result["left"] == 0, result


def test_scale_in_drains_a_real_pod_and_loses_nothing(kube, node, pool, pool_ns):
    before = {p["metadata"]["name"] for p in _workers(kube, pool_ns)}
    assert len(before) == 3
    _start_job(kube, node, pool_ns, "rollout-scalein", samples=8, batch=2, rounds=10, pause=0.5)
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p", '{"spec":{"replicas":2}}')
    result = job_result_of(kube, pool_ns, "rollout-scalein")
    assert result["scored"] == 80 and result["released"] == 80 and result["left"] == 0, result
    after = wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=400, interval=1, what="2 workers after scale-in")
    gone = before - {p["metadata"]["name"] for p in after}
    assert len(gone) == 1
    # the removed worker drained: its log says so (SIGTERM or the operator's drain), and it exited cleanly
    ev = kube("get", "events", "-n", pool_ns, "-o", "json").stdout
    assert any(g in ev for g in gone)


def _fault_under_job(kube, node, ns, name, fault, **kw):
    return fault_under_job(kube, node, ns, name, POOL, fault, **kw)


def _pool_cond(kube, ns, kind):
    return next(c for c in kube.json("rewardpool", "-n", ns, POOL)["status"]["conditions"] if c["type"] == kind)


def _settled_version(kube, ns) -> set:
    """Waits for the pool at 2 Ready workers of one scorer version with no roll in its status, and returns that
    version: a roll test starts from a settled pool, so a test before it that failed mid-roll fails alone."""
    version = "rewardpool.io/scorer-version"

    def settled():
        pods = pool_ready(kube, ns, POOL, 2)()
        labels = {p["metadata"]["labels"][version] for p in pods or []}
        return len(labels) == 1 and not kube.json("rewardpool", "-n", ns, POOL)["status"].get("roll") and labels
    return wait_for(settled, timeout=400, interval=1, what="the pool settled: 2 Ready workers of one version, no roll")


def test_a_store_master_restart_under_a_rollout_loses_nothing(kube, node, pool, pool_ns, infra):
    """The store master's pod deleted mid-rollout: the new master knows no object, the workers' and the job's
    store clients mount their segments on it by themselves, and the job puts again what the store lost."""
    def restart_master():
        kube("delete", "pod", "-n", infra, "-l", "app.kubernetes.io/name=mooncake-master", "--wait=false",
             "--grace-period=1")
    # each round's outputs wait a second in the store before they are scored: the restart finds some there
    # (with the store empty between rounds it could fall in a gap and touch nothing)
    result, recovered = _fault_under_job(kube, node, pool_ns, "fault-master", restart_master, rounds=60, hold=1.0)
    # it reached the rollout: outputs asked again, puts retried, batches waiting out the outage, or (a restart
    # that fell between a round's scores and its releases, the new master up before the next puts) releases
    # the down master refused; whichever, nothing is lost (fault_under_job holds left and pending to 0)
    assert result["asked_again"] + result["put_retries"] + result["store_outages"] \
        + result["release_failures"] > 0, f"the restart did not reach the rollout: {result}"
    wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=240, interval=1, what="2 Ready workers after the restart")
    wait_for(lambda: _pool_cond(kube, pool_ns, "Ready")["status"] == "True", timeout=120, interval=1,
             what="the pool Ready after the store master restart")
    print(f"\nFAULT store master restart: first batch scored again {recovered:.1f}s after the delete "
          f"({result['asked_again']} samples asked again, {result['put_retries']} puts retried, "
          f"{result['store_outages']} batch tries waited)")


def test_a_worker_pod_deleted_under_a_rollout_is_replaced_and_nothing_is_lost(kube, node, pool, pool_ns):
    victim = _workers(kube, pool_ns)[0]["metadata"]["name"]

    def delete_worker():
        kube("delete", "pod", "-n", pool_ns, victim, "--wait=false")
    result, recovered = _fault_under_job(kube, node, pool_ns, "fault-pod", delete_worker, rounds=20, pause=0.3)
    pods = wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=300, interval=1, what="a replacement worker Ready")
    assert victim not in {p["metadata"]["name"] for p in pods}
    print(f"\nFAULT worker pod delete: first batch scored again {recovered:.1f}s after the delete "
          f"(retries {result['retries']})")


def test_the_kubelet_stopped_and_started_under_a_rollout_leaves_the_workers_running(kube, node, pool, pool_ns):
    before = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
              for p in _workers(kube, pool_ns)}

    def kubelet_outage():  # on every real node: wherever the workers are
        for n in node.nodes:
            n.stop_kubelet()
        time.sleep(20)  # the node agents are gone; containerd and the containers go on
        for n in node.nodes:
            n.start_kubelet()
    result, recovered = _fault_under_job(kube, node, pool_ns, "fault-kubelet", kubelet_outage, rounds=20, pause=0.5)
    pods = wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=240, interval=1, what="2 Ready workers")
    # the same containers: a kubelet restart neither restarts nor replaces them
    assert {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"] for p in pods} == before
    print(f"\nFAULT kubelet stop (20 s) and start: first batch scored again {recovered:.1f}s after the stop")


def test_a_roll_to_a_missing_image_under_a_rollout_and_back(kube, node, pool, pool_ns):
    """A roll to an image the node does not have stops at its budget (one worker replaced by a pod that cannot
    pull; the other keeps serving the rollout); setting the image back replaces the broken pod at once."""
    good = kube.json("rewardpool", "-n", pool_ns, POOL)["spec"]["image"]
    fixed_at: list[float] = []
    replaced_at: list[float] = []
    broken: list[str] = []

    def bad_roll_and_back():
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             json.dumps({"spec": {"image": "localhost/rewardpool-worker:not-on-this-node"}}))
        wait_for(lambda: any(c["type"] == "Degraded" and c["status"] == "True" and "ImagePull" in c["message"]
                             for c in kube.json("rewardpool", "-n", pool_ns, POOL)["status"]["conditions"]),
                 timeout=180, interval=1, what="Degraded: the new pod cannot pull its image")
        broken.extend(p["metadata"]["name"] for p in _workers(kube, pool_ns)
                      if p["spec"]["containers"][0]["image"] != good)
        fixed_at.append(time.monotonic())
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             json.dumps({"spec": {"image": good}}))
        # the rollback replaces the pod that cannot pull at once: it is not waited for, nor counted in the budget
        wait_for(lambda: not {p["metadata"]["name"] for p in _workers(kube, pool_ns)} & set(broken), timeout=60,
                 interval=0.5, what="the pod that cannot pull its image replaced")
        replaced_at.append(time.monotonic())
    result, recovered = _fault_under_job(kube, node, pool_ns, "fault-image", bad_roll_and_back, rounds=60,
                                         pause=1.0)
    pods = wait_for(lambda: (lambda ps: ps if ps and all(p["spec"]["containers"][0]["image"] == good
                                                         for p in ps) else None)(pool_ready(kube, pool_ns, POOL, 2)()),
                    timeout=120, interval=1, what="the rollback: 2 Ready workers of the good image")
    rolled_back = time.monotonic() - fixed_at[0]
    assert len(broken) == 1 and len(pods) == 2
    print(f"\nFAULT roll to a missing image and back: the broken pod replaced {replaced_at[0] - fixed_at[0]:.1f}s "
          f"after the fix, 2 Ready workers of the good image {rolled_back:.1f}s after it (the new worker's "
          f"start-up); the rollout never stopped (first batch after the bad roll began {recovered:.1f}s)")


def test_a_roll_waits_for_a_rollout_pinned_to_the_old_scorer_version(kube, node, pool, pool_ns):
    """spec.rollout.maxVersionSkewSeconds: a rollout job scores with one group key (`group=`) through a roll
    to another scorer version (numFrames 4 -> 3). The operator keeps the old version's last worker while that
    worker reports the group, so every call of the rollout is scored by the version it began with; once the
    job is over (the group idle for 60 s) the roll completes. The job runs until the test has seen the hold."""
    version = "rewardpool.io/scorer-version"
    old = _settled_version(kube, pool_ns)
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
         json.dumps({"spec": {"rollout": {"maxVersionSkewSeconds": 900}}}))
    try:
        _pinned_roll(kube, node, pool_ns, old)
    finally:  # the window off and the job gone whatever failed, so the roll completes for the tests after this
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             json.dumps({"spec": {"rollout": {"maxVersionSkewSeconds": None}}}))
        kube("delete", "job", "-n", pool_ns, "rollout-pinned", "--ignore-not-found", "--wait=false", check=False)


def _pinned_roll(kube, node, pool_ns, old):
    version = "rewardpool.io/scorer-version"
    # The job goes on (up to 2000 rounds) until the test has seen the hold: however long the new workers take to
    # start on this node under the suite's load, the group is still active when the roll reaches the old
    # version's last worker. Then the test tells it to stop after its round.
    stop = "/tmp/stop-rollout"
    _start_job(kube, node, pool_ns, "rollout-pinned", samples=8, batch=2, rounds=2000, pause=0.5, group="rollout-7",
               stop_file=stop)
    wait_for(lambda: "ROUND 0 scored" in kube("logs", "-n", pool_ns, "job/rollout-pinned", check=False).stdout,
             timeout=240, interval=1, what="the pinned rollout's first round scored")
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
         json.dumps({"spec": {"scorer": {"numFrames": 3}}}))
    seen: list = []

    def holding():
        c = _pool_cond(kube, pool_ns, "Progressing")
        seen.append((c.get("reason"), c.get("message")))
        return c["reason"] == "WaitingForPinnedGroups" and c

    def stop_job():
        for p in kube.pods(pool_ns, "job-name=rollout-pinned"):
            if p["status"].get("phase") == "Running":
                kube.exec(pool_ns, p["metadata"]["name"], "touch", stop, container="rollout")
    try:
        # within the test's own 600 s (pytest-timeout), so a failure says what Progressing said and stops the job
        held = wait_for(holding, timeout=420, interval=1, what="the roll holding the old version's last worker")
    except AssertionError as e:
        stop_job()  # never leave it running for the tests after this one
        raise AssertionError(f"{e}; Progressing was, last: {list(dict.fromkeys(seen))[-4:]}") from None
    stop_job()  # before any assertion: a failing one must not leave the job holding the roll for the next tests
    assert "1 caller group(s) pinned" in held["message"], held
    result = job_result_of(kube, pool_ns, "rollout-pinned", timeout=600)
    assert 0 < result["rounds"] < 2000 and result["scored"] == 8 * result["rounds"], result
    assert result["left"] == 0 and result["pending"] == 0, result
    # a worker's version is the pod's label (the spec's digest) and its model files' digest after a dash
    assert [version_label(v) for v in result["versions"]] == sorted(old), result
    assert result["version_switches"] == 0, result
    t_end = time.monotonic()

    def rolled():
        pods = pool_ready(kube, pool_ns, POOL, 2)()
        return pods if pods and all(p["metadata"]["labels"][version] not in old for p in pods) else None
    wait_for(rolled, timeout=400, interval=1, what="the roll completed once the group went idle")
    print(f"\nroll held for a pinned rollout: {held['message']}; completed {time.monotonic() - t_end:.0f}s after "
          "the job ended")


def test_a_shadow_roll_scores_beside_the_serving_version_then_takes_traffic(kube, node, pool, pool_ns):
    """spec.rollout.shadow on real workers: a roll to another scorer version (numFrames) first starts one worker
    of it in shadow (its pod annotated from its creation, read from the Downward API file); a rollout job's
    calls are all scored by the old version while the shadow worker scores a sample of the same stored outputs
    beside it; at shadowSamples pairs (read from its /healthz) the operator promotes it (annotation removed,
    POST /promote) and the roll completes with it. The job loses nothing."""
    from rewardpool_worker.contract import SHADOW_ANNOTATION

    version = "rewardpool.io/scorer-version"
    old = _settled_version(kube, pool_ns)
    frames = kube.json("rewardpool", "-n", pool_ns, POOL)["spec"]["scorer"].get("numFrames") or 4
    pool_names = {p["metadata"]["name"] for p in _workers(kube, pool_ns)}
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
         json.dumps({"spec": {"rollout": {"shadow": True, "shadowSamples": 40}}}))
    try:
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             # a third worker (the shadow) has to fit beside two on the 2-core node: the new template asks less
             json.dumps({"spec": {"scorer": {"numFrames": 2 if frames != 2 else 5},
                                  "resources": {"requests": {"cpu": "300m"}}}}))

        def shadow_ready():
            st = kube.json("rewardpool", "-n", pool_ns, POOL)["status"]
            c = next(c for c in st["conditions"] if c["type"] == "Progressing")
            shadows = [p for p in _workers(kube, pool_ns) if SHADOW_ANNOTATION in p["metadata"].get("annotations", {})
                       and any(x["type"] == "Ready" and x["status"] == "True" for x in p["status"].get("conditions", []))]
            return c["reason"] == "ShadowScoring" and shadows and (st, shadows[0])
        # the shadow worker up (a worker's start on this node takes a minute or two), with no sample yet: no
        # traffic, and the roll waits for it
        st, shadow = wait_for(shadow_ready, timeout=400, interval=1, what="a Ready shadow worker, the roll held")
        assert [v["label"] for v in st["scorerVersions"]] == sorted(old) and st["shadow"]["against"] == sorted(old)
        assert all(v["version"].startswith(v["label"] + "-") for v in st["scorerVersions"])  # as workers report
        assert shadow["metadata"]["labels"][version] not in old and st["shadow"].get("samples", 0) == 0
        # the phase is recorded, and the pool is Ready: the old version serves every call (a job that waits for
        # Ready before it sends traffic does not deadlock with a shadow that needs traffic)
        assert st["roll"]["phase"] == "Shadow" and st["roll"]["from"] == sorted(old), st["roll"]
        assert next(c for c in st["conditions"] if c["type"] == "Ready")["status"] == "True", st["conditions"]
        assert {p["metadata"]["name"] for p in _workers(kube, pool_ns)} - {shadow["metadata"]["name"]} == pool_names
        _start_job(kube, node, pool_ns, "rollout-shadow", samples=8, batch=2, rounds=80, pause=0.5)

        def promoted():
            sh = kube.json("rewardpool", "-n", pool_ns, POOL)["status"].get("shadow") or {}
            return sh.get("promoted") and sh
        sh = wait_for(promoted, timeout=400, interval=1, what="the shadow promoted at 40 samples")
        assert sh["samples"] >= 40 and sh.get("correlation") is not None, sh
        result = job_result_of(kube, pool_ns, "rollout-shadow", timeout=600)
        assert result["scored"] == 640 and result["left"] == 0 and result["pending"] == 0, result
        assert {version_label(v) for v in result["versions"]} <= old | {shadow["metadata"]["labels"][version]}

        def rolled():
            pods = pool_ready(kube, pool_ns, POOL, 2)()
            return pods if pods and all(p["metadata"]["labels"][version] not in old for p in pods) else None
        pods = wait_for(rolled, timeout=400, interval=1, what="the roll completed after the promotion")
        assert shadow["metadata"]["name"] in {p["metadata"]["name"] for p in pods}  # the promoted worker stayed
        assert not any(SHADOW_ANNOTATION in p["metadata"].get("annotations", {}) for p in pods)
        reasons = [e["reason"] for e in kube.json("events", "-n", pool_ns)["items"]
                   if e["involvedObject"].get("name") == POOL]
        assert "ShadowStarted" in reasons and "ShadowPromoted" in reasons, reasons
        print(f"\nshadow: {sh['samples']} samples, correlation {sh.get('correlation')}, mean difference "
              f"{sh.get('meanDifference')}; job versions {result['versions']}")
    finally:  # shadow off (a shadow still waiting is promoted), and the pool settled for the tests after this
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             json.dumps({"spec": {"rollout": {"shadow": None, "shadowSamples": None}}}))
        wait_for(lambda: pool_ready(kube, pool_ns, POOL, 2)() and not kube.json("rewardpool", "-n", pool_ns, POOL)[
            "status"].get("roll"), timeout=400, interval=1, what="the pool back at 2 Ready workers, no roll")


def test_a_missing_image_shows_in_the_pool_status(kube, node, incluster_operator, rns):
    from rewardpool_devcluster.incluster import real_node_pool

    obj = real_node_pool("noimage", rns, "localhost/rewardpool-worker:not-on-this-node", replicas=1)
    kube.apply([obj])

    def degraded_with_pull_failure():
        st = kube.json("rewardpool", "-n", rns, "noimage").get("status", {})
        return next((c for c in st.get("conditions", []) if c["type"] == "Degraded" and c["status"] == "True"
                     and "ImagePull" in c.get("message", "")), None)
    cond = wait_for(degraded_with_pull_failure, timeout=180, interval=1, what="Degraded: image pull failed")
    assert "not-on-this-node" in cond["message"]


def test_a_worker_without_its_model_stays_up_and_the_pool_says_model_unavailable(kube, node, incluster_operator,
                                                                                  infra, rns):
    """Issue 34: a PickScore pool whose model directory is not in the pod (no volume mounted there): the worker
    container runs and stays up (no crash loop, no restart), not Ready, and the pool says Degraded with reason
    ModelUnavailable naming the component and the path, from the worker's own /healthz read by the operator."""
    from rewardpool_devcluster.incluster import real_node_pool

    obj = real_node_pool("nomodel", rns, node.images.worker, replicas=1, cpu="250m",
                         scorer={"name": "pickscore", "modelPath": "/models/not-mounted", "batchSize": 2,
                                 "modelMemory": "64Mi"})
    kube.apply([obj])

    def model_unavailable():
        st = kube.json("rewardpool", "-n", rns, "nomodel").get("status", {})
        return next((c for c in st.get("conditions", []) if c["type"] == "Degraded" and c["status"] == "True"
                     and c.get("reason") == "ModelUnavailable"), None)
    cond = wait_for(model_unavailable, timeout=240, interval=1, what="Degraded: ModelUnavailable")
    assert "cannot load their model" in cond["message"] and "pickscore: /models/not-mounted does not exist" \
        in cond["message"], cond
    (pod,) = kube.pods(rns, "rewardpool.io/pool=nomodel")
    status = pod["status"]["containerStatuses"][0]
    assert "running" in status["state"] and status["restartCount"] == 0 and not status["ready"], status
    events = kube("get", "events", "-n", rns, "--field-selector", "involvedObject.name=nomodel", "-o", "json").stdout
    assert any(e["reason"] == "ModelUnavailable" for e in json.loads(events)["items"]), events[-2000:]
    kube("delete", "rewardpool", "-n", rns, "nomodel", "--wait=false")


def test_a_restricted_pool_runs_as_non_root_and_one_asking_for_privilege_gets_no_pod(kube, node, incluster_operator,
                                                                                     infra, rns):
    """Pod Security on real containers: a pool at the restricted level, with a sidecar that meets it, runs (as
    uid 65532, IPC_LOCK bounded but not effective, which the tcp store does not need); a pool whose sidecar asks
    for SYS_ADMIN never gets a pod, and says why."""
    from rewardpool_devcluster.incluster import real_node_pool

    strict = real_node_pool("strict", rns, node.images.worker, replicas=1, cpu="250m")
    strict["spec"]["podSecurity"] = "restricted"
    sidecar = {"name": "side", "image": node.images.worker, "imagePullPolicy": "IfNotPresent",
               "command": ["sleep", "infinity"], "resources": {"requests": {"cpu": "10m"}},
               "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    strict["spec"]["podTemplate"]["spec"]["containers"].append(sidecar)
    bad = real_node_pool("wants-admin", rns, node.images.worker, replicas=1, cpu="250m")
    bad["spec"]["podTemplate"]["spec"]["containers"].append(
        {**sidecar, "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}})
    kube.apply([strict, bad])

    (pod,) = wait_for(pool_ready(kube, rns, "strict", 1), timeout=300, interval=1,
                      what="the restricted pool's worker Running and Ready")
    name = pod["metadata"]["name"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert kube.exec(rns, name, "id", "-u").strip() == "65532"
    assert kube.exec(rns, name, "id", "-u", container="side").strip() == "65532"
    # non-root: no effective capabilities (Kubernetes sets no ambient ones); IPC_LOCK stays in the bounding set
    caps = {line.split(":")[0]: int(line.split()[1], 16) for line in
            kube.exec(rns, name, "cat", "/proc/1/status").splitlines() if line.startswith("Cap")}
    assert caps["CapEff"] == 0 and caps["CapBnd"] == 1 << IPC_LOCK_BIT, caps
    # the non-root worker reads its own control token (fsGroup), so the operator's /drain and /promote work
    from rewardpool_worker.contract import CONTROL_SECRET_KEY, CONTROL_TOKEN_FILE, control_secret_name
    token = kube.exec(rns, name, "cat", CONTROL_TOKEN_FILE).strip()
    secret = kube.json("secret", "-n", rns, control_secret_name("strict"))
    assert token and token == base64.b64decode(secret["data"][CONTROL_SECRET_KEY]).decode()

    def refused():
        st = kube.json("rewardpool", "-n", rns, "wants-admin").get("status", {})
        return next((c for c in st.get("conditions", []) if c["type"] == "InvalidSpec" and c["status"] == "True"),
                    None)
    cond = wait_for(refused, timeout=60, interval=1, what="InvalidSpec on the pool asking for SYS_ADMIN")
    assert cond["reason"] == "ForbiddenPodSetting" and "SYS_ADMIN" in cond["message"], cond
    assert kube.pods(rns, "rewardpool.io/pool=wants-admin") == []


def test_a_ray_head_restart_takes_the_pool_out_of_ready_and_it_heals(kube, node, pool, pool_ns, infra):
    """The Ray head's pod deleted (its Deployment starts a new one, with an empty GCS): the workers' actors
    keep answering in their own raylets but no client can find them by name. Each worker notices (its
    name lookup fails), leaves Ready, drains and exits; the kubelet restarts it into the new cluster. The pool
    says Ready only while it can score, and afterwards a rollout job scores everything."""
    before = {p["metadata"]["name"]: p["status"]["containerStatuses"][0]["restartCount"]
              for p in _workers(kube, pool_ns)}
    assert len(before) == 2
    t0 = time.monotonic()
    kube("delete", "pod", "-n", infra, "-l", "app.kubernetes.io/name=ray-head", "--wait=false")

    def ready_status():
        return next(c for c in kube.json("rewardpool", "-n", pool_ns, POOL)["status"]["conditions"]
                    if c["type"] == "Ready")
    down = wait_for(lambda: (c := ready_status())["status"] == "False" and c, timeout=120, interval=1,
                    what="the pool out of Ready while its actors cannot be found")
    out_at = time.monotonic() - t0
    # and it says why, in the words of the workers themselves, with a warning event
    said = wait_for(lambda: (c := _pool_cond(kube, pool_ns, "Degraded"))["reason"] == "WorkersNotFoundInRay" and c,
                    timeout=60, interval=0.5, what="Degraded naming the workers Ray cannot find")
    assert "cannot be found in Ray" in said["message"], said
    events = kube.json("events", "-n", pool_ns, "--field-selector", f"involvedObject.name={POOL}")["items"]
    assert any(e["reason"] == "WorkersNotFoundInRay" and e["type"] == "Warning" for e in events), \
        [e["reason"] for e in events]

    def healed():
        pods = pool_ready(kube, pool_ns, POOL, 2)()
        return pods if pods and all(p["status"]["containerStatuses"][0]["restartCount"] > before.get(
            p["metadata"]["name"], -1) for p in pods) and ready_status()["status"] == "True" else None
    wait_for(healed, timeout=300, interval=1, what="both workers restarted into the new Ray cluster, Ready")
    back_at = time.monotonic() - t0
    _start_job(kube, node, pool_ns, "rollout-after-head", samples=8, batch=2, rounds=2, pause=0.2)
    result = job_result_of(kube, pool_ns, "rollout-after-head")
    assert result["scored"] == 16 and result["released"] == 16 and result["left"] == 0, result
    print(f"\nRay head restart: pool out of Ready after {out_at:.0f}s ({down['message']}), Ready again after "
          f"{back_at:.0f}s, scoring again after {time.monotonic() - t0:.0f}s")


def test_a_job_in_another_namespace_scores_over_http_with_its_tenant_token(kube, node, pool, pool_ns, rns):
    """Issue 35's front door on the real node: a trainer in another namespace, with no Ray, scores stored outputs
    (read by the workers from its segment), a PNG and a safetensors video through the pool's <pool>-score Service
    (kube-proxy to a Ready worker) with its tenant token: every score equals the scorer run in the job on the same
    pixels, with the pool's scorer version. No token is 401, a wrong one 403, a pickle naming a class 400 (nothing
    runs), flow-GRPO's pickled JPEGs are scored. The tenant's token's digest reached the workers from the operator
    (POST /tenants), not from a mounted Secret."""
    from rewardpool_devcluster.incluster import http_job_objects, job_result

    svc = kube.json("service", "-n", pool_ns, f"{POOL}-score")
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["ports"][0]["port"] == 8000
    kube.apply(http_job_objects("http-caller", rns, node.images.worker, POOL, pool_ns, TENANT_TOKEN, "guess"))
    def done():
        st = kube.json("job", "-n", rns, "http-caller").get("status", {})
        return st if (st.get("succeeded") or st.get("failed")) else None
    st = wait_for(done, timeout=300, interval=1, what="the HTTP job finished")
    logs = kube("logs", "-n", rns, "job/http-caller", "--tail=100", check=False).stdout
    assert st.get("succeeded"), f"HTTP job failed ({st}); log tail:\n{logs}"
    res = job_result(logs)
    assert res["codes"] == {"token": 200, "no_token": 401, "wrong_token": 403, "pickled_class": 400,
                            "flow_grpo": 200}, res
    assert res["scored"] == 6 and res["errors"] == [] and res["max_diff"] < 1e-6, res
    status = kube.json("rewardpool", "-n", pool_ns, POOL)["status"]
    versions = {p["version"] for p in status.get("scorerVersions", [])}
    # the pool's scorer version (the pod label's part until the workers' metrics report the full one)
    assert res["version"] in versions or version_label(res["version"]) in versions, (res["version"], versions)
    assert res["flow_grpo_outputs"] == 1 and res["unreleased"] == 0
    # the job's Python client found the Ready workers from the Service's EndpointSlices (its service account's Role
    # in the pool's namespace) and sent to them by pod, not through the Service
    pods = {p["metadata"]["name"] for p in kube.pods(pool_ns, f"rewardpool.io/pool={POOL}")}
    client = res["client"]
    assert not client["via_service"] and client["members"] and set(client["members"]) <= pods, (client, pods)
    assert set(client["workers"]) <= set(client["members"]) and client["errors"] == 0, client
    assert client["max_diff"] < 1e-6 and client["version"] == res["version"], client
    print(f"HTTP job from another namespace: 6 items scored in {res['seconds']}s through {POOL}-score; its client "
          f"routed over {client['members']}")


# Each worker's HTTP scoring asked with each token and an empty body, from inside its pod: 400 (a tenant's token,
# the body is no request), 403 (no tenant's), 503 (the worker has no tenants yet).
AUTH_PROBE = """
import sys, urllib.error, urllib.request
for token in sys.argv[1:]:
    req = urllib.request.Request("http://127.0.0.1:8000/v1/score", data=b"{}", method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        print(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as e:
        print(e.code)
"""


def _who_scores(kube, ns, pods, *tokens) -> dict[str, list[int]]:
    return {p["metadata"]["name"]: [int(c) for c in kube.exec(ns, p["metadata"]["name"], "python3", "-c", AUTH_PROBE,
                                                              *tokens).split()] for p in pods}


def _identity(pods) -> dict[str, tuple]:
    return {p["metadata"]["name"]: (p["metadata"]["uid"], tuple(c.get("restartCount", 0) for c in
                                                                p["status"].get("containerStatuses", [])))
            for p in pods}


def test_a_tenant_rotated_and_one_added_take_effect_in_seconds_and_replace_no_worker(kube, node, pool, pool_ns):
    """Issue 45 item 4 on the real node: the first tenant's Secret rotated (nothing else changed), then a second
    tenant added (its Secret, then the pool's spec), each reach both running workers within seconds (the operator
    reads a tenant pool's Secrets every pass and sends the digests to POST /tenants): the rotated and the added
    tokens are taken and the old one refused on every worker; no pod is replaced or restarted, no roll is
    recorded, and the TenantsSent event says so."""
    workers = pool_ready(kube, pool_ns, POOL, 2)()
    assert workers, "the pool's two workers Ready"
    before = _identity(workers)
    assert all(v == [400, 403] for v in _who_scores(kube, pool_ns, workers, TENANT_TOKEN, "guess").values())
    rotated, added = "grpo-rotated-" + "9" * 20, "evals-" + "7" * 24

    def taken(*want):
        def check():
            got = _who_scores(kube, pool_ns, workers, rotated, added, TENANT_TOKEN)
            return got if all(v == list(want) for v in got.values()) else None
        return check
    t0 = time.monotonic()
    kube.apply([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "grpo-token", "namespace": pool_ns},
                 "stringData": {"token": rotated}}])
    wait_for(taken(400, 403, 403), timeout=60, interval=0.5, what="the rotated token taken, the old one refused")
    rotation = time.monotonic() - t0
    t0 = time.monotonic()
    kube.apply([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "evals-token", "namespace": pool_ns},
                 "stringData": {"token": added}}])
    tenants = kube.json("rewardpool", "-n", pool_ns, POOL)["spec"]["access"]["tenants"]
    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p", json.dumps({"spec": {"access": {
        "tenants": tenants + [{"name": "evals", "tokenSecret": {"name": "evals-token"}}]}}}))
    wait_for(taken(400, 400, 403), timeout=60, interval=0.5, what="the added tenant's token taken")
    addition = time.monotonic() - t0
    after = pool_ready(kube, pool_ns, POOL, 2)()
    assert after and _identity(after) == before, (before, after and _identity(after))  # nobody replaced
    st = kube.json("rewardpool", "-n", pool_ns, POOL)["status"]
    assert "roll" not in st, st.get("roll")
    events = kube.json("events", "-n", pool_ns, "--field-selector", f"involvedObject.name={POOL}")["items"]
    assert any(e["reason"] == "TenantsSent" and "grpo, evals" in e["message"] for e in events), \
        [(e["reason"], e["message"]) for e in events][-5:]
    print(f"\ntenants on both running workers: a rotation {rotation:.1f}s, an added tenant {addition:.1f}s after "
          "the writes; no worker replaced")


def test_a_one_replica_roll_keeps_a_ready_worker_throughout(kube, node, pool, pool_ns):
    """Issue 45 item 3 on the real node: a 1-replica pool's roll (the defaults: maxSurge 25% -> 1, maxUnavailable
    25% -> 0) starts the new worker beside the old one, drains the old one only once the new one is Ready, and
    never has none serving: every pod state on the way is recorded from a watch, not only the end state."""
    from kubernetes import client, config

    from tests.integration.timeline import Timeline

    kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p", json.dumps({"spec": {"replicas": 1}}))
    (old,) = wait_for(pool_ready(kube, pool_ns, POOL, 1), timeout=300, interval=1, what="one worker left")
    wait_for(lambda: len(kube.pods(pool_ns, f"rewardpool.io/pool={POOL}")) == 1, timeout=180, interval=1,
             what="the drained worker gone (its deletion is not the roll's)")
    core = client.CoreV1Api(config.new_client_from_config(str(node.cluster.kubeconfig)))
    cpu = old["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    with Timeline(core, pool_ns, POOL) as tl:
        t0 = time.monotonic()
        kube("patch", "rewardpool", "-n", pool_ns, POOL, "--type=merge", "-p",
             json.dumps({"spec": {"resources": {"requests": {"cpu": "450m" if cpu != "450m" else "400m"}}}}))

        def rolled():
            pods = pool_ready(kube, pool_ns, POOL, 1)()
            return pods if pods and pods[0]["metadata"]["name"] != old["metadata"]["name"] else None
        (new,) = wait_for(rolled, timeout=400, interval=1, what="the one worker replaced")
        took = time.monotonic() - t0
    serving = tl.serving_counts()
    assert min(serving) >= 1, f"serving workers went {serving}: the pool had none"
    assert tl.max_serving_present() == 2, "the new worker started beside the old one"
    assert tl.deleted == [old["metadata"]["name"]] and tl.drain_then_delete[old["metadata"]["name"]], tl.deleted
    # the old worker was marked to drain only after the new one was Ready
    marked = next(i for i, st in enumerate(tl.states) if st.get(old["metadata"]["name"]) and
                  st[old["metadata"]["name"]].drain_requested)
    assert any(st.get(new["metadata"]["name"]) and st[new["metadata"]["name"]].ready for st in tl.states[:marked])
    print(f"\n1-replica roll on the real node: {took:.0f}s, serving workers on the way {sorted(set(serving))} "
          f"({len(tl.states)} states)")
