"""The worker's score series (drift): read back through Prometheus' own text parser, a window's mean and
spread come out as the statistics module computes them from the scores given."""
from __future__ import annotations

import statistics

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rewardpool_worker.runtime.metrics import WorkerMetrics

STATS = {"queue_depth": 0, "pending_bytes": 0, "draining": False}


def _samples(m: WorkerMetrics) -> dict:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_scores_give_each_components_mean_and_spread_per_version():
    m = WorkerMetrics("pickscore+mean-intensity")
    m.startup({"version": "abc123", "score_ranges": {"pickscore": (0.0, 30.0), "mean-intensity": (0.0, 1.0),
                                                      "weighted": (0.0, 15.5)}})
    before = _samples(m)
    key = lambda name, comp: (name, (("component", comp), ("version", "abc123")))  # noqa: E731
    assert before[key("rewardpool_worker_score_count", "pickscore")] == 0  # present from Ready on
    pick = [18.5, 21.0, 19.25, 22.75, 20.0]
    weighted = [9.5, 10.75, 10.0, 11.5, 10.25]
    log = [("pickscore", p) for p in pick] + [("weighted", w) for w in weighted]
    m.update({**STATS, "score_log": log[:4]})
    m.update({**STATS, "score_log": log[4:]})
    got = _samples(m)
    for comp, xs in (("pickscore", pick), ("weighted", weighted)):
        n = got[key("rewardpool_worker_score_count", comp)]
        mean = got[key("rewardpool_worker_score_sum", comp)] / n
        var = got[key("rewardpool_worker_score_squares_total", comp)] / n - mean ** 2
        assert n == len(xs)
        assert abs(mean - statistics.fmean(xs)) < 1e-9
        assert abs(var - statistics.pvariance(xs)) < 1e-9
    # buckets span the components' ranges: a PickScore of 21 is not lumped into one bucket with everything
    les = sorted({float(dict(lbl)["le"]) for (name, lbl) in got if name == "rewardpool_worker_score_bucket"})
    assert les[0] == 0.0 and 30.0 in les and len([x for x in les if 15 <= x <= 25]) >= 3


def test_the_groups_pinned_to_a_worker_are_a_gauge_the_operator_reads():
    from rewardpool_operator.controller.workers import parse
    from rewardpool_worker.contract import ACTIVE_GROUPS_METRIC

    m = WorkerMetrics()
    m.update({**STATS, "active_groups": 3})
    text = generate_latest(m.registry).decode()
    assert parse(text, {ACTIVE_GROUPS_METRIC}) == {ACTIVE_GROUPS_METRIC: 3.0}
    m.update({**STATS, "active_groups": 0})
    assert parse(generate_latest(m.registry).decode(), {ACTIVE_GROUPS_METRIC}) == {ACTIVE_GROUPS_METRIC: 0.0}
