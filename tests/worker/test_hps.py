"""hps against a reference written from the framework's HPS reward (tests/worker/hps_reference.py), on open_clip
models with random weights: a small config for the edge cases, and open_clip's real ViT-H-14 (HPS v2's
architecture) once. Tolerance: 1e-4 absolute + 1e-3 relative. Then through real workers and the miles hook, a
pickscore + hps mixture keyed as miles keys it, with hps optional and refusing a video."""
from __future__ import annotations

import gc
import math
from types import SimpleNamespace

import pytest
import torch

from rewardpool_devcluster import random_hps
from rewardpool_worker.contract import COMPONENT_ERRORS_KEY, ScorerConfig
from rewardpool_worker.scorers import build_scorer
from rewardpool_worker.scorers.hps import CHECKPOINTS
from tests.worker import hps_reference as ref
from tests.worker import tiny_clip

LONG_PROMPT = "a lighthouse on a cliff above a stormy sea, gulls, spray, a red door, " * 10  # > 77 tokens


def close(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-4 + 1e-3 * abs(want)


@pytest.fixture(scope="module")
def hps_dir(tmp_path_factory):
    path, arch = random_hps.build(tmp_path_factory.mktemp("hps-tiny"), "tiny", seed=3)
    return path, arch


def scorer(hps_dir, **args):
    path, arch = hps_dir
    return build_scorer(ScorerConfig(name="hps", model_path=str(path), device="cpu",
                                     args={"architecture": arch, **args}))


def held_out_cases() -> list[tuple[str, torch.Tensor, str]]:
    g = torch.Generator().manual_seed(4242)
    between = (torch.randint(0, 255, (3, 60, 80), generator=g).float() + 0.6) / 255  # x255 = n + 0.6
    return [
        ("landscape in [0, 1]", torch.rand(3, 64, 96, generator=g), "a red kite over the sea"),
        ("portrait, floats in [0, 255]", torch.rand(3, 200, 120, generator=g) * 255, "a market street"),
        ("uint8 at the input size", torch.randint(0, 256, (3, 224, 224), generator=g, dtype=torch.uint8), "a dog"),
        ("larger than the input", torch.rand(3, 300, 500, generator=g), "a mountain lake at dawn"),
        ("a one-frame video", torch.rand(3, 1, 50, 70, generator=g), "two cats"),
        ("rounds, does not truncate", between, "neon signs in the rain"),
        ("prompt over 77 tokens", torch.rand(3, 48, 48, generator=g), LONG_PROMPT),
        ("odd sizes", torch.rand(3, 33, 47, generator=g), "a bowl of fruit"),
    ]


def test_hps_matches_the_reference_on_held_out_cases(hps_dir):
    cases = held_out_cases()
    model, tokenizer = ref.load(hps_dir[0] / CHECKPOINTS["v2.1"], hps_dir[1])
    s = scorer(hps_dir)
    got = s.score_batch([o for _, o, _ in cases], [p for _, _, p in cases])  # one forward, as the framework's
    for (what, output, prompt), g in zip(cases, got):
        want = ref.score(model, tokenizer, output, prompt)
        assert isinstance(g, float) and close(g, want), (what, g, want)
    # the scores are not all alike (random weights still tell images apart), and each alone scores the same
    assert len({round(g, 6) for g in got}) == len(got)
    alone = [s.score_batch([o], [p])[0] for _, o, p in cases]
    assert all(close(a, g) for a, g in zip(alone, got))


def test_rounding_is_the_frameworks_quantisation(hps_dir):
    """At x255 = n + 0.6 rounding and truncation give different pixels: the reference rounds, and so must the
    scorer (a truncating hps would differ here)."""
    _, between, prompt = held_out_cases()[5]
    model, tokenizer = ref.load(hps_dir[0] / CHECKPOINTS["v2.1"], hps_dir[1])
    got = scorer(hps_dir).score_batch([between], [prompt])[0]
    truncated = ((between * 255).floor() / 255).clamp(0, 1)  # what .to(uint8) without rounding makes of it
    assert close(got, ref.score(model, tokenizer, between, prompt))
    assert not close(got, ref.score(model, tokenizer, truncated, prompt))


def test_a_video_is_refused_for_its_sample_alone(hps_dir):
    g = torch.Generator().manual_seed(77)
    image, video, other = torch.rand(3, 40, 40, generator=g), torch.rand(3, 4, 40, 40, generator=g), \
        torch.rand(3, 56, 40, generator=g)
    model, tokenizer = ref.load(hps_dir[0] / CHECKPOINTS["v2.1"], hps_dir[1])
    with pytest.raises(ValueError):  # the framework's actor raises on a video
        ref.score(model, tokenizer, video, "x")
    got = scorer(hps_dir).score_batch([image, video, other], ["a", "b", "c"])
    assert isinstance(got[1], ValueError) and "4 frames" in str(got[1]) and "images" in str(got[1])
    assert close(got[0], ref.score(model, tokenizer, image, "a"))
    assert close(got[2], ref.score(model, tokenizer, other, "c"))
    gray = scorer(hps_dir).score_batch([torch.rand(1, 40, 40, generator=g)], ["d"])[0]
    assert isinstance(gray, ValueError) and "1 channels" in str(gray)


def test_the_version_picks_the_checkpoint_and_a_missing_one_is_named(hps_dir, tmp_path):
    old, arch = random_hps.build(tmp_path / "v20", "tiny", seed=5, version="v2.0")
    assert (old / "HPS_v2_compressed.pt").is_file() and not (old / "HPS_v2.1_compressed.pt").exists()
    img = torch.rand(3, 40, 40, generator=torch.Generator().manual_seed(1))
    v20 = scorer((old, arch), version="v2.0").score_batch([img], ["p"])[0]
    model, tokenizer = ref.load(old / "HPS_v2_compressed.pt", arch)
    assert close(v20, ref.score(model, tokenizer, img, "p"))
    with pytest.raises(ValueError, match="HPS_v2.1_compressed.pt"):  # v2.1 (the default) is not in that directory
        scorer((old, arch))
    with pytest.raises(ValueError, match="version must be one of"):
        scorer(hps_dir, version="v3")
    # modelPath may name the file itself
    direct = build_scorer(ScorerConfig(name="hps", model_path=str(old / "HPS_v2_compressed.pt"), device="cpu",
                                       args={"architecture": arch}))
    assert close(direct.score_batch([img], ["p"])[0], v20)
    with pytest.raises(ValueError, match="modelPath"):
        build_scorer(ScorerConfig(name="hps", device="cpu"))


def test_hps_on_open_clips_real_vit_h_14(tmp_path):
    """HPS v2's real architecture (open_clip's ViT-H-14, 986M parameters, random weights: about 4 GB, a few
    seconds a forward on two cores): the scorer loads a checkpoint of that shape and scores as the reference."""
    path, arch = random_hps.build(tmp_path / "h14", "vit-h-14", seed=11)
    assert arch == "ViT-H-14"
    g = torch.Generator().manual_seed(12)
    outputs, prompts = [torch.rand(3, 96, 64, generator=g), torch.rand(3, 1, 80, 80, generator=g)], ["a", "b"]
    s = build_scorer(ScorerConfig(name="hps", model_path=str(path), device="cpu"))  # args: the defaults
    assert s.architecture == "ViT-H-14" and s.image_size == 224
    got = s.score_batch(outputs, prompts)
    del s
    gc.collect()
    model, tokenizer = ref.load(path / CHECKPOINTS["v2.1"], "ViT-H-14")
    want = [ref.score(model, tokenizer, o, p) for o, p in zip(outputs, prompts)]
    assert all(close(a, b) for a, b in zip(got, want)), (got, want)


def test_a_pickscore_and_hps_mixture_through_the_miles_hook(pool_actors, hps_dir, tmp_path):
    """Real workers hosting pickscore + hps (optional) keyed as miles keys them: an image gets both and the
    weighted sum; a video is refused by hps alone, which is NaN with its reason, and weighted is pickscore's
    rescaled to the weights' total."""
    import asyncio

    from rewardpool_worker.integrations.miles import rewardpool_rm
    from tests.worker.miles_reference import Sample
    from tests.worker import pickscore_reference as pref

    clip = tiny_clip.build(tmp_path / "clip")
    path, arch = hps_dir
    pool_actors("hpsmix", 1, {"batch_size": 4}, scorers=[
        {"name": "pickscore", "model_path": str(clip), "num_frames": 2, "weight": 1.0, "device": "cpu"},
        {"name": "hps", "model_path": str(path), "args": {"architecture": arch}, "weight": 3.0, "required": False,
         "device": "cpu"}])
    g = torch.Generator().manual_seed(31)
    image, video = torch.rand(3, 1, 32, 32, generator=g), torch.rand(3, 4, 32, 32, generator=g)
    samples = [Sample(prompt="a red kite", generated_output=image), Sample(prompt="two cats", generated_output=video)]
    for s in samples:
        s.metadata = {}
    # miles' --hps-version is checked against the real worker's hps component before anything is scored
    wrong = SimpleNamespace(custom_rm_args="pool=hpsmix,namespace=t,timeout=120", reward_key="weighted",
                            hps_version="v2.0")
    with pytest.raises(ValueError, match="scores hps with HPS v2.1 but miles' --hps-version is v2.0"):
        asyncio.run(rewardpool_rm(wrong, samples))
    args = SimpleNamespace(custom_rm_args="pool=hpsmix,namespace=t,timeout=120", reward_key="weighted",
                           hps_version="v2.1")
    rewards = asyncio.run(rewardpool_rm(args, samples))

    model, tokenizer = ref.load(path / CHECKPOINTS["v2.1"], arch)
    from transformers import CLIPModel
    cm, cp = CLIPModel.from_pretrained(str(clip)).eval(), pref.processor(clip)
    ps = [pref.score(cm, cp, o, p, 2) for o, p in [(image, "a red kite"), (video, "two cats")]]
    hps_image = ref.score(model, tokenizer, image, "a red kite")
    assert set(rewards[0]) >= {"pickscore", "hps", "weighted"}
    assert close(rewards[0]["pickscore"], ps[0]) and close(rewards[0]["hps"], hps_image)
    assert close(rewards[0]["weighted"], ps[0] + 3.0 * hps_image)
    assert math.isnan(rewards[1]["hps"]) and close(rewards[1]["pickscore"], ps[1])
    assert close(rewards[1]["weighted"], 4.0 * ps[1])  # pickscore's weight rescaled to the total (1 + 3)
    errors = samples[1].metadata.get("reward_errors", {}).get("hpsmix", {})
    assert "hps" in errors and "4 frames" in errors["hps"], samples[1].metadata
    assert COMPONENT_ERRORS_KEY not in rewards[1]
