"""HPS v2 written straight from the training framework's reward (its HPS actor and HPSv2's own preprocessing),
one sample at a time, to check the worker's scorer against. It shares no code with rewardpool_worker: the model
is built and loaded the framework's way from the same checkpoint file; the preprocessing is restated from the
framework's description of HPSv2's (ToTensor; the longest side resized to the input size, bicubic, on the tensor;
zero-padded centred; Normalize with OpenAI CLIP's mean and std)."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def load(checkpoint, architecture: str = "ViT-H-14"):
    """create_model(..., pretrained=None, precision="amp", jit=False, output_dict=True); the state dict from the
    checkpoint file on the CPU with weights_only=True."""
    import open_clip

    model = open_clip.create_model(architecture, pretrained=None, precision="amp", jit=False, output_dict=True)
    ckpt = torch.load(str(checkpoint), map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["state_dict"])
    return model.eval(), open_clip.get_tokenizer(architecture)


def to_pil(output: torch.Tensor) -> Image.Image:
    """Exactly one frame (else ValueError, as the framework's actor raises); float, x255 when the max is
    <= 1 + 1e-3, then rounded; clamped to [0, 255]; uint8; (H, W, C)."""
    a = output.numpy()
    if a.ndim == 4:
        if a.shape[1] != 1:
            raise ValueError(f"HPS takes one frame, got {a.shape[1]}")
        a = a[:, 0]
    a = a.astype(np.float32)
    if a.max() <= 1 + 1e-3:
        a = np.round(a * np.float32(255))
    return Image.fromarray(np.ascontiguousarray(np.clip(a, 0, 255).astype(np.uint8).transpose(1, 2, 0)))


def pixels(img: Image.Image, size: int) -> torch.Tensor:
    import torchvision.transforms.functional as TF
    from torchvision.transforms import InterpolationMode, Normalize, ToTensor

    t = ToTensor()(img)
    h, w = t.shape[1], t.shape[2]
    scale = size / max(h, w)
    nh, nw = round(h * scale), round(w * scale)
    t = TF.resize(t, [nh, nw], interpolation=InterpolationMode.BICUBIC)
    top, left = (size - nh) // 2, (size - nw) // 2
    padded = torch.zeros(3, size, size)
    padded[:, top:top + nh, left:left + nw] = t
    return Normalize(OPENAI_MEAN, OPENAI_STD)(padded)


@torch.no_grad()
def score(model, tokenizer, output: torch.Tensor, prompt: str) -> float:
    size = model.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else size
    image = pixels(to_pil(output), size).unsqueeze(0)
    out = model(image, tokenizer([prompt]))
    return float(torch.diagonal(out["image_features"] @ out["text_features"].T)[0])
