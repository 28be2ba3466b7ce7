"""ocr against miles' OCR reward restated (tests/worker/ocr_reference.py) on PaddleOCR models built here
(rewardpool_devcluster/random_ocr.py: PaddleOCR's real pipeline, small networks): the same recognised text and
the same reward, exactly; RGB, not BGR; images only; a prompt without a quoted target refused for its sample.
Then a pickscore + hps + ocr mixture through real workers and the miles hook, keyed as miles keys it."""
from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest
import torch

from rewardpool_devcluster import random_hps, random_ocr
from rewardpool_worker.contract import ScorerConfig
from rewardpool_worker.scorers import build_scorer
from rewardpool_worker.scorers.hps import CHECKPOINTS
from tests.worker import hps_reference, ocr_reference as ref
from tests.worker import pickscore_reference as pref
from tests.worker import tiny_clip


@pytest.fixture(scope="module")
def ocr_dir(tmp_path_factory):
    return random_ocr.build(tmp_path_factory.mktemp("ocr-models"))


def scorer(ocr_dir):
    return build_scorer(ScorerConfig(name="ocr", model_path=str(ocr_dir), device="cpu"))


def poster(h: int, w: int, bars: list[tuple[int, int, int, int]], color=(1.0, 1.0, 1.0), seed: int = 0,
           dtype=torch.float32) -> torch.Tensor:
    """A dark image with light bars (what the test detector finds as text lines), with a little noise."""
    g = torch.Generator().manual_seed(seed)
    img = torch.rand(3, h, w, generator=g) * 0.1
    for top, left, bh, bw in bars:
        for c in range(3):
            img[c, top:top + bh, left:left + bw] = color[c] - 0.05 * torch.rand(bh, bw, generator=g)
    return (img * 255).round().to(torch.uint8) if dtype == torch.uint8 else img


def held_out_cases():
    return [
        ("one line", poster(256, 384, [(100, 40, 40, 300)], seed=1), 'a poster that reads "WR%R%"'),
        ("two lines", poster(320, 320, [(40, 20, 36, 260), (200, 60, 30, 200)], seed=2), 'a sign "Hello World"'),
        ("nothing to read", poster(128, 128, [], seed=3), 'a blank wall with "nothing"'),
        ("uint8", poster(200, 400, [(80, 30, 50, 330)], seed=4, dtype=torch.uint8), 'the word "coffee"'),
        ("a one-frame video", poster(160, 300, [(60, 20, 40, 250)], seed=5).unsqueeze(1), 'caption "ABC 123"'),
        ("coloured", poster(200, 360, [(70, 30, 44, 300)], color=(1.0, 0.8, 0.45), seed=6), 'neon "OPEN LATE"'),
    ]


def test_ocr_matches_miles_reward_exactly(ocr_dir):
    cases = held_out_cases()
    miles = ref.load(ocr_dir)
    got = scorer(ocr_dir).score_batch([o for _, o, _ in cases], [p for _, _, p in cases])
    texts = []
    for (what, output, prompt), g in zip(cases, got):
        assert g == ref.score(miles, output, prompt), what  # the same text, so exactly the same reward
        texts.append(ref.recognised(miles, ref.rgb_image(output)))
    # the models read something: the rewards are not all the trivial 0, and the blank image reads nothing
    assert texts[2] == "" and sum(1 for t in texts if t) >= 4, texts
    assert any(0 < g <= 1 for g in got), got


def test_the_image_goes_in_as_rgb_not_bgr(ocr_dir):
    """A coloured line reads differently with its channels swapped (the recogniser sees colour); the scorer
    reads what miles' RGB call reads."""
    _, img, prompt = held_out_cases()[5]
    miles = ref.load(ocr_dir)
    rgb = ref.rgb_image(img)
    as_rgb, as_bgr = ref.recognised(miles, rgb), ref.recognised(miles, rgb[:, :, ::-1].copy())
    assert as_rgb != as_bgr, (as_rgb, as_bgr)
    s = scorer(ocr_dir)
    assert s.recognise(s.image(img)) == as_rgb


