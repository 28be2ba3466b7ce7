"""`rewardpool status` rendering: pool, pods, events and worker health at a fixed time become text."""
import re

from rewardpool_operator.api import conditions as C
from rewardpool_operator.pool import status
from rewardpool_operator.cli import statusview
from rewardpool_worker.contract import DRAIN_ANNOTATION, WorkerHealth

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def ts(seconds_ago: float) -> str:
    return C.now(NOW - seconds_ago)


def pool(name="ps", replicas=3, ready=3, conds=None, **st) -> dict:
    conds = conds if conds is not None else [
        C.cond("InvalidSpec", False, "SpecValid", "spec accepted"),
        C.cond("NetworkReady", True, "AttachmentReady", "ok"),
        C.cond("Degraded", False, "AsExpected", "no problems found"),
        C.cond("ReplicaFailure", False, "NoFailures", "ok"),
        C.cond("Progressing", False, "Stable", f"{replicas} worker(s) up to date"),
        C.cond("Ready", True, "AllWorkersReady", f"{ready}/{replicas} workers ready")]
    status_ = {"readyReplicas": ready, "replicas": replicas, "queueDepth": 0, "pendingBytes": 0,
               "conditions": C.merge([], conds, 1, at=ts(600)), **st}
    return {"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool",
            "metadata": {"name": name, "namespace": "rl", "uid": f"uid-{name}", "creationTimestamp": ts(3600)},
            "spec": {"replicas": replicas, "drainTimeoutSeconds": 600}, "status": status_}


