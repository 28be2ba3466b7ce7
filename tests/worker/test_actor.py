"""The stored-output reward actor and the scorers: stored refs read through the registered reader score
exactly like the same tensors passed inline; inline tensors pass through untouched."""
from __future__ import annotations

import pytest
import torch

from rewardpool_worker.actor import StoredOutputRewardActor
from rewardpool_worker.config import ScorerConfig
from rewardpool_worker.frames import frame_indices, to_uint8
from rewardpool_worker.reader import RegisteredTensorReader
from rewardpool_worker.scorers import build_scorer, scorer_class
from tests.worker import tiny_clip
from rewardpool_devcluster.producer import make_tensor


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    return tiny_clip.build(tmp_path_factory.mktemp("tiny-clip"))


class Recorder:
    def __init__(self):
        self.seen = []

    def score_batch(self, outputs, prompts):
        self.seen.append(outputs)
        return [0.0] * len(outputs)


def test_inline_tensors_pass_through_untouched(store):
    rec = Recorder()
    reader = RegisteredTensorReader(store)
    actor = StoredOutputRewardActor(rec, reader)
    t = torch.rand(3, 4, 8, 8)
    actor.score_batch([t], ["p"])
    assert rec.seen[0][0] is t and reader.stats.reads == 0 and reader.stats.registrations == 0


def test_mixed_batch_keeps_order(store, producer):
    rec = Recorder()
    actor = StoredOutputRewardActor(rec, RegisteredTensorReader(store))
    ref = producer.put("mixed", seed=11, shape=(3, 2, 4, 4))
    inline = torch.zeros(3, 2, 4, 4)
    actor.score_batch([inline, ref, inline], ["a", "b", "c"])
    got = rec.seen[0]
    assert got[0] is inline and got[2] is inline and torch.equal(got[1], make_tensor(11, [3, 2, 4, 4], "float32"))
    assert actor.in_flight == 0 and actor.pending_bytes == 0


def test_pickscore_on_a_stored_video_equals_the_inline_path(store, producer, clip_dir):
    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(clip_dir), device="cpu"))
    actor = StoredOutputRewardActor(scorer, RegisteredTensorReader(store))
    refs = [producer.put(f"ps-{i}", seed=30 + i, shape=(3, 16, 40, 40)) for i in range(3)]
    prompts = ["a cat", "a dog on a hill", "rain"]
    stored = actor.score_batch(refs, prompts)
    inline_videos = [make_tensor(30 + i, [3, 16, 40, 40], "float32") for i in range(3)]
    inline = scorer.score_batch(inline_videos, prompts)
    assert stored == inline and len(set(stored)) == 3

    # The same number from the frames the inline rollout picks (0, 5, 10, 15), quantised after picking.
    from PIL import Image

    video = inline_videos[0]
    idx = frame_indices(16, 4)
    assert idx == [0, 5, 10, 15]
    imgs = [Image.fromarray(to_uint8(video[:, idx]).permute(1, 2, 3, 0)[f].numpy()) for f in range(4)]
    inp = scorer.processor(text=[prompts[0]], images=imgs, return_tensors="pt", padding=True)
    with torch.no_grad():  # CLIP's own forward: logits_per_image = logit_scale x cos(image, text), then / 26
        manual = float(scorer.model(**inp).logits_per_image.mean()) / 26.0
    assert stored[0] == pytest.approx(manual, abs=1e-5)

    # Without its frame count the actor scores every frame: a different number.
    all_frames = build_scorer(ScorerConfig(name="pickscore", model_path=str(clip_dir), device="cpu"))
    assert all_frames.score_batch(inline_videos[:1], prompts[:1])[0] != pytest.approx(stored[0], abs=1e-6)


def test_mean_intensity_and_custom_scorers(store, producer):
    actor = StoredOutputRewardActor(build_scorer(ScorerConfig(name="mean-intensity", num_frames=2)),
                                    RegisteredTensorReader(store))
    ref = producer.put("bright", seed=40, shape=(3, 6, 8, 8))
    video = make_tensor(40, [3, 6, 8, 8], "float32")
    expected = float(to_uint8(video[:, [0, 5]]).float().mean() / 255)
    assert actor.score_batch([ref], ["x"]) == [pytest.approx(expected)]
    custom = build_scorer(ScorerConfig(**{"class": "tests.worker.custom_scorer:PromptLengthScorer"}))
    assert StoredOutputRewardActor(custom, RegisteredTensorReader(store)).score_batch([ref], ["abcd"]) == [7.0]
    with pytest.raises(ValueError, match="unknown scorer 'pikscore'"):
        scorer_class("pikscore")
    with pytest.raises(ValueError, match="no class with a score_batch"):
        scorer_class("tests.worker.custom_scorer:Missing")


def test_a_scorer_that_returns_the_wrong_count_is_an_error(store):
    class Broken:
        def score_batch(self, outputs, prompts):
            return [1.0]

    actor = StoredOutputRewardActor(Broken(), None)
    with pytest.raises(ValueError, match="returned 1 scores for 2 outputs"):
        actor.score_batch([torch.zeros(1), torch.zeros(1)], ["a", "b"])
    assert actor.in_flight == 0