def test_refusals_are_per_sample(ocr_dir):
    ok = poster(128, 256, [(40, 20, 40, 200)], seed=7)
    video = torch.stack([ok, ok], dim=1)  # (3, 2, H, W)
    got = scorer(ocr_dir).score_batch([ok, video, ok, ok, ok[:1]], ['a "sign"', 'a "sign"', "no quotes at all",
                                                                      'empty ""', 'a "sign"'])
    assert isinstance(got[0], float)
    assert isinstance(got[1], ValueError) and "2 frames" in str(got[1])
    assert isinstance(got[2], ValueError) and "double quotes" in str(got[2])
    assert isinstance(got[3], ValueError) and "empty" in str(got[3])
    assert isinstance(got[4], ValueError) and "1 channels" in str(got[4])
    with pytest.raises(ValueError):
        ref.score(ref.load(ocr_dir), video, 'a "sign"')  # miles raises on the video (its whole call fails)


def test_missing_models_are_named_not_downloaded(tmp_path):
    (tmp_path / "det").mkdir()
    with pytest.raises(ValueError, match=r"lacks PaddleOCR inference models in \['det', 'rec', 'cls'\]"):
        build_scorer(ScorerConfig(name="ocr", model_path=str(tmp_path), device="cpu"))
    with pytest.raises(ValueError, match="modelPath"):
        build_scorer(ScorerConfig(name="ocr", device="cpu"))


def test_pickscore_hps_and_ocr_through_the_miles_hook(pool_actors, ocr_dir, tmp_path):
    """The origin's SD3.5 run: images whose prompts quote the text to render, scored by a pool of pickscore + hps
    + ocr (ocr optional), through miles' hook with --reward-key weighted: miles' dict rewards with miles' keys,
    each equal to miles' own reward; a prompt without quotes makes ocr refuse that sample alone, named."""
    from rewardpool_worker.integrations.miles import rewardpool_rm
    from tests.worker.miles_reference import Sample

    clip = tiny_clip.build(tmp_path / "clip")
    hps_path, arch = random_hps.build(tmp_path / "hps", "tiny", seed=4)
    pool_actors("sd35", 1, {"batch_size": 4, "device": "cpu"}, scorers=[
        {"name": "pickscore", "model_path": str(clip), "weight": 1.0, "device": "cpu"},
        {"name": "hps", "model_path": str(hps_path), "args": {"architecture": arch}, "weight": 1.0, "device": "cpu"},
        {"name": "ocr", "model_path": str(ocr_dir), "weight": 2.0, "required": False, "device": "cpu"}])
    images = [poster(224, 320, [(90, 30, 40, 260)], seed=s) for s in (11, 12, 13)]
    prompts = ['a storefront sign that reads "WR%R%"', 'a poster reading "Hello"', "a cat on a sofa"]
    samples = [Sample(prompt=p, generated_output=i.unsqueeze(1)) for i, p in zip(images, prompts)]
    for s in samples:
        s.metadata = {}
    args = SimpleNamespace(custom_rm_args="pool=sd35,namespace=t,timeout=300", reward_key="weighted")
    rewards = asyncio.run(rewardpool_rm(args, samples))

    from transformers import CLIPModel
    cm, cp = CLIPModel.from_pretrained(str(clip)).eval(), pref.processor(clip)
    hm, ht = hps_reference.load(hps_path / CHECKPOINTS["v2.1"], arch)
    miles_ocr = ref.load(ocr_dir)
    close = lambda a, b: abs(a - b) <= 1e-4 + 1e-3 * abs(b)  # noqa: E731
    for i, (img, prompt) in enumerate(zip(images, prompts)):
        r = rewards[i]
        assert set(r) == {"pickscore", "hps", "ocr", "weighted"}, r
        assert close(r["pickscore"], pref.score(cm, cp, img.unsqueeze(1), prompt, None))
        assert close(r["hps"], hps_reference.score(hm, ht, img, prompt))
        if i < 2:
            assert r["ocr"] == ref.score(miles_ocr, img, prompt)
            assert close(r["weighted"], r["pickscore"] + r["hps"] + 2.0 * r["ocr"])
    # the quote-less prompt: ocr refused it alone, named; weighted is the others' rescaled to the total (4)
    assert math.isnan(rewards[2]["ocr"]) and close(rewards[2]["weighted"], 2.0 * (rewards[2]["pickscore"]
                                                                                  + rewards[2]["hps"]))
    assert "double quotes" in samples[2].metadata["reward_errors"]["sd35"]["ocr"]
