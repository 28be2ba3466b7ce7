"""A scorer that refuses one sample (an exception in its place): the worker's actor passes that sample on as a
ScorerError and scores the rest; a mixture fails the sample naming the component; a refusal is no score in the
histogram the drift alerts read."""
from __future__ import annotations

import torch

from rewardpool_worker.errors import ScorerError
from rewardpool_worker.runtime.slots import StoredOutputRewardActor
from rewardpool_worker.scorers.mixture import WeightedMixture


class Picky:
    """Refuses every output whose prompt says "bad"."""

    def __init__(self, score: float = 0.25):
        self.score, self.calls = score, 0

    def score_batch(self, outputs, prompts):
        self.calls += 1
        return [ValueError(f"cannot judge {p!r}") if "bad" in p else self.score for p in prompts]


def images(n):
    return [torch.zeros(3, 4, 4, dtype=torch.uint8) for _ in range(n)]


def test_the_actor_passes_a_refusal_on_and_keeps_it_out_of_the_score_histogram():
    actor = StoredOutputRewardActor(Picky(), None)
    got = actor.score_batch(images(3), ["a", "bad one", "c"])
    assert got[0] == 0.25 and got[2] == 0.25
    assert isinstance(got[1], ScorerError) and got[1].kind == "ValueError" and "cannot judge 'bad one'" in str(got[1])
    assert [v for _, v in actor.stats()["score_log"]] == [0.25, 0.25]
    assert actor.stats()["outputs"] == 3  # the refused one was handled, not lost


def test_a_mixture_fails_the_sample_a_component_refused_and_names_it():
    picky, plain = Picky(0.5), Picky(1.0)
    mix = WeightedMixture([("plain", 1.0, plain), ("judge", 2.0, picky)])
    plain.score_batch = lambda outputs, prompts: [1.0] * len(outputs)
    got = mix.score_batch(images(3), ["a", "bad", "c"])
    assert got[0] == {"plain": 1.0, "judge": 0.5, "weighted": 2.0} and got[2] == got[0]
    assert isinstance(got[1], ScorerError) and str(got[1]) == "ValueError: judge: cannot judge 'bad'"
    actor = StoredOutputRewardActor(mix, None)
    out = actor.score_batch(images(2), ["bad", "fine"])
    assert isinstance(out[0], ScorerError) and out[1]["weighted"] == 2.0
    assert sorted(k for k, _ in actor.stats()["score_log"]) == ["judge", "plain", "weighted"]


def test_an_optional_component_that_refuses_leaves_nan_its_reason_and_the_others_weighted_sum():
    import math

    from rewardpool_worker.contract import COMPONENT_ERRORS_KEY

    plain, judge = Picky(1.0), Picky(0.5)
    plain.score_batch = lambda outputs, prompts: [1.0] * len(outputs)
    mix = WeightedMixture([("pickscore", 0.75, plain), ("ocr", 0.25, judge)], optional={"ocr"})
    ok, bad = mix.score_batch(images(2), ["fine", "bad"])
    assert ok == {"pickscore": 1.0, "ocr": 0.5, "weighted": 0.875}
    assert bad["pickscore"] == 1.0 and math.isnan(bad["ocr"])
    assert bad["weighted"] == 1.0  # 0.75 rescaled to the whole 1.0
    assert bad[COMPONENT_ERRORS_KEY] == {"ocr": "ValueError: cannot judge 'bad'"}
    # every component with weight refused: the sample fails
    both = WeightedMixture([("a", 1.0, Picky()), ("b", 1.0, Picky())], optional={"a", "b"})
    assert isinstance(both.score_batch(images(1), ["bad"])[0], ScorerError)
    # only the optional one may be NaN: a required refusal still fails the sample
    req = WeightedMixture([("a", 1.0, Picky()), ("b", 1.0, plain)], optional={"b"})
    assert isinstance(req.score_batch(images(1), ["bad"])[0], ScorerError)


def test_the_client_moves_an_optional_components_reason_into_the_report():
    import asyncio
    import math

    from rewardpool_worker.contract import COMPONENT_ERRORS_KEY
    from tests.unit.fakes import FakeRef, FakeWorkerHandle, client_over

    class Mixed(FakeWorkerHandle):
        def _score(self, outputs, prompts, batch_id, group=None):
            return FakeRef([{"pickscore": 1.0, "ocr": math.nan, "weighted": 1.0,
                             COMPONENT_ERRORS_KEY: {"ocr": "no quotes in the prompt"}} if "bad" in p else
                            {"pickscore": 1.0, "ocr": 0.5, "weighted": 0.875} for p in prompts], delay=self.delay)
    client = client_over({"w": Mixed("v1")}, batch_size=4, max_outstanding_per_worker=8)
    r = asyncio.run(client.score_detailed([torch.zeros(3, 2, 2)] * 3, ["a", "bad", "c"], timeout=10))
    assert r.component_errors == {1: {"ocr": "no quotes in the prompt"}}
    assert COMPONENT_ERRORS_KEY not in r.results[1] and r.results[1]["weighted"] == 1.0 and not r.errors


def test_keys_and_required_are_checked_and_change_the_version_only_when_set():
    import pytest

    from rewardpool_operator.pool import builders
    from tests.factories import pool

    with pytest.raises(ValueError, match="a custom class needs key"):
        pool(scorer={"batchSize": 4}, scorers=[{"name": "pickscore"}, {"class": "rm.ocr:Ocr"}])
    with pytest.raises(ValueError, match="key weighted is the mixture's sum"):
        pool(scorer={"batchSize": 4}, scorers=[{"name": "pickscore", "key": "weighted"}])
    base = [{"name": "pickscore", "modelPath": "/m"}, {"name": "mean-intensity"}]
    plain = builders.scorer_digest(pool(scorer={"batchSize": 4}, scorers=base))
    same = builders.scorer_digest(pool(scorer={"batchSize": 4}, scorers=[{**base[0], "required": True}, base[1]]))
    keyed = builders.scorer_digest(pool(scorer={"batchSize": 4}, scorers=[{**base[0], "key": "ps"}, base[1]]))
    optional = builders.scorer_digest(pool(scorer={"batchSize": 4}, scorers=[base[0], {**base[1], "required": False}]))
    assert plain == same and len({plain, keyed, optional}) == 3
    from rewardpool_operator.pool import sizing
    from rewardpool_worker.contract import ENV_VAR, WorkerConfig

    p = pool(scorer={"batchSize": 4}, scorers=[{**base[0], "key": "ps"}, {**base[1], "required": False}])
    env = {e["name"]: e.get("value") for e in builders.pod_template(p, sizing.compute(p.spec))["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.from_json(env[ENV_VAR])
    assert [(c.component, c.required) for c in cfg.scorers] == [("ps", True), ("mean-intensity", False)]
    assert cfg.scorer_label() == "ps+mean-intensity"