def pod(name, node="rdma-node-0", ready=True, annotations=None, deleting=False) -> dict:
    meta = {"name": name, "namespace": "rl", "annotations": annotations or {},
            "ownerReferences": [{"uid": "uid-ps", "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = ts(1)
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def event(reason, message, seconds_ago, type_="Normal", uid="uid-ps", count=1) -> dict:
    return {"metadata": {"name": f"ps.{reason}", "creationTimestamp": ts(seconds_ago)}, "type": type_,
            "reason": reason, "message": message, "lastTimestamp": ts(seconds_ago), "count": count,
            "involvedObject": {"kind": "RewardPool", "name": "ps", "uid": uid}}


def healthy(**kw) -> WorkerHealth:
    return WorkerHealth(**{"phase": "ready", "queue_depth": 2, "in_flight": 1, "last_batch_seconds_ago": 3.2, **kw})


def row(text: str, name: str) -> list[str]:
    """The cells of one worker's row (columns are two or more spaces apart)."""
    line = next(x for x in text.splitlines() if x.strip().startswith(name + " "))
    return re.split(r"\s{2,}", line.strip())


def test_a_healthy_pool_shows_every_worker_its_demand_fill_and_last_scale():
    p = pool(queueDepth=6, pendingBytes=3 * 2**30, demandHint=64, storeFill=0.4512, desiredReplicas=3,
             lastScale={"time": ts(125), "from": 2, "to": 3, "reason": "AboveTarget", "message": "6 queued"})
    pods = [pod("ps-b", node="rdma-node-1"), pod("ps-a")]
    health = {"ps-a": healthy(), "ps-b": healthy(queue_depth=4, in_flight=2, last_batch_seconds_ago=None)}
    events = [event("WorkerCreated", "created worker pod ps-a", 300)]
    out = statusview.render_pool(p, pods, events, health, NOW)

    assert out.splitlines()[0].split() == ["RewardPool", "rl/ps", "age", "60m"]
    assert "Replicas:    3/3 ready, autoscaler wants 3" in out
    assert "Demand:      queue 6, pending 3.0GiB, hint 64 outputs" in out
    assert "Store fill:  45.1% of the store, eviction watermark 90%" in out and "ABOVE" not in out
    assert "Last scale:  2 -> 3, 2m5s ago: AboveTarget: 6 queued" in out
    assert "Conditions:  all as expected\n" in out and "not as expected" not in out and "Draining:\n  none" in out
    assert row(out, "ps-a") == ["ps-a", "Running", "True", "rdma-node-0", "ready", "2", "1", "3s ago"]
    assert row(out, "ps-b") == ["ps-b", "Running", "True", "rdma-node-1", "ready", "4", "2", "never"]
    assert out.index("ps-a ") < out.index("ps-b ")  # sorted by name
    assert "no /healthz" not in out
    assert row(out, "5m") == ["5m", "Normal", "WorkerCreated", "created worker pod ps-a"]


def test_a_draining_worker_shows_how_long_it_has_drained_of_its_timeout():
    p = pool(drainingReplicas=1)
    pods = [pod("ps-a"), pod("ps-b", annotations={DRAIN_ANNOTATION: ts(42)}),
            pod("ps-c", annotations={DRAIN_ANNOTATION: ts(3700)}, deleting=True)]
    health = {"ps-a": healthy(), "ps-b": healthy(phase="draining", in_flight=1), "ps-c": None}
    out = statusview.render_pool(p, pods, [], health, NOW, {"ps-c": "503: connection refused"})
    drains = out.split("Draining:\n")[1].split("Workers")[0].splitlines()
    assert drains == ["  ps-b  draining for 42s of 600s (worker draining, 1 in flight)",
                      "  ps-c  draining for 61m of 600s (worker not reachable, pod terminating)"]
    assert "3/3 ready, 1 draining" in out
    workers = out.split("Workers (3):")[1]
    assert row(workers, "ps-b")[4] == "draining" and row(workers, "ps-c")[1] == "Terminating"


def test_unreachable_health_shows_dashes_and_says_why_once():
    pods = [pod("ps-a"), pod("ps-b"), pod("ps-c")]
    why = "503: error trying to reach service: dial tcp 10.0.0.1:8000: connect: no route to host"
    health = {"ps-a": None, "ps-b": None, "ps-c": healthy(live=False, reason="a batch has held the model for 400s")}
    out = statusview.render_pool(pool(), pods, [], health, NOW, {"ps-a": why, "ps-b": why})
    for name in ("ps-a", "ps-b"):
        assert row(out, name)[4:] == ["-", "-", "-", "-"]
    assert row(out, "ps-c")[4] == "ready (not live)"
    assert out.count("no /healthz") == 1
    assert f"no /healthz from 2 of 3 workers through the API server's pod proxy: {why} (2 workers)" in out
    assert "ps-c is not live: a batch has held the model for 400s" in out
    # no reason given (the fetch layer did not say): still no crash, still told
    out = statusview.render_pool(pool(), [pod("ps-a")], [], {}, NOW)
    assert row(out, "ps-a")[4:] == ["-", "-", "-", "-"] and "no /healthz from 1 of 1 workers" in out


def test_a_pool_with_an_invalid_spec_shows_the_conditions_that_are_wrong():
    p = pool(replicas=2, ready=0)
    p["status"] = status.invalid("spec.scorer: unknown scorer 'pikscore'", {}, 1)
    out = statusview.render_pool(p, [], [event("SpecNotUnderstood", "unknown scorer", 10, "Warning")], {}, NOW)
    bad = out.split("Conditions not as expected:\n")[1].split("Draining:")[0]
    assert row(bad, "InvalidSpec") == ["InvalidSpec", "True", "SpecNotUnderstood",
                                       "spec.scorer: unknown scorer 'pikscore'"]
    assert row(bad, "Ready")[:3] == ["Ready", "False", "InvalidSpec"]
    assert "0/2 ready" in out and "Workers (0):\n  (no worker pods)" in out
    assert "unknown (no store metrics" in out and "Last scale:  none" in out
    assert "Warning  SpecNotUnderstood  unknown scorer" in out
    table = statusview.render_pools([p], NOW, "rl")
    assert "InvalidSpec(SpecNotUnderstood),Ready(InvalidSpec)" in table


def test_no_pools():
    assert statusview.render_pools([], NOW, "rl") == "No RewardPools in namespace rl.\n"
    assert statusview.render_pools([], NOW, None) == "No RewardPools in any namespace.\n"


def test_the_compact_table_has_a_row_per_pool_and_a_namespace_column_for_all_namespaces():
    a = pool("alpha", storeFill=0.95, queueDepth=12, desiredReplicas=5,
             lastScale={"time": ts(30), "from": 3, "to": 5, "reason": "StorePressure", "message": "x"})
    b = pool("beta", replicas=2, ready=1, conds=[C.cond("Ready", False, "WorkersNotReady", "1/2"),
                                                 C.cond("Degraded", True, "WorkerImagePullFailed", "x")])
    lines = statusview.render_pools([b, a], NOW, "rl").splitlines()
    assert lines[0].split() == ["NAME", "READY", "WANTS", "DRAINING", "QUEUE", "PENDING", "FILL/MARK",
                                "LAST", "SCALE", "NOT", "OK", "AGE"]
    assert re.split(r"\s{2,}", lines[1]) == ["alpha", "3/3", "5", "0", "12", "0B", "95%/90%", "3->5 30s ago", "-",
                                             "60m"]
    assert re.split(r"\s{2,}", lines[2])[:2] == ["beta", "1/2"]
    assert "Ready(WorkersNotReady),Degraded(WorkerImagePullFailed)" in lines[2]
    assert statusview.render_pools([a], NOW, None).splitlines()[1].split()[:2] == ["rl", "alpha"]


def test_store_fill_above_the_pools_watermark_is_called_out():
    p = pool(storeFill=0.86)
    p["spec"]["sizing"] = {"highWatermark": 0.85}
    assert "86.0% of the store, eviction watermark 85%  ABOVE the watermark" in statusview.render_pool(p, [], [], {},
                                                                                                       NOW)


def test_events_are_the_last_few_of_this_pool_oldest_first():
    evs = [event(f"R{i}", f"m{i}", 100 - i) for i in range(8)]
    evs.append(event("Old", "a deleted pool of the same name", 1, uid="uid-other"))
    evs.append(event("Repeated", "again\nand again", 0, count=4))
    out = statusview.render_pool(pool(), [], evs, {}, NOW)
    shown = out.split("Events (last 5):\n")[1].splitlines()[1:]
    assert [re.split(r"\s{2,}", x.strip())[2] for x in shown] == ["R4", "R5", "R6", "R7", "Repeated"]
    assert shown[-1].endswith("again and again (x4)")


def test_events_of_one_second_are_in_the_order_the_api_server_stored_them():
    """A pool's first reconcile writes several events in one second; the API lists them by name (random): the
    last five shown are the last five stored (resourceVersion), not whichever sort last by name."""
    evs = [{**event(f"R{i}", "m", 2), "metadata": {"name": f"ps.{name}", "creationTimestamp": ts(2),
                                                    "resourceVersion": str(900 + i)}}
           for i, name in enumerate(["f", "a", "e", "b", "d", "c", "g"])]
    out = statusview.render_pool(pool(), [], sorted(evs, key=lambda e: e["metadata"]["name"]), {}, NOW)
    shown = out.split("Events (last 5):\n")[1].splitlines()[1:]
    assert [re.split(r"\s{2,}", x.strip())[2] for x in shown] == ["R2", "R3", "R4", "R5", "R6"]


def test_age_reads_like_kubectl():
    cases = {None: "-", -3: "0s", 0: "0s", 95: "95s", 120: "2m", 125: "2m5s", 599: "9m59s", 3599: "59m",
             3 * 3600: "3h", 5 * 3600 + 180: "5h3m", 30 * 3600: "30h", 3 * 86400 + 4 * 3600: "3d4h",
             12 * 86400 + 3600: "12d"}
    assert {s: statusview.age(s) for s in cases} == cases


def test_the_scorer_versions_serving_are_shown_and_a_roll_is_called_out():
    one = statusview.render_pool(pool(scorerVersions=[{"version": "3f9a1c", "workers": 2, "ready": 2}]), [], [],
                                 {}, NOW)
    assert "Versions:    3f9a1c (2/2 ready)\n" in one
    two = statusview.render_pool(pool(scorerVersions=[{"version": "3f9a1c", "workers": 1, "ready": 1},
                                                      {"version": "77d0e2", "workers": 2, "ready": 1}]), [], [], {}, NOW)
    assert "Versions:    3f9a1c (1/1 ready), 77d0e2 (1/2 ready)   two versions serving: a roll is in progress" in two
    assert "Versions:    none reported yet" in statusview.render_pool(pool(), [], [], {}, NOW)


def test_a_shadow_is_shown_with_its_agreement_and_whether_it_took_traffic():
    sh = {"version": "77d0e2", "against": ["3f9a1c"], "samples": 37, "correlation": 0.9812, "meanDifference": -0.25,
          "promoted": None}
    text = statusview.render_pool(pool(shadow=sh), [], [], {}, NOW)
    assert ("Shadow:      77d0e2 against 3f9a1c: 37 samples, correlation 0.981, mean difference -0.25; in shadow, "
            "the old version serves\n") in text
    done = statusview.render_pool(pool(shadow={**sh, "correlation": None, "promoted": "2026-12-02T01:00:00Z"}),
                                  [], [], {}, NOW)
    assert "correlation n/a" in done and "took traffic 2026-12-02T01:00:00Z" in done
    assert "Shadow:" not in statusview.render_pool(pool(), [], [], {}, NOW)
