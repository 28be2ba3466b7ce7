"""Scorers by registry: every built-in the contract lists resolves to a class with the Scorer interface and is
built by the one path custom scorers take; a new built-in is its module plus one registry line, and the
operator's validation and sizing see it through the contract alone."""
from __future__ import annotations

import pytest
import torch

from rewardpool_operator.pool import builders, sizing, validate
from rewardpool_operator.api.spec import Pool
from rewardpool_worker import contract
from rewardpool_worker.contract import BUILTIN_SCORERS, BuiltinScorer, ScorerConfig
from rewardpool_worker.scorers import Scorer, build_scorer, scorer_class, warm_up

GiB = 2**30


class Brightness:
    """A stand-in for a new built-in: the max of the picked frames."""
    picks_frames = True
    quantise = "truncate"

    def __init__(self, num_frames: int | None = None):
        self.num_frames = num_frames
        self.warmed = 0

    def score_batch(self, outputs, prompts):
        return [float(o.float().max() / 255.0) for o in outputs]


@pytest.mark.parametrize("name", sorted(BUILTIN_SCORERS))
def test_every_builtin_resolves_to_a_scorer(name):
    cls = scorer_class(name)
    assert f"{cls.__module__}:{cls.__name__}" == BUILTIN_SCORERS[name].cls
    assert callable(cls.score_batch)


def test_a_builtin_takes_the_common_path():
    s = build_scorer(ScorerConfig(name="mean-intensity", num_frames=2, device="cpu"))
    assert isinstance(s, Scorer) and s.num_frames == 2
    video = torch.zeros(3, 4, 2, 2, dtype=torch.uint8)
    video[:, 3] = 255  # frames 0 and 3 are picked of 4: half the picked pixels are white
    assert s.score_batch([video], ["p"]) == [0.5]
    with pytest.raises(TypeError, match=r"takes no argument\(s\) \['gamma'\]"):
        build_scorer(ScorerConfig(name="mean-intensity", args={"gamma": 2}))


def test_an_unknown_name_lists_the_builtins():
    with pytest.raises(ValueError, match="use a built-in \\(pickscore, mean-intensity, hps, ocr, openai-judge\\)"):
        scorer_class("pickscor")


def test_a_new_builtin_is_one_registry_line(monkeypatch):
    monkeypatch.setitem(BUILTIN_SCORERS, "brightness",
                        BuiltinScorer(f"{__name__}:Brightness", model_bytes=GiB, gpu_bytes_per_frame=2**20))
    # the worker builds it
    s = build_scorer(ScorerConfig(name="brightness", num_frames=1))
    assert isinstance(s, Brightness)
    assert s.score_batch([torch.full((3, 2, 2), 51, dtype=torch.uint8)], ["p"]) == [pytest.approx(0.2)]
    # the operator accepts the name and sizes its model from the same line
    pool = Pool.from_object({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {
        "image": "w:1", "scorer": {"name": "brightness"},
        "store": {"master": "mc:50051", "protocol": "tcp", "segmentSize": "1Gi"}}})
    size = sizing.compute(pool.spec)
    reasons = [p.reason for p in validate.check(pool.spec, builders.pod_template(pool, size))]
    assert "UnknownScorer" not in reasons and size.model_bytes == GiB
    monkeypatch.delitem(BUILTIN_SCORERS, "brightness")
    assert "UnknownScorer" in [p.reason for p in validate.check(pool.spec, builders.pod_template(pool, size))]


def test_warm_up_runs_the_scorers_own_or_one_black_frame():
    seen = []

    class Own(Brightness):
        def warmup(self):
            seen.append("own")

    class Plain(Brightness):
        def score_batch(self, outputs, prompts):
            seen.append((tuple(outputs[0].shape), outputs[0].dtype, prompts))
            return [0.0]

    warm_up(Own())
    warm_up(Plain())
    assert seen == ["own", ((3, 1, 224, 224), torch.uint8, ["warm-up"])]


def test_the_registry_is_in_the_contract_and_the_contract_imports_no_scorer():
    assert contract.BUILTIN_SCORERS is BUILTIN_SCORERS
    assert BUILTIN_SCORERS["pickscore"].model_bytes == 4 * GiB  # CLIP-H/14 weights in host memory


@pytest.mark.parametrize("name", sorted(BUILTIN_SCORERS))
def test_the_registry_says_what_the_class_does_about_frames(name):
    # The operator sizes ranged reads from the registry's flag; the worker reads by the class's own attribute.
    assert BUILTIN_SCORERS[name].picks_frames == bool(getattr(scorer_class(name), "picks_frames", False))


def test_pickscore_histogram_buckets_spread_its_real_scores():
    """PickScore's scores are its logit (~15-25 for released checkpoints) divided by 26: the histogram's buckets
    must span that, or every score falls in one bucket and quantile and heatmap panels are flat."""
    from rewardpool_worker.scorers.pickscore import SCORE_DIVISOR, PickScoreScorer

    buckets = contract.score_buckets([PickScoreScorer.score_range])
    scores = [logit / SCORE_DIVISOR for logit in range(15, 26)]
    used = {next(i for i, b in enumerate(buckets) if s <= b) for s in scores}
    assert len(used) >= 6, (buckets, scores)  # 0-30 without the division put them all in the first
    assert PickScoreScorer.score_range[1] >= 26 / SCORE_DIVISOR  # the highest logits seen still in range


def test_a_worker_imports_only_its_own_scorers_libraries():
    """Every worker module imported and a mean-intensity scorer built: no model library (open_clip for hps,
    transformers for pickscore, paddle for OCR) is loaded, so an image without one still serves the
    others and a pool pays only for its own model's imports."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys, rewardpool_worker\n"
        "for m in pkgutil.walk_packages(rewardpool_worker.__path__, 'rewardpool_worker.'):\n"
        "    importlib.import_module(m.name)\n"
        "from rewardpool_worker.contract import ScorerConfig\n"
        "from rewardpool_worker.scorers import build_scorer\n"
        "build_scorer(ScorerConfig(name='mean-intensity', device='cpu'))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'open_clip', 'transformers', 'paddle', 'paddleocr'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
