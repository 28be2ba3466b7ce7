"""Observability on the real node, as `make demo` sets it up: a real Prometheus (built from its Go module)
discovers the operator and the workers through the chart's own ServiceMonitor/PodMonitor (translated to
Kubernetes service discovery) and the store master; after a training job's scoring run, every query of the
chart's Grafana dashboard returns data, every worker series carries namespace/pool/pod, and the KEDA example's
query answers with the pool's demand."""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import wait_for
from tests.realnode.conftest import pool_ready, run_job

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "charts" / "rewardpool-operator" / "dashboards" / "rewardpool.json"
KEDA_EXAMPLE = REPO / "examples" / "keda-scaledobject.yaml"
POOL = "obs"
# The drift alerts' windows, shortened so a test sees them fire (the chart's defaults: 30m, 2h, 200, 10m)
DRIFT = {"recentWindow": "1m", "earlierWindow": "3m", "minSamples": "16", "for": "0s", "stddevs": "1"}
RECENT_SECONDS = 60


@pytest.fixture(scope="module")
def obs_ns(kube, incluster_operator, infra):
    name = "observed"
    kube("create", "namespace", name, check=False)
    yield name
    kube("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def prometheus(node, infra, tmp_path_factory):
    from rewardpool_devcluster.prometheus import for_dev_cluster

    prom = for_dev_cluster(node.cluster.kubeconfig, tmp_path_factory.mktemp("prometheus"), infra,
                           values={f"prometheusRule.scoreDrift.{k}": v for k, v in DRIFT.items()})
    yield prom
    prom.stop()


@pytest.fixture(scope="module")
def scored(kube, node, obs_ns, prometheus):
    """A pool of 2 real workers and one scoring run; returns the run's end as a Prometheus timestamp."""
    from rewardpool_devcluster.incluster import real_node_pool

    kube.apply([real_node_pool(POOL, obs_ns, node.images.worker, replicas=2)])
    wait_for(pool_ready(kube, obs_ns, POOL, 2), timeout=300, interval=1, what="2 workers Ready")
    # the operator reads the master's fill every 15 s for a pool it does not autoscale: waited for before the
    # run, so that the run's rates are still inside the panels' 1-minute window when the test looks (waited for
    # after it, a slow first reading pushed the look past the window and every rate panel read NaN in CI)
    wait_for(lambda: prometheus.query(f'rewardpool_pool_store_fill_ratio{{pool="{POOL}"}}'), timeout=90,
             what="the pool's store fill in Prometheus (the operator's reading of the master)")
    result = run_job(kube, node, obs_ns, "scoring", POOL, samples=24, frames=4, height=32, width=48, batch=4)
    assert result["scored"] == 24 and result["left"] == 0, result
    # the scrapes after the run: Prometheus has seen the workers' counters move
    wait_for(lambda: prometheus.query(f'sum(rewardpool_worker_scored_outputs_total{{pool="{POOL}"}}) >= 24'),
             timeout=60, what="the scored outputs in Prometheus")
    return time.time()


def _panel_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]


def _instantiate(expr: str, ns: str) -> str:
    """Grafana's variables as a user picking this pool would set them ($__rate_interval: 4 scrapes or more)."""
    return (expr.replace("$namespace", ns).replace("$pool", POOL).replace("$__rate_interval", "1m"))


def test_prometheus_discovers_operator_workers_and_master_through_the_charts_monitors(prometheus, scored, obs_ns):
    targets = prometheus.active_targets()
    up = {(t["labels"].get("job"), t["labels"].get("pod")) for t in targets if t["health"] == "up"}
    jobs = {j for j, _ in up}
    assert f"{POOL}-workers" in jobs, targets           # the ServiceMonitor, via the pool's Service
    assert "rewardpool-system/rewardpool-rewardpool-operator" in jobs, targets  # the PodMonitor
    assert "mooncake-master" in jobs, targets
    workers = [t for t in targets if t["labels"].get("job") == f"{POOL}-workers"]
    assert len(workers) == 2 and all(t["health"] == "up" for t in workers), workers


def test_every_worker_series_carries_namespace_pool_and_pod(prometheus, scored, obs_ns):
    series = prometheus.query(f'{{__name__=~"rewardpool_worker_.+", namespace="{obs_ns}"}}')
    assert series, "no worker series"
    pods = set()
    for s in series:
        labels = s["metric"]
        assert labels.get("pool") == POOL and labels.get("pod", "").startswith(f"{POOL}-"), labels
        assert "exported_namespace" not in labels, labels
        pods.add(labels["pod"])
    assert len(pods) == 2


