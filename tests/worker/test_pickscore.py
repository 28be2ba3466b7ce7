"""PickScore against a reference written from the framework's conventions (tests/worker/pickscore_reference.py),
on a tiny CLIP: every edge case of frame picking, quantisation, prompts and batching, through the inline path
and through the store. Tolerance: 1e-4 absolute + 1e-3 relative."""
from __future__ import annotations

import pytest
import torch

from rewardpool_worker.runtime.slots import StoredOutputRewardActor
from rewardpool_worker.contract import ScorerConfig, WorkerConfig
from rewardpool_worker.frames import union_indices
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.records import put_output
from rewardpool_worker.scorers import build_scorer, build_scorers
from tests.worker import pickscore_reference as ref
from tests.worker import tiny_clip

LONG_PROMPT = "a slow pan across a crowded harbour at dusk, boats and gulls and lanterns, " * 12  # > 77 tokens


def close(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-4 + 1e-3 * abs(want)


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return tiny_clip.build(tmp_path_factory.mktemp("tiny-clip-parity"))


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def held_out_cases() -> list[tuple[str, torch.Tensor, str]]:
    """(what, output, prompt): seeds used nowhere else."""
    g = _gen(9001)
    between = (torch.randint(0, 255, (3, 7, 40, 40), generator=g).float() + 0.6) / 255  # x255 = n + 0.6
    return [
        ("even frame count", torch.rand(3, 16, 40, 40, generator=g), "a red kite over the sea"),
        ("odd frame count", torch.rand(3, 9, 48, 36, generator=g), "two cats"),
        ("floats in [0, 255]", torch.rand(3, 10, 40, 40, generator=g) * 255, "a market street"),
        ("rounds and truncates differently", between, "neon signs in the rain"),
        ("prompt over 77 tokens", torch.rand(3, 6, 40, 40, generator=g), LONG_PROMPT),
        ("fewer frames than asked", torch.rand(3, 3, 40, 40, generator=g), "a bowl of fruit"),
        ("single image", torch.rand(3, 40, 40, generator=g), "a mountain lake"),
        ("uint8 video", torch.randint(0, 256, (3, 5, 40, 40), generator=g, dtype=torch.uint8), "a dog"),
        ("same prompt as another", torch.rand(3, 4, 40, 40, generator=g), "two cats"),
    ]


@pytest.mark.parametrize("num_frames,frames_per_forward", [(1, 4), (4, 3), (8, 32), (None, 5)])
def test_pickscore_matches_the_reference_on_held_out_cases(clip_dir, num_frames, frames_per_forward):
    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=num_frames, model_path=str(clip_dir),
                                       device="cpu", frames_per_forward=frames_per_forward))
    cases = held_out_cases()
    got = scorer.score_batch([c[1] for c in cases], [c[2] for c in cases])  # one batch: forwards span outputs
    want = [ref.score(scorer.model, ref.processor(clip_dir), out, prompt, num_frames) for _, out, prompt in cases]
    bad = [(what, g, w) for (what, _, _), g, w in zip(cases, got, want) if not close(g, w)]
    assert not bad, bad


def test_the_edge_cases_are_sharp(clip_dir):
    """Each convention the old scorer got wrong changes the score by more than the tolerance on these cases, so
    the parity test above fails on any of them."""
    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(clip_dir), device="cpu"))
    m, p = scorer.model, ref.processor(clip_dir)
    cases = dict((what, (out, prompt)) for what, out, prompt in held_out_cases())
    out, prompt = cases["rounds and truncates differently"]
    assert not close(ref.score(m, p, out, prompt, 4, rounding=True), ref.score(m, p, out, prompt, 4))
    out, prompt = cases["even frame count"]  # one frame of 16: n // 2 = 8, not (n - 1) // 2 = 7
    assert not close(ref.score(m, p, out[:, 7], prompt, None), ref.score(m, p, out, prompt, 1))
    assert not close(ref.score(m, p, out, prompt, 4, divisor=1.0), ref.score(m, p, out, prompt, 4))
    out, prompt = cases["floats in [0, 255]"]  # taken as [0, 255], not clamped to 1
    assert not close(ref.score(m, p, out.clamp(0, 1), prompt, 4), ref.score(m, p, out, prompt, 4))


def test_frames_per_forward_changes_no_score(clip_dir):
    cases = held_out_cases()
    outs, prompts = [c[1] for c in cases], [c[2] for c in cases]
    scores = [build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(clip_dir), device="cpu",
                                        frames_per_forward=n)).score_batch(outs, prompts) for n in (1, 7, 64)]
    for a, b in zip(scores[0], scores[1] + scores[2]):
        assert close(a, b)


