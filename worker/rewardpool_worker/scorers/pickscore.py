"""PickScore: a CLIP model (transformers) scoring the picked frames of an output against its prompt.
The score of a video is the mean over its frames of logit_scale x cosine(image, text)."""
from __future__ import annotations

import torch

from ..frames import pick_frames


class PickScoreScorer:
    def __init__(self, model_path: str | None, num_frames: int | None = None, device: str = "cpu"):
        from transformers import CLIPModel, CLIPProcessor

        if not model_path:
            raise ValueError("pickscore needs scorer.modelPath: a local directory with the CLIP model")
        self.processor = CLIPProcessor.from_pretrained(model_path, local_files_only=True)
        self.model = CLIPModel.from_pretrained(model_path, local_files_only=True).eval().to(device)
        self.num_frames, self.device = num_frames, device

    @torch.no_grad()
    def score_batch(self, outputs: list[torch.Tensor], prompts: list[str]) -> list[float]:
        scores = []
        for output, prompt in zip(outputs, prompts):
            frames = pick_frames(output, self.num_frames)  # (F, H, W, C) uint8
            inputs = self.processor(text=[prompt], images=list(frames.numpy()), return_tensors="pt",
                                    padding=True).to(self.device)
            img = _features(self.model.get_image_features(pixel_values=inputs["pixel_values"]))
            txt = _features(self.model.get_text_features(input_ids=inputs["input_ids"],
                                                         attention_mask=inputs["attention_mask"]))
            img = img / img.norm(dim=-1, keepdim=True)
            txt = txt / txt.norm(dim=-1, keepdim=True)
            per_frame = self.model.logit_scale.exp() * (img @ txt.T).squeeze(-1)
            scores.append(float(per_frame.mean()))
        return scores


def _features(out) -> torch.Tensor:
    """Projected embeddings: a tensor in transformers 4, `pooler_output` of a model output in 5."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output