def test_every_dashboard_query_returns_data_after_a_scoring_run(prometheus, scored, obs_ns):
    from rewardpool_worker.contract import all_metrics

    known = prometheus.metric_names()
    contract = {m.exposed for m in all_metrics()}
    empty, unknown = [], []
    for title, expr in _panel_queries():
        names = set(re.findall(r"\b((?:rewardpool|master)_[a-z_]+)\b", expr))
        for n in names:
            base = re.sub(r"_(bucket|sum|count)$", "", n)
            if n not in known or (n.startswith("rewardpool_") and n not in contract and base not in contract):
                unknown.append((title, n))
        q = _instantiate(expr, obs_ns)
        result = prometheus.api("query", query=q, time=f"{scored:.3f}")["result"]
        finite = [s for s in result if not math.isnan(float(s["value"][1]))]
        if not finite:
            empty.append((title, q, result))
    assert not unknown, f"queries naming metrics Prometheus has never seen or the contract lacks: {unknown}"
    assert not empty, "queries that returned no data:\n" + "\n".join(f"  {t}: {q} -> {r}" for t, q, r in empty)


def test_dashboard_variables_list_the_pool(prometheus, scored, obs_ns):
    dash = json.loads(DASHBOARD.read_text())
    var = {v["name"]: v for v in dash["templating"]["list"]}
    ns_q = var["namespace"]["definition"]
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", ns_q)
    values = {s["metric"][m.group(2)] for s in prometheus.query(m.group(1))}
    assert obs_ns in values
    pool_q = var["pool"]["definition"].replace("$namespace", obs_ns)
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", pool_q)
    assert POOL in {s["metric"][m.group(2)] for s in prometheus.query(m.group(1))}


def test_the_keda_example_query_answers_with_the_pools_demand(prometheus, scored, obs_ns, kube):
    trigger = yaml.safe_load(KEDA_EXAMPLE.read_text())["spec"]["triggers"][0]["metadata"]
    query = trigger["query"].replace('namespace="rl"', f'namespace="{obs_ns}"').replace('pool="pickscore"',
                                                                                          f'pool="{POOL}"')
    result = prometheus.query(query)
    assert len(result) == 1 and float(result[0]["value"][1]) == 0.0, result  # idle after the run
    # a client's demand hint shows up in the same query within a scrape or two of the operator's next look
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 300))
    kube("annotate", "rewardpool", "-n", obs_ns, POOL, "--overwrite",
         f'rewardpool.io/expected-outputs={{"outputs": 40, "until": "{until}"}}')
    try:
        wait_for(lambda: (r := prometheus.query(query)) and float(r[0]["value"][1]) >= 40, timeout=60,
                 what="the demand hint in the KEDA query")
    finally:
        kube("annotate", "rewardpool", "-n", obs_ns, POOL, "rewardpool.io/expected-outputs-", check=False)


def test_the_charts_alerting_rules_load_and_evaluate_without_error(prometheus, scored):
    rules = wait_for(lambda: (r := prometheus.rules()) and all(x.get("lastEvaluation", "").startswith("20")
                                                               and not x["lastEvaluation"].startswith("0001")
                                                               for x in r) and r,
                     timeout=30, what="every rule evaluated once")
    assert {r["name"] for r in rules} == {"RewardPoolStoreNearEvictionWatermark", "RewardPoolWorkersMissing",
                                         "RewardPoolDrainTooLong", "RewardPoolOperatorReconcileErrors",
                                         "RewardPoolStoreEvictingOutputs", "RewardPoolScoreDrift",
                                         "RewardPoolScorerVersionsDisagree"} | {
        f"rewardpool:score_{k}:{w}" for k in ("count", "mean", "stddev") for w in ("recent", "earlier")}
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    # a healthy pool after a clean run fires nothing
    assert [r["name"] for r in rules if r["type"] == "alerting" and r["state"] != "inactive"] == []


def _firing(prometheus, alert: str, **labels) -> list[dict]:
    rule = next(r for r in prometheus.rules() if r["name"] == alert)
    return [a for a in rule.get("alerts", []) if a["state"] == "firing"
            and all(a["labels"].get(k) == v for k, v in labels.items())]


