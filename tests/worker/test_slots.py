"""The stored-output reward actor and the scorers: stored refs read through the registered reader score
exactly like the same tensors passed inline; inline tensors pass through untouched."""
from __future__ import annotations

import time

import pytest
import torch

from rewardpool_worker.runtime.slots import StoredOutputRewardActor
from rewardpool_worker.contract import ScorerConfig
from rewardpool_worker.frames import frame_indices, to_uint8
from rewardpool_worker.runtime.reader import RegisteredTensorReader
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


# ---- bounded memory: batch size, read slots, zero-copy views ------------------------------------------------
def test_a_batch_over_batch_size_is_refused_before_reading(store, producer):
    from rewardpool_worker.errors import BatchTooLarge

    reader = RegisteredTensorReader(store)
    actor = StoredOutputRewardActor(Recorder(), [reader], batch_size=2, max_batch_bytes=1 << 20)
    refs = [producer.put(f"big-batch-{i}", seed=900 + i, shape=(3, 2, 4, 4)) for i in range(3)]
    with pytest.raises(BatchTooLarge, match=r"batch of 3 outputs exceeds this pool's scorer.batchSize 2.*split it"):
        actor.score_batch(refs, ["p"] * 3)
    huge = producer.put("too-many-bytes", seed=903, shape=(300_000,))  # 1.2 MB > the 1 MiB a slot holds
    with pytest.raises(BatchTooLarge, match="larger than spec.sizing says"):
        actor.score_batch([huge], ["p"])
    assert reader.stats.reads == 0 and actor.refused == 2 and actor.in_flight == 0
    assert actor.score_batch([], []) == [] and actor.scorer.seen == []  # an empty batch reaches no scorer
    assert actor.score_batch(refs[:2], ["p", "q"]) == [0.0, 0.0]


def test_queued_batches_wait_before_reading_and_the_scorer_sees_views(store, producer):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.worker.custom_scorer import GateScorer

    gate = GateScorer()
    readers = [RegisteredTensorReader(store), RegisteredTensorReader(store)]
    actor = StoredOutputRewardActor(gate, readers, batch_size=2)
    refs = [producer.put(f"queue-{i}", seed=910 + i, shape=(3, 2, 16, 16)) for i in range(4)]
    expected = [float(make_tensor(910 + i, [3, 2, 16, 16], "float32").mean()) for i in range(4)]
    batches = [[refs[i % 4], refs[(i + 1) % 4]] for i in range(6)]
    pool = ThreadPoolExecutor(6)
    try:
        futures = [pool.submit(actor.score_batch, b, ["p", "p"]) for b in batches]
        assert gate.entered.wait(60)
        deadline = time.monotonic() + 60
        while actor.in_flight < 6 or sum(r.stats.reads for r in readers) < 4:  # the backlog has formed
            assert time.monotonic() < deadline, (actor.in_flight, actor.holding)
            threading.Event().wait(0.05)
        # Six batches accepted, one in the model, one read ahead, four waiting without having read anything.
        assert actor.in_flight == 6 and actor.holding == 2
        assert sum(r.stats.reads for r in readers) == 4
    finally:
        gate.gate.set()
        pool.shutdown(wait=False)
    results = [f.result(60) for f in futures]
    assert results == [[pytest.approx(expected[i % 4]), pytest.approx(expected[(i + 1) % 4])] for i in range(6)]
    assert actor.peak_holding == 2 and actor.holding == 0 and actor.in_flight == 0
    # What the scorer got were views of a slot's registered buffer (no copy), and the buffer is free again.
    spans = [(r._buf.data_ptr(), r._buf.data_ptr() + r._buf.numel()) for r in readers]
    for batch in gate.seen:
        for ptr, n in batch:
            assert any(lo <= ptr and ptr + n <= hi for lo, hi in spans)
    assert not any(r._lock.locked() for r in readers)


