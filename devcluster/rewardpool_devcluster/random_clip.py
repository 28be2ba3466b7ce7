"""CLIP models built locally from a config, with random weights (nothing is downloaded): a byte-level
vocabulary, the PIL image processor, real transformers code paths. `tiny` is small enough for CPU tests;
`small` (the demo's) takes CLIP's 224 px input at a size two cores score quickly; `clip-h14` has the shapes
of PickScore's CLIP-H/14 (ViT-H/14 at 224 px, 1024-wide text tower), so timings and memory are those of the
real model, the scores are not."""
from __future__ import annotations

import json
from pathlib import Path

SIZES = {
    "tiny": dict(
        text=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2),
        vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                    image_size=32, patch_size=8),
        projection_dim=16, image_px=32),
    # the demo's default: CLIP's real 224 px input through the real processor, a forward that fits 2 cores
    "small": dict(
        text=dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4),
        vision=dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                    image_size=224, patch_size=32),
        projection_dim=256, image_px=224),
    "clip-h14": dict(
        text=dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16),
        vision=dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16,
                    image_size=224, patch_size=14),
        projection_dim=1024, image_px=224),
}


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def build(path: Path, size: str = "tiny", seed: int = 0, logit_scale: float | None = None) -> Path:
    """Write a CLIP model directory (config, random weights, tokenizer, processor) to `path`.
    `logit_scale` sets the model's (log) temperature; a trained CLIP has log(100)."""
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizer
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    shape = SIZES[size]
    path.mkdir(parents=True, exist_ok=True)
    chars = list(_bytes_to_unicode().values())
    vocab = {c: i for i, c in enumerate(chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"])}
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"))
    eos, bos = vocab["<|endoftext|>"], vocab["<|startoftext|>"]
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), max_position_embeddings=77, eos_token_id=eos, bos_token_id=bos,
                         pad_token_id=eos, **shape["text"]),
        vision_config=dict(shape["vision"]),
        projection_dim=shape["projection_dim"])
    torch.manual_seed(seed)
    model = CLIPModel(cfg)
    if logit_scale is not None:
        with torch.no_grad():
            model.logit_scale.fill_(logit_scale)
    model.save_pretrained(path)
    px = shape["image_px"]
    ip = CLIPImageProcessorPil(size={"shortest_edge": px}, crop_size={"height": px, "width": px})
    CLIPProcessor(image_processor=ip, tokenizer=tok).save_pretrained(path)
    return path
