"""PickScore by the training framework's conventions, so a run that scores through a RewardPool logs the
rewards it logged before:

- frames: `frames.pick_frames` (the framework's indices, picked before the truncating uint8 conversion);
- images: the CLIP processor on PIL frames; text: `padding=True, truncation=True, max_length=77` (a long
  prompt is truncated, never an error);
- features L2-normalised (norm clamped at 1e-12); per frame `logit_scale.exp() * (text . image) / 26.0` in
  float32; an output's score is the mean over its frames;
- forwards of `frames_per_forward` frames taken across the whole batch: frames of several outputs share a
  forward, each scored against its own prompt. The grouping changes only float rounding, not the score."""
from __future__ import annotations

import time
from collections import Counter

import torch

from ..frames import pick_frames
from .device import model_dtype, resolve_device, to_device

# The framework divides PickScore's logit by 26 to bring it near [0, 1] (its logged reward scale).
SCORE_DIVISOR = 26.0
MAX_TEXT_TOKENS = 77  # CLIP's text context


class PickScoreScorer:
    picks_frames = True  # looks only at pick_frames(output, num_frames)
    quantise = "truncate"  # the framework's PickScore converts with .to(torch.uint8)
    # the score is the logit (logit scale 100 x a cosine similarity: released checkpoints give ~15-25) / 26
    score_range = (0.0, 30.0 / SCORE_DIVISOR)

    def __init__(self, model_path: str | None, num_frames: int | None = None, device: str = "auto",
                 dtype: str = "float32", frames_per_forward: int = 32, processor_path: str | None = None):
        from transformers import CLIPModel, CLIPProcessor

        if not model_path:
            raise ValueError("pickscore needs scorer.modelPath: a local directory with the CLIP model")
        if frames_per_forward < 1:
            raise ValueError("frames_per_forward must be at least 1")
        self.device = resolve_device(device)
        self.dtype = model_dtype(dtype, self.device)
        # The framework loads the processor (the LAION CLIP one) and the PickScore weights from two paths, with
        # the library's default image backend: torchvision's when it is installed (the worker image has it).
        self.processor = CLIPProcessor.from_pretrained(processor_path or model_path, local_files_only=True)
        self.image_backend = type(self.processor.image_processor).__name__
        model = CLIPModel.from_pretrained(model_path, local_files_only=True).eval()
        self.model = model.to(device=self.device, dtype=self.dtype)
        self.num_frames, self.frames_per_forward = num_frames, frames_per_forward
        # Seconds per stage since construction (pick + quantise, text, CLIP processor, model forward): what
        # `rewardpool-bench score` reports, and cheap enough to keep on.
        self.stage_seconds: Counter[str] = Counter()

    @torch.no_grad()
    def text_features(self, prompts: list[str]) -> torch.Tensor:
        tok = self.processor(text=prompts, padding=True, truncation=True, max_length=MAX_TEXT_TOKENS,
                             return_tensors="pt")
        out = self.model.get_text_features(input_ids=to_device(tok["input_ids"], self.device),
                                           attention_mask=to_device(tok["attention_mask"], self.device))
        return _normalise(_features(out))

    def preprocess(self, frames: list) -> torch.Tensor:
        """Frames as PIL images through the CLIP processor (its resize and crop, as in the framework)."""
        return self.processor(images=frames, return_tensors="pt")["pixel_values"]

    @torch.no_grad()
    def forward_images(self, pixels: torch.Tensor) -> torch.Tensor:
        out = self.model.get_image_features(pixel_values=to_device(pixels, self.device, self.dtype))
        return _normalise(_features(out))

    def image_features(self, frames: list) -> torch.Tensor:
        return self.forward_images(self.preprocess(frames))

    @torch.no_grad()
    def score_frames(self, outputs: list[torch.Tensor], prompts: list[str]) -> list[torch.Tensor]:
        """Per-frame scores (float32, on the host) of every output."""
        from PIL import Image

        clock = time.perf_counter
        t0 = clock()
        picked = [pick_frames(o, self.num_frames, self.quantise) for o in outputs]  # (F, H, W, C) uint8 each
        t1 = clock()
        self.stage_seconds["pick"] += t1 - t0
        owner = [j for j, f in enumerate(picked) for _ in range(f.shape[0])]
        frames = [fr for f in picked for fr in f]
        unique = sorted(set(prompts), key=prompts.index)
        text = self.text_features(unique)
        t2 = clock()
        self.stage_seconds["text"] += t2 - t1
        row = torch.tensor([unique.index(prompts[j]) for j in owner], device=self.device)
        scale = self.model.logit_scale.float().exp()
        chunks = []
        for start in range(0, len(frames), self.frames_per_forward):
            stop = start + self.frames_per_forward
            t3 = clock()
            pixels = self.preprocess([Image.fromarray(f.numpy()) for f in frames[start:stop]])
            t4 = clock()
            img = self.forward_images(pixels)
            # Kept on the device until the end: no sync per forward, so the host prepares the next chunk.
            chunks.append(scale * (img * text[row[start:stop]]).sum(-1) / SCORE_DIVISOR)
            self.stage_seconds["preprocess"] += t4 - t3
            self.stage_seconds["forward"] += clock() - t4
        t5 = clock()
        per_frame = torch.cat(chunks).cpu()
        self.stage_seconds["forward"] += clock() - t5  # on a GPU: the forwards still running when the host is done
        return list(per_frame.split([f.shape[0] for f in picked]))

    def score_batch(self, outputs: list[torch.Tensor], prompts: list[str]) -> list[float]:
        return [float(s.mean()) for s in self.score_frames(outputs, prompts)]

    def warmup(self) -> None:
        """One forward on a synthetic frame, so the first real batch pays no lazy initialisation."""
        self.score_batch([torch.zeros(3, 224, 224, dtype=torch.uint8)], ["warm-up"])


def _features(out) -> torch.Tensor:
    """Projected embeddings: a tensor in transformers 4, `pooler_output` of a model output in 5."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def _normalise(x: torch.Tensor) -> torch.Tensor:
    x = x.float()
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
