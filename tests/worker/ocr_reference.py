"""miles' OCR reward, restated from its code's behaviour, one image at a time, to check the worker's scorer
against. It shares no code with rewardpool_worker: its own PaddleOCR, constructed as miles constructs it, on the
same model files; its own conversion and formula."""
from __future__ import annotations

import numpy as np
import torch


def load(model_dir):
    from paddleocr import PaddleOCR

    return PaddleOCR(use_angle_cls=False, lang="en", use_gpu=False, show_log=False,
                     det_model_dir=str(model_dir / "det"), rec_model_dir=str(model_dir / "rec"),
                     cls_model_dir=str(model_dir / "cls"))


def rgb_image(output: torch.Tensor) -> np.ndarray:
    """Exactly one frame (else ValueError); float, x255 when the max is <= 1 + 1e-3, rounded; clamped; uint8;
    RGB (H, W, C)."""
    a = output.numpy()
    if a.ndim == 4:
        if a.shape[1] != 1:
            raise ValueError(f"OCR takes one frame, got {a.shape[1]}")
        a = a[:, 0]
    a = a.astype(np.float32)
    if a.max() <= 1 + 1e-3:
        a = np.round(a * np.float32(255))
    return np.ascontiguousarray(np.clip(a, 0, 255).astype(np.uint8).transpose(1, 2, 0))


def recognised(ocr, image: np.ndarray) -> str:
    result = ocr.ocr(image, cls=False)
    lines = result[0] if result else None
    return "".join(t if c > 0 else "" for _, (t, c) in lines).replace(" ", "").lower() if lines else ""


def score(ocr, output: torch.Tensor, prompt: str) -> float:
    import Levenshtein

    image = rgb_image(output)
    target = prompt.split('"')[1].replace(" ", "").lower()  # IndexError without quotes, as in miles
    try:
        text = recognised(ocr, image)
        dist = 0 if target in text else Levenshtein.distance(text, target)
        dist = min(dist, len(target))
    except Exception:
        dist = len(target)
    return 1 - dist / len(target)
