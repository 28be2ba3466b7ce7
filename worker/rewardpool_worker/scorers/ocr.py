"""OCR reward by the training framework's conventions (miles' `--rm-type ocr`, as flow_grpo scores it), so a run
that scores text rendering through a pool logs the rewards it logged before:

- PaddleOCR 2.x: `PaddleOCR(use_angle_cls=False, lang="en", use_gpu=False, show_log=False)` on the CPU, its
  detection, recognition and (unused, but loaded by 2.x) angle models from `model_path`'s `det/`, `rec/` and
  `cls/` directories (the inference format; nothing is downloaded);
- images only: an output with more than one frame is refused for that sample; the frame is rounded to uint8 and
  passed as RGB (H, W, C), as the framework passes it (not BGR);
- recognised text: `ocr(img, cls=False)`, every line's text with confidence > 0 joined; spaces removed,
  lowercased; nothing recognised is "";
- target: `prompt.split('"')[1]` (the text after the first double quote, up to the next), spaces removed,
  lowercased; a prompt without a double quote or with an empty target is refused for that sample (the
  framework raises there);
- distance: 0 when the target is a substring of the recognised text, else their Levenshtein distance, capped at
  the target's length; an exception from the OCR counts as the full length;
- reward: `1 - distance / len(target)`, in [0, 1]."""
from __future__ import annotations

from pathlib import Path

import torch

from ..frames import single_frame, to_uint8

MODEL_DIRS = ("det", "rec", "cls")


class OcrRefused(ValueError):
    """A sample the OCR reward cannot score (a video, no quoted target in its prompt)."""


def ocr_target(prompt: str) -> str:
    """The text the image should show: between the prompt's first two double quotes, spaces removed, lowercased."""
    parts = prompt.split('"')
    if len(parts) < 2:
        raise OcrRefused(f"ocr needs the text to render in double quotes in the prompt: {prompt[:200]!r}")
    target = parts[1].replace(" ", "").lower()
    if not target:
        raise OcrRefused(f"ocr: the quoted text of the prompt is empty: {prompt[:200]!r}")
    return target


def recognised_text(result) -> str:
    """PaddleOCR 2.x's result for one image (`[[box, (text, confidence)], ...]` per image, None for nothing found)
    as one string: the texts with confidence > 0 joined, spaces removed, lowercased."""
    lines = result[0] if result else None
    if not lines:
        return ""
    return "".join(text for _, (text, confidence) in lines if confidence > 0).replace(" ", "").lower()


def ocr_reward(recognised: str | None, target: str) -> float:
    """1 - distance / len(target); `recognised` None: the OCR raised (the full length)."""
    import Levenshtein

    if recognised is None:
        distance = len(target)
    elif target in recognised:
        distance = 0
    else:
        distance = min(Levenshtein.distance(recognised, target), len(target))
    return 1 - distance / len(target)


def model_dirs(model_path: str) -> dict[str, str]:
    """`det`, `rec` and `cls` under model_path, each an inference-format model (inference.pdmodel/.pdiparams)."""
    if not model_path:
        raise ValueError("ocr needs scorer.modelPath: a directory with PaddleOCR's det/, rec/ and cls/ models")
    root = Path(model_path)
    missing = [d for d in MODEL_DIRS if not (root / d / "inference.pdmodel").is_file()]
    if missing:
        raise ValueError(f"ocr: {root} lacks PaddleOCR inference models in {missing} (each dir holds "
                         "inference.pdmodel and inference.pdiparams; PaddleOCR would otherwise download them)")
    return {d: str(root / d) for d in MODEL_DIRS}


class OcrScorer:
    picks_frames = False  # an image: its one frame (a video is refused, not cut)
    quantise = "round"  # the framework rounds to uint8 before OCR
    score_range = (0.0, 1.0)

    def __init__(self, model_path: str | None, rec_char_dict_path: str | None = None):
        from paddleocr import PaddleOCR

        dirs = model_dirs(model_path or "")
        extra = {"rec_char_dict_path": rec_char_dict_path} if rec_char_dict_path else {}
        self.ocr = PaddleOCR(use_angle_cls=False, lang="en", use_gpu=False, show_log=False,
                             det_model_dir=dirs["det"], rec_model_dir=dirs["rec"], cls_model_dir=dirs["cls"], **extra)

    def image(self, output):
        """The output's one frame as an RGB (H, W, 3) uint8 array, rounded; OcrRefused for a video."""
        frame = single_frame(output, "ocr", OcrRefused, rgb=True)
        return to_uint8(frame, self.quantise).permute(1, 2, 0).contiguous().numpy()

    def recognise(self, image) -> str | None:
        try:
            return recognised_text(self.ocr.ocr(image, cls=False))
        except Exception:  # the framework counts any OCR failure as the full distance
            return None

    def score_one(self, output, prompt: str):
        try:
            image, target = self.image(output), ocr_target(prompt)
        except OcrRefused as e:
            return e
        return ocr_reward(self.recognise(image), target)

    def score_batch(self, outputs, prompts) -> list:
        return [self.score_one(o, p) for o, p in zip(outputs, prompts)]

    def warmup(self) -> None:
        self.recognise(torch.zeros(64, 256, 3, dtype=torch.uint8).numpy())