def test_a_scorer_that_keeps_outputs_can_ask_for_copies(store, producer):
    class Keeper(Recorder):
        copy_outputs = True

    keeper = Keeper()
    reader = RegisteredTensorReader(store)
    ref = producer.put("kept", seed=920, shape=(3, 2, 8, 8))
    StoredOutputRewardActor(keeper, [reader]).score_batch([ref], ["p"])
    StoredOutputRewardActor(keeper, [reader]).score_batch([producer.put("next", seed=921, shape=(3, 2, 8, 8))], ["p"])
    lo, hi = reader._buf.data_ptr(), reader._buf.data_ptr() + reader._buf.numel()
    kept = keeper.seen[0][0]
    assert not lo <= kept.data_ptr() < hi and torch.equal(kept, make_tensor(920, [3, 2, 8, 8], "float32"))


# ---- several scorers from one read; custom scorer keywords -------------------------------------------------
def test_several_scorers_score_one_read(store, producer):
    from rewardpool_worker.contract import StoreConfig, WorkerConfig
    from rewardpool_worker.scorers import build_scorers

    cfg = WorkerConfig(pool="mix", namespace="t", store=StoreConfig(master="x:1", segment_bytes=0,
                                                                     local_buffer_bytes=0),
                       scorer=ScorerConfig(batch_size=4), read_buffer_bytes=0, scorers=[
                           ScorerConfig(name="mean-intensity", num_frames=2, weight=0.5),
                           ScorerConfig(**{"class": "tests.worker.custom_scorer:ArgsScorer"}, weight=2.0,
                                        args={"scale": 3.0}, model_path="/models/x", num_frames=4)])
    mixture = build_scorers(cfg)
    args_scorer = mixture.components[1][2]
    assert (args_scorer.scale, args_scorer.model_path, args_scorer.device, args_scorer.num_frames) == (
        3.0, "/models/x", "cpu", 4)  # device auto resolved: no GPU here
    reader = RegisteredTensorReader(store)
    refs = [producer.put(f"mix-{i}", seed=930 + i, shape=(3, 6, 8, 8)) for i in range(3)]
    got = StoredOutputRewardActor(mixture, [reader], batch_size=4).score_batch(refs, ["a", "b", "c"])
    assert reader.stats.reads == 3  # each output read once for both scorers
    for i, r in enumerate(got):
        video = make_tensor(930 + i, [3, 6, 8, 8], "float32")
        mean_intensity = float(to_uint8(video[:, [0, 5]]).float().mean() / 255)
        args_score = 3.0 * float(video.mean())
        assert set(r) == {"mean-intensity", "ArgsScorer", "weighted"}
        assert r["mean-intensity"] == pytest.approx(mean_intensity) and r["ArgsScorer"] == pytest.approx(args_score)
        assert r["weighted"] == pytest.approx(0.5 * mean_intensity + 2.0 * args_score)


def test_custom_scorer_arguments_are_checked():
    ok = build_scorer(ScorerConfig(**{"class": "tests.worker.custom_scorer:PromptLengthScorer"}))
    assert ok.score_batch([torch.zeros(2)], ["abc"]) == [5.0]  # takes no keywords: gets none
    with pytest.raises(TypeError, match=r"takes no argument\(s\) \['scal'\]"):
        build_scorer(ScorerConfig(**{"class": "tests.worker.custom_scorer:ArgsScorer"}, args={"scal": 1}))
    with pytest.raises(ValueError, match=r"args \['device'\] are set by the pool"):
        build_scorer(ScorerConfig(**{"class": "tests.worker.custom_scorer:ArgsScorer"},
                                  args={"scale": 1, "device": "cuda"}))
    with pytest.raises(RuntimeError, match="sees no GPU"):
        build_scorer(ScorerConfig(**{"class": "tests.worker.custom_scorer:ArgsScorer"}, args={"scale": 1},
                                  device="cuda"))