def _recorded(prometheus, record: str, **labels) -> dict[str, float]:
    sel = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {s["metric"]["version"]: float(s["value"][1]) for s in prometheus.query(f"{record}{{{sel}}}")}


def test_the_score_drift_alert_fires_when_a_versions_scores_move(prometheus, scored, obs_ns, kube, node):
    """The same scorer version, outputs that got darker (as a policy drifting would make them): the mean over
    the last minute leaves the earlier window's by far more than its spread. The expected means come from how
    the job makes its videos (uniform bytes, times --scale), not from the code under test."""
    (version,) = {s["metric"]["version"] for s in prometheus.query(
        f'rewardpool_worker_score_count{{namespace="{obs_ns}",pool="{POOL}"}}')}
    wait_for(lambda: time.time() > scored + RECENT_SECONDS + 5, timeout=RECENT_SECONDS + 10, interval=1,
             what="the first run out of the recent window")
    result = run_job(kube, node, obs_ns, "darker", POOL, samples=24, frames=4, height=32, width=48, batch=4,
                     scale=0.4)
    assert result["scored"] == 24 and result["left"] == 0, result
    alerts = wait_for(lambda: _firing(prometheus, "RewardPoolScoreDrift", pool=POOL, version=version), timeout=90,
                      interval=2, what="RewardPoolScoreDrift firing for the pool's version")
    assert alerts[0]["labels"]["component"] == "mean-intensity" and alerts[0]["labels"]["namespace"] == obs_ns
    lbl = {"namespace": obs_ns, "pool": POOL, "component": "mean-intensity"}
    recent = _recorded(prometheus, "rewardpool:score_mean:recent", **lbl)[version]
    earlier = _recorded(prometheus, "rewardpool:score_mean:earlier", **lbl)[version]
    assert abs(earlier - 0.5) < 0.02 and abs(recent - 0.4 * 0.5) < 0.02, (earlier, recent)
    assert _firing(prometheus, "RewardPoolScorerVersionsDisagree") == []  # one version: nothing to compare


def test_two_versions_that_score_apart_during_a_roll_fire_the_disagreement_alert(prometheus, scored, obs_ns,
                                                                                   kube, node):
    """A roll from the pool's frame rule (numFrames 4: every frame of a 4-frame video) to numFrames 2 (first and
    last) under a rollout whose videos light only their last frame: the old version scores 1/4 of a lit
    frame's brightness, the new one 1/2. Both serve within one recent window, and the alert says so."""
    from rewardpool_devcluster.incluster import rollout_job_objects

    old = {s["metric"]["version"] for s in prometheus.query(
        f'rewardpool_worker_score_count{{namespace="{obs_ns}",pool="{POOL}"}}')}
    kube.apply(rollout_job_objects("roll-scores", obs_ns, node.images.worker, POOL, samples=8, frames=4,
                                   height=32, width=48, batch=4, rounds=150, pause=1.0, pattern="last-frame"))
    wait_for(lambda: "ROUND 1 scored" in kube("logs", "-n", obs_ns, "job/roll-scores", check=False).stdout,
             timeout=240, interval=1, what="the rollout scoring on the old version")
    kube("patch", "rewardpool", "-n", obs_ns, POOL, "--type=merge", "-p", '{"spec":{"scorer":{"numFrames":2}}}')
    alerts = wait_for(lambda: _firing(prometheus, "RewardPoolScorerVersionsDisagree", pool=POOL,
                                      component="mean-intensity"), timeout=420, interval=2,
                      what="RewardPoolScorerVersionsDisagree firing during the roll")
    assert alerts[0]["labels"]["namespace"] == obs_ns
    means = _recorded(prometheus, "rewardpool:score_mean:recent", namespace=obs_ns, pool=POOL,
                      component="mean-intensity")
    new = set(means) - old
    assert len(new) == 1 and len(set(means) & old) == 1, means
    (v_old,), (v_new,) = set(means) & old, new
    # a lit frame averages 255/2 (truncated to bytes: 127 of 255, ~0.498): 1 of 4 frames, or 1 of the 2 picked
    assert abs(means[v_new] - 0.498 / 2) < 0.02, means
    assert means[v_old] < means[v_new] - 0.05, means  # the old version's window also holds the darker run
    kube("delete", "job", "-n", obs_ns, "roll-scores", "--wait=false", check=False)
