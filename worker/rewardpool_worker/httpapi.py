"""The pool's HTTP scoring API, as callers and workers both see it: `POST /v1/score` (JSON) and flow-GRPO's reward
server protocol (`POST /`, a pickled dict), with the request and reply shapes, how items become what the scorers
take, and the safe unpickler. Pure: the worker's entrypoint serves it (runtime/http_score.py).

A request's items are stored outputs (`key`, `shape`, `dtype`, `nbytes`: the worker reads them through its registered
memory, as a Ray call's refs) or inline media (`image`: PNG or JPEG bytes, base64; `tensor`: a safetensors file
holding one tensor, base64). Images become float32 (3, H, W) in [0, 1], as trainers pass them to their rewards."""
from __future__ import annotations

import base64
import binascii
import io
import math
import pickle
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

SCORE_PATH = "/v1/score"
DESCRIBE_PATH = "/v1/describe"  # GET: what the pool scores with (components, numFrames, scorers, args, batch size)
FLOW_GRPO_PATH = "/"  # flow-GRPO's (and ddpo-pytorch's) reward servers answer POST on the root
# Why a worker refused a whole request for now (the error body's "reason"), so a client knows where to go next
REFUSED_FULL = "Overloaded"  # 429: its queue is full
REFUSED_LEAVING = "NotServing"  # 503: draining, shadowing, loading its model: another worker
REFUSED_STORE = "MasterUnreachable"  # 503: the store master does not answer: no worker can read now, wait
REFUSED_ENGINE = "EngineUnavailable"  # 503: its judge's engine does not answer (restarting): wait, or another worker
MAX_BODY_BYTES = 256 << 20  # a larger request gets 413 before its body is read
MAX_ITEMS = 1024
MAX_PROMPT_CHARS = 16384
DTYPES = {"uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2, "float32": 4,
          "float64": 8, "bool": 1}


class StoredItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=1024)
    shape: list[int] = Field(min_length=1, max_length=5)
    dtype: str
    nbytes: int = Field(gt=0)

    @model_validator(mode="after")
    def _consistent(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"shape {self.shape} has a dimension that is not positive")
        if math.prod(self.shape) * DTYPES[self.dtype] != self.nbytes:
            raise ValueError(f"nbytes {self.nbytes} is not shape {self.shape} x {DTYPES[self.dtype]} bytes of "
                             f"{self.dtype}")
        return self


class InlineItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    image: str | None = Field(None, description="PNG or JPEG bytes, base64")
    tensor: str | None = Field(None, description="a safetensors file holding one tensor, base64")

    @model_validator(mode="after")
    def _one(self):
        if (self.image is None) == (self.tensor is None):
            raise ValueError("an inline item has exactly one of image or tensor")
        return self


def _kind(item) -> str:
    """A stored item has a key; anything else is inline (so a bad item's error names its own fields)."""
    keys = item if isinstance(item, dict) else getattr(item, "__dict__", {})
    return "stored" if "key" in keys else "inline"


Item = Annotated[Union[Annotated[StoredItem, Tag("stored")], Annotated[InlineItem, Tag("inline")]],
                 Discriminator(_kind)]


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item] = Field(min_length=1, max_length=MAX_ITEMS)
    prompts: list[str] = Field(max_length=MAX_ITEMS)
    group: str | None = Field(None, max_length=256, description="a GRPO group or rollout: scored by one version")
    deadline_seconds: float | None = Field(None, gt=0, le=3600, description="dropped unscored past this")
    priority: Literal["train", "eval"] = Field("train", description="eval goes first within the caller's share")

    @model_validator(mode="after")
    def _paired(self):
        if len(self.prompts) != len(self.items):
            raise ValueError(f"{len(self.items)} items but {len(self.prompts)} prompts")
        if any(len(p) > MAX_PROMPT_CHARS for p in self.prompts):
            raise ValueError(f"a prompt is longer than {MAX_PROMPT_CHARS} characters")
        return self


class ItemError(BaseModel):
    index: int
    reason: str  # the error's type: ScorerError's kind, TransferFailed, ObjectNotFound, BadItem...
    message: str


class ScoreReply(BaseModel):
    # None where the item has an error; a mixture's dict has null for an optional component that refused it (JSON
    # has no NaN)
    scores: list[float | dict[str, float | None] | None]
    version: str | None  # the scorer version that gave every score
    errors: list[ItemError] = Field(default_factory=list)
    # item index -> {component: reason} of a mixture's optional components that refused it (their score NaN)
    component_errors: dict[int, dict[str, str]] = Field(default_factory=dict)
    queue_depth: int = 0  # batches the worker held when the request arrived (miles' reward_max_queue_depth)


