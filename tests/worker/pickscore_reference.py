"""PickScore written straight from the training framework's conventions, one frame at a time, to check the
worker's scorer against. It shares no code with rewardpool_worker (no frame picking, no quantisation, no
batching of its own): only the CLIP model weights are shared; the processor is loaded the framework's way."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image


def indices(n: int, k: int | None) -> list[int]:
    """The framework's sample_frame_indices: the step first, then round(i * step)."""
    from tests.worker.miles_reference import sample_frame_indices

    return sample_frame_indices(n, k)


def processor(path) -> object:
    """The processor as the framework loads it: `CLIPProcessor.from_pretrained(processor_path)`, the library's
    default image backend (torchvision's when installed)."""
    from transformers import CLIPProcessor

    return CLIPProcessor.from_pretrained(str(path))


def quantise(frames: np.ndarray, rounding: bool = False) -> np.ndarray:
    """float; x255 when the max is <= 1 + 1e-3; clamp to [0, 255]; truncate (or round, to show the difference)."""
    a = frames.astype(np.float32)
    if a.size and a.max() <= 1 + 1e-3:
        a = a * np.float32(255)
    a = np.clip(a, 0, 255)
    return (np.round(a) if rounding else a).astype(np.uint8)


def frames_of(output: torch.Tensor, k: int | None, rounding: bool = False) -> list[Image.Image]:
    a = output.numpy()
    if a.ndim == 3:  # an image (C, H, W) is one frame
        a = a[:, None]
    picked = quantise(a[:, indices(a.shape[1], k)], rounding)  # pick, then quantise the picked frames
    return [Image.fromarray(np.ascontiguousarray(picked[:, f].transpose(1, 2, 0))) for f in range(picked.shape[1])]


@torch.no_grad()
def score(model, processor, output: torch.Tensor, prompt: str, k: int | None, divisor: float = 26.0,
          rounding: bool = False) -> float:
    text = processor(text=[prompt], padding=True, truncation=True, max_length=77, return_tensors="pt")
    t = model.get_text_features(input_ids=text["input_ids"], attention_mask=text["attention_mask"])
    t = (t if isinstance(t, torch.Tensor) else t.pooler_output)[0].double()
    t = t / max(float(t.norm()), 1e-12)
    per_frame = []
    for img in frames_of(output, k, rounding):
        pix = processor(images=[img], return_tensors="pt")["pixel_values"]
        i = model.get_image_features(pixel_values=pix)
        i = (i if isinstance(i, torch.Tensor) else i.pooler_output)[0].double()
        i = i / max(float(i.norm()), 1e-12)
        per_frame.append(float(model.logit_scale.double().exp()) * float(t @ i) / divisor)
    return sum(per_frame) / len(per_frame)
