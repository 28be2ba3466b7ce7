"""HPS v2 (Human Preference Score) by the training framework's conventions, so a run that scores with miles'
`--rm-type hps` logs the rewards it logged before:

- model: open_clip `create_model(architecture, pretrained=None, precision="amp", jit=False, output_dict=True)`
  (ViT-H-14 for HPS; a directory may carry `<architecture>.json`, an open_clip model config, for another one),
  its state dict loaded on the CPU with `weights_only=True` from `model_path`: the checkpoint file itself, or a
  directory holding HPS's file for `version` (v2.1: `HPS_v2.1_compressed.pt`, v2.0: `HPS_v2_compressed.pt`);
- images only: an output with more than one frame is refused for that sample;
- the frame rounded to uint8, then HPS's own preprocessing: to [0, 1]; resized on the tensor (bicubic) so its
  longest side is the model's input size; zero-padded centred (`pad // 2` left and top) to a square;
  normalised with OpenAI CLIP's mean and std;
- text: open_clip's tokenizer of the architecture (77 tokens);
- score: `diag(image_features @ text_features.T)` of the normalised features, no logit scale; the batch's pairs
  in one forward, under fp16 autocast on CUDA and in float32 on the CPU."""
from __future__ import annotations

from pathlib import Path

import torch

from ..frames import single_frame, to_uint8
from .device import resolve_device

CHECKPOINTS = {"v2.1": "HPS_v2.1_compressed.pt", "v2.0": "HPS_v2_compressed.pt"}
DEFAULT_VERSION = "v2.1"  # miles' --hps-version default
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


class HpsRefused(ValueError):
    """A sample HPS cannot score (a video, an output that is not RGB)."""


def checkpoint_file(model_path: str, version: str) -> Path:
    """The state dict's file: `model_path` itself, or HPS's file for `version` in that directory."""
    if version not in CHECKPOINTS:
        raise ValueError(f"hps: version must be one of {sorted(CHECKPOINTS)}, not {version!r}")
    path = Path(model_path)
    if path.is_dir():
        path = path / CHECKPOINTS[version]
    if not path.is_file():
        raise ValueError(f"hps: no checkpoint at {path} (scorer.modelPath: HPS's .pt file, or a directory with "
                         f"{CHECKPOINTS[version]} for version {version})")
    return path


def hps_pixels(frame_chw: torch.Tensor, size: int) -> torch.Tensor:
    """One uint8 (3, H, W) frame as HPS's model input (3, size, size)."""
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode

    x = frame_chw.float().div(255)  # what ToTensor makes of the PIL image
    h, w = x.shape[-2:]
    scale = size / float(max(h, w))
    new_h, new_w = round(h * scale), round(w * scale)
    x = F.resize(x, [new_h, new_w], InterpolationMode.BICUBIC)
    pad_h, pad_w = size - new_h, size - new_w
    x = F.pad(x, [pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2], fill=0)
    return F.normalize(x, OPENAI_MEAN, OPENAI_STD)


class HpsScorer:
    picks_frames = False  # an image: its one frame (a video is refused, not cut)
    quantise = "round"  # the framework rounds to uint8 before HPS's preprocessing
    score_range = (0.0, 0.5)  # cosine similarities; trained HPS v2.1 gives about 0.25-0.35

    def __init__(self, model_path: str | None, device: str = "auto", version: str = DEFAULT_VERSION,
                 architecture: str = "ViT-H-14"):
        import open_clip

        if not model_path:
            raise ValueError("hps needs scorer.modelPath: HPS's checkpoint file or a directory holding it")
        checkpoint = checkpoint_file(model_path, version)
        config = checkpoint.parent / f"{architecture}.json"
        if config.is_file():  # an architecture that open_clip does not ship (the tests' and the demo's small one)
            open_clip.add_model_config(config)
        self.version, self.architecture = version, architecture
        self.device = resolve_device(device)
        model = open_clip.create_model(architecture, pretrained=None, precision="amp", jit=False, output_dict=True)
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
        self.model = model.to(self.device).eval()
        self.tokenizer = open_clip.get_tokenizer(architecture)
        size = self.model.visual.image_size
        self.image_size = int(max(size)) if isinstance(size, (tuple, list)) else int(size)

    def frame(self, output) -> torch.Tensor:
        """The output's one frame as uint8 (3, H, W), rounded; HpsRefused for a video or a non-RGB output."""
        return to_uint8(single_frame(output, "hps", HpsRefused, rgb=True), self.quantise)

    @torch.no_grad()
    def score_batch(self, outputs, prompts) -> list:
        results: list = [None] * len(outputs)
        pixels, kept = [], []
        for i, output in enumerate(outputs):
            try:
                pixels.append(hps_pixels(self.frame(output), self.image_size))
                kept.append(i)
            except HpsRefused as e:
                results[i] = e
        if kept:
            images = torch.stack(pixels).to(self.device)
            text = self.tokenizer([prompts[i] for i in kept]).to(self.device)
            if self.device.startswith("cuda"):
                with torch.amp.autocast("cuda"):
                    out = self.model(images, text)
                    scores = torch.diagonal(out["image_features"] @ out["text_features"].T)
            else:
                out = self.model(images, text)
                scores = torch.diagonal(out["image_features"] @ out["text_features"].T)
            for i, s in zip(kept, scores.float().cpu().tolist()):
                results[i] = s
        return results

    def warmup(self) -> None:
        self.score_batch([torch.zeros(3, self.image_size, self.image_size, dtype=torch.uint8)], ["warm-up"])