def test_stored_outputs_score_as_the_inline_ones(store, clip_dir):
    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(clip_dir), device="cpu",
                                       frames_per_forward=5))
    cases = held_out_cases()
    refs = [put_output(store, f"parity-{i}", out) for i, (_, out, _) in enumerate(cases)]
    prompts = [c[2] for c in cases]
    readers = [RegisteredTensorReader(store), RegisteredTensorReader(store)]
    stored = StoredOutputRewardActor(scorer, readers, batch_size=len(cases)).score_batch(refs, prompts)
    assert stored == scorer.score_batch([c[1] for c in cases], prompts)
    assert all(close(s, ref.score(scorer.model, ref.processor(clip_dir), out, pr, 4))
               for s, (_, out, pr) in zip(stored, cases))


def test_ranged_reads_score_bit_identically_to_whole_reads(store, clip_dir):
    # LTX-2.3-shaped videos (121 frames, small H and W), PickScore alone at numFrames 3 and in a mixture with a
    # scorer picking 8: the ranged path reads the union of their frames only, and every score is the whole
    # read's, to the bit.
    g = _gen(4242)
    videos = [torch.rand(3, 121, 36, 44, generator=g),
              torch.randint(0, 256, (3, 121, 36, 44), generator=g, dtype=torch.uint8),
              torch.rand(3, 40, 40, generator=g)]
    refs = [put_output(store, f"ranged-ps-{i}", v) for i, v in enumerate(videos)]
    prompts = ["a lighthouse", "a fox in snow", "a still life"]
    pick = ScorerConfig(name="pickscore", num_frames=3, model_path=str(clip_dir), device="cpu")
    mix = WorkerConfig.model_validate({
        "pool": "p", "namespace": "n", "store": {"master": "m:1", "segment_bytes": 0, "local_buffer_bytes": 0},
        "scorer": {"batch_size": 8}, "read_buffer_bytes": 0,
        "scorers": [{"name": "pickscore", "num_frames": 3, "model_path": str(clip_dir), "device": "cpu"},
                    {"name": "mean-intensity", "num_frames": 8}]})
    for scorer, frames in ((build_scorer(pick), 3), (build_scorers(mix), len(union_indices(121, [3, 8])))):
        got = {}
        for ranged in (True, False):
            readers = [RegisteredTensorReader(store), RegisteredTensorReader(store)]
            actor = StoredOutputRewardActor(scorer, readers, batch_size=8, ranged_reads=ranged)
            got[ranged] = actor.score_batch(refs, prompts)
            got[ranged, "bytes"] = sum(r.stats.bytes_read for r in readers)
        assert got[True] == got[False]
        assert got[True, "bytes"] == sum(r.nbytes for r in refs[:2]) * frames // 121 + refs[2].nbytes
        assert got[False, "bytes"] == sum(r.nbytes for r in refs)
    # the same video scored alone: another batch shape, so the last bits of the float32 forward may differ
    # (the ranged and whole reads above go through the same batches, and agree to the bit)
    assert got[True][0]["pickscore"] == pytest.approx(build_scorer(pick).score_batch(videos[:1], prompts[:1])[0],
                                                      rel=1e-5)


def test_the_image_backend_is_the_frameworks(clip_dir):
    """The framework's environment has torchvision, so the CLIP processor's default backend there is
    torchvision's; the worker's environment has it too and loads the processor the same way."""
    import torchvision  # noqa: F401  (in the worker extra: the image carries it)
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=2, model_path=str(clip_dir), device="cpu"))
    framework = ref.processor(clip_dir).image_processor
    assert type(scorer.processor.image_processor) is type(framework)
    assert not isinstance(scorer.processor.image_processor, CLIPImageProcessorPil)
    assert scorer.image_backend == type(framework).__name__


def test_processor_and_model_from_two_paths(clip_dir, tmp_path):
    """The framework loads the LAION CLIP processor and the PickScore weights from two directories."""
    import shutil

    weights, proc = tmp_path / "pickscore", tmp_path / "laion-clip"
    shutil.copytree(clip_dir, weights)
    proc.mkdir()
    for f in list(weights.iterdir()):
        if f.name not in ("config.json", "model.safetensors"):
            shutil.move(str(f), proc / f.name)
    with pytest.raises(Exception):
        build_scorer(ScorerConfig(name="pickscore", model_path=str(weights), device="cpu"))
    two = build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(weights),
                                    processor_path=str(proc), device="cpu"))
    one = build_scorer(ScorerConfig(name="pickscore", num_frames=4, model_path=str(clip_dir), device="cpu"))
    out = torch.rand(3, 9, 40, 40, generator=_gen(9300))
    assert two.score_batch([out], ["a lighthouse"]) == one.score_batch([out], ["a lighthouse"])


@pytest.mark.parametrize("n, k", [(30, 15), (101, 25)])
def test_scores_at_the_frame_rule_ties(clip_dir, n, k):
    """Where dividing first and multiplying first pick different frames, the scorer scores the framework's."""
    scorer = build_scorer(ScorerConfig(name="pickscore", num_frames=k, model_path=str(clip_dir), device="cpu"))
    out = torch.rand(3, n, 32, 32, generator=_gen(9400 + n))
    got = scorer.score_batch([out], ["a tie"])[0]
    assert close(got, ref.score(scorer.model, ref.processor(clip_dir), out, "a tie", k))