class BadRequest(ValueError):
    """A request this API refuses (400): the message names the field."""


def parse_request(body: bytes) -> ScoreRequest:
    try:
        return ScoreRequest.model_validate_json(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"] if x not in ("stored", "inline")) or "body"
        raise BadRequest(f"{where}: {first['msg']}" + (f" ({e.error_count()} errors)" if e.error_count() > 1
                                                        else "")) from None


def _b64(value: str, field: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{field}: not base64") from None


def decode_image(data: bytes, field: str = "image"):
    """PNG or JPEG bytes as float32 (3, H, W) in [0, 1] (RGB). Bounded by Pillow's decompression-bomb check."""
    import numpy as np
    import torch
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format not in ("PNG", "JPEG"):
                raise BadRequest(f"{field}: {im.format} is not PNG or JPEG")
            rgb = np.asarray(im.convert("RGB"))
    except BadRequest:
        raise
    except Exception as e:  # noqa: BLE001 (Pillow raises many kinds for bad bytes)
        raise BadRequest(f"{field}: not a readable PNG or JPEG ({type(e).__name__})") from None
    return torch.from_numpy(rgb.copy()).permute(2, 0, 1).float() / 255


def decode_tensor(data: bytes, field: str = "tensor"):
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        tensors = load(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise BadRequest(f"{field}: not a safetensors file ({str(e)[:120]})") from None
    if len(tensors) != 1:
        raise BadRequest(f"{field}: a safetensors file holds {len(tensors)} tensors, not one")
    return next(iter(tensors.values()))


def to_outputs(request: ScoreRequest) -> list:
    """What the actor's score_batch takes: an OutputRef per stored item, a tensor per inline one."""
    from .records import OutputRef

    out = []
    for i, item in enumerate(request.items):
        if isinstance(item, StoredItem):
            out.append(OutputRef(item.key, item.nbytes, item.dtype, tuple(item.shape)))
        elif item.image is not None:
            out.append(decode_image(_b64(item.image, f"items.{i}.image"), f"items.{i}.image"))
        else:
            out.append(decode_tensor(_b64(item.tensor, f"items.{i}.tensor"), f"items.{i}.tensor"))
    return out


# ---- flow-GRPO's reward server protocol -----------------------------------------------------------------------------
class _PlainUnpickler(pickle.Unpickler):
    """Builds only what pickle's own opcodes build (dicts, lists, tuples, sets, str, bytes, numbers, None, bools):
    any class or function a payload names is refused, never looked up, so nothing in it runs."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the payload names {module}.{name}: only plain containers, bytes, str, "
                                     "numbers and None are accepted")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("the payload uses a persistent id: not accepted")


def safe_loads(data: bytes):
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise BadRequest(f"pickle: {e}") from None
    except Exception as e:  # noqa: BLE001 (truncated or malformed streams raise many kinds)
        raise BadRequest(f"pickle: not a readable pickle ({type(e).__name__})") from None


def flow_grpo_request(payload) -> tuple[list, list[str]]:
    """flow-GRPO's request (`{"images": [JPEG bytes...], "prompts": [...]?, "metadata"/"meta_datas": ...}`) as
    images and prompts (none sent: empty prompts)."""
    if not isinstance(payload, dict) or "images" not in payload:
        raise BadRequest("pickle: expected a dict with an 'images' list of JPEG or PNG bytes")
    images = payload["images"]
    if not isinstance(images, (list, tuple)) or not images or len(images) > MAX_ITEMS:
        raise BadRequest(f"images: expected a list of 1 to {MAX_ITEMS} JPEG or PNG bytes")
    prompts = payload.get("prompts")
    prompts = [""] * len(images) if prompts is None else prompts
    if not isinstance(prompts, (list, tuple)) or len(prompts) != len(images) \
            or not all(isinstance(p, str) for p in prompts):
        raise BadRequest(f"prompts: expected {len(images)} strings, one per image")
    outputs = []
    for i, b in enumerate(images):
        if not isinstance(b, (bytes, bytearray)):
            raise BadRequest(f"images.{i}: expected bytes, got {type(b).__name__}")
        outputs.append(decode_image(bytes(b), f"images.{i}"))
    return outputs, list(prompts)


def flow_grpo_reply(scores: list) -> bytes:
    """The reply flow-GRPO's clients read: `outputs` (deqa, unifiedreward) and `scores` (geneval) both name the
    per-image scores (a mixture's weighted sum; NaN where an image could not be scored)."""
    flat = [float("nan") if s is None else float(s["weighted"]) if isinstance(s, dict) else float(s) for s in scores]
    return pickle.dumps({"outputs": flat, "scores": flat})
