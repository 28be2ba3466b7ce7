"""Segment and memory sizing, pure. The rule comes from the origin change: segments hold one rollout's
outputs plus `latentRollouts` rollouts of latents, and stay below the master's eviction high watermark."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

from rewardpool_worker.contract import BUILTIN_SCORERS, READ_SLOTS, BuiltinScorer

from ..api import reasons as R
from ..api.findings import Problem
from ..api.quantity import format_bytes, human, parse_bytes
from ..api.spec import PoolSpec, Sizing

MiB = 2**20
GiB = 2**30
# Fixed terms of a worker's memory: Ray's /dev/shm and the Python/torch/Ray process itself.
SHM_BYTES = 1 * GiB
OVERHEAD_BYTES = 2 * GiB


@dataclass(frozen=True)
class SizingResult:
    mode: str  # auto | fixed | none
    per_worker_bytes: int
    total_bytes: int
    required_bytes: int
    rule: str
    local_buffer_bytes: int
    read_buffer_bytes: int
    model_bytes: int
    read_buffers: int
    gpus: int
    gpu_memory_bytes: int
    shm_bytes: int
    overhead_bytes: int
    memory_bytes: int
    memory_formula: str
    min_replicas_for_registration: int
    problems: list[Problem] = field(default_factory=list)
    basis_replicas: int = 1  # the worker count an auto segment is divided over
    basis_key: str = ""  # what the basis was computed for (sizing inputs): a change re-bases

    def status(self) -> dict:
        return {"perWorker": format_bytes(self.per_worker_bytes), "perWorkerBytes": self.per_worker_bytes,
                "total": format_bytes(self.total_bytes), "required": format_bytes(self.required_bytes),
                "mode": self.mode, "rule": self.rule, "basisReplicas": self.basis_replicas,
                "basisKey": self.basis_key}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["problems"] = [asdict(p) for p in self.problems]
        return d


def high_watermark(spec) -> float:
    """The store's eviction watermark the sizing assumes (mooncake_master's default without spec.sizing)."""
    return spec.sizing.highWatermark if spec.sizing else Sizing.model_fields["highWatermark"].default

def _round_mib(n: int) -> int:
    return math.ceil(n / MiB) * MiB


def default_basis(spec: PoolSpec) -> int:
    """How many workers an auto segment is divided over. An autoscaled pool divides over its minimum, so at
    every size in [min, max] the segments hold the rule's total; a fixed pool over its replicas when first
    sized (the operator records that in status, so a later `kubectl scale` changes no worker's segment)."""
    auto = spec.autoscaling
    if auto is not None and auto.enabled:
        return max(1, auto.minReplicas)
    return max(1, spec.replicas)


def compute(spec: PoolSpec, replicas: int | None = None, basis: int | None = None) -> SizingResult:
    replicas = spec.replicas if replicas is None else replicas
    workers = max(1, basis if basis is not None else default_basis(spec))
    problems: list[Problem] = []
    sz = spec.sizing
    required = 0
    if sz is not None:
        out, lat = parse_bytes(sz.outputBytesPerSample), parse_bytes(sz.latentBytesPerSample)
        required = sz.samplesPerRollout * out + sz.latentRollouts * sz.samplesPerRollout * lat
        needed = math.ceil(required / sz.highWatermark)
        rule_terms = (f"({sz.samplesPerRollout} x {human(out)} outputs + {sz.latentRollouts} x "
                      f"{sz.samplesPerRollout} x {human(lat)} latents) / highWatermark {sz.highWatermark}")
    seg = spec.store.segmentSize
    if seg == "auto":
        if sz is None:  # admission rejects this; a spec that slipped past it still gets a clear message
            raise ValueError("store.segmentSize auto needs spec.sizing")
        mode = "auto"
        per_worker = _round_mib(math.ceil(needed / workers))
        rule = f"{rule_terms} = {human(needed)}, over {workers} worker(s)"
        if replicas < workers:
            problems.append(Problem(
                R.SEGMENT_TOO_SMALL,
                f"{replicas} worker(s) x {human(per_worker)} is below the {human(needed)} the sizing needs: the "
                f"segment is sized for {workers} worker(s) (autoscaling.minReplicas, or the replicas when the pool "
                "was sized); unread outputs may be evicted"))
    elif parse_bytes(seg) == 0:
        mode, per_worker = "none", 0
        rule = "workers lend no segment (pure readers); the store's capacity comes from its other clients"
    else:
        mode, per_worker = "fixed", parse_bytes(seg)
        rule = f"fixed store.segmentSize {format_bytes(per_worker)} x {workers} worker(s)"
        if sz is not None and per_worker * workers < needed:
            problems.append(Problem(
                R.SEGMENT_TOO_SMALL,
                f"{workers} x {human(per_worker)} = {human(per_worker * workers)} of segment is below the "
                f"{human(needed)} the sizing needs ({rule_terms}); unread outputs would be evicted"))
    total = per_worker * replicas

    max_reg = parse_bytes(spec.store.maxRegistrationSize)
    min_reg_replicas = math.ceil(per_worker * workers / max_reg) if per_worker else 0
    if per_worker > max_reg and spec.store.protocol == "rdma":
        problems.append(Problem(
            R.SEGMENT_EXCEEDS_REGISTRATION_LIMIT,
            f"per-worker segment {human(per_worker)} exceeds one RDMA registration's limit "
            f"{human(max_reg)} (the NIC's max_mr_size); use at least {min_reg_replicas} replicas or a smaller "
            f"store.segmentSize"))

    local = parse_bytes(spec.store.localBufferSize)
    sc = spec.scorer
    per_output, picked = (parse_bytes(sz.outputBytesPerSample), picked_frames(spec)) if sz is not None else (0, None)
    if picked is not None:  # ranged reads: a read slot holds only the picked frames of each output
        per_output = math.ceil(per_output / picked[1]) * picked[0]
    read = sc.batchSize * per_output
    models = [model_bytes(c, sc) for c in spec.components]
    model = sum(models)
    # Host memory keeps the model term on GPU pools too: weights are loaded through host memory first.
    # A worker holds at most READ_SLOTS batches of outputs (one scored, one read ahead; every further batch
    # waits before reading), each in its own registered buffer of batchSize x outputBytesPerSample.
    memory = _round_mib(per_worker + local + READ_SLOTS * read + model + SHM_BYTES + OVERHEAD_BYTES)
    what = "model" if len(models) == 1 else f"{len(models)} models"
    each = (f"{picked[0]} of {picked[1]} frames of an output, read as ranges" if picked is not None
            else "output")
    formula = (f"segment {human(per_worker)} + local buffer {human(local)} + {READ_SLOTS} read buffers x "
               f"{human(read)} (batchSize {sc.batchSize} x {each}: one scored, one read ahead) + {what} "
               f"{human(model)} + /dev/shm {human(SHM_BYTES)} + overhead {human(OVERHEAD_BYTES)} = {human(memory)}")
    gpu_memory = 0
    if sc.gpus > 0:
        half = sc.dtype != "float32"
        per_frame = sum(_builtin(c).gpu_bytes_per_frame * (c.framesPerForward or sc.framesPerForward)
                        for c in spec.components)
        gpu_memory = _round_mib((model + per_frame) // (2 if half else 1))
        formula += (f"; GPU: {sc.gpus} x {spec.placement.gpuResource}, about {human(gpu_memory)} used "
                    f"({what} + framesPerForward activations, {sc.dtype})")

    limit = (spec.resources.get("limits") or {}).get("memory")
    if limit is not None and parse_bytes(limit) < memory:
        problems.append(Problem(
            R.MEMORY_LIMIT_TOO_SMALL,
            f"resources.limits.memory {limit} is below the {human(memory)} a worker needs: {formula}",
            blocking=True))
    return SizingResult(mode, per_worker, total, required, rule, local, read, model, READ_SLOTS, sc.gpus,
                        gpu_memory, SHM_BYTES, OVERHEAD_BYTES, memory, formula, min_reg_replicas, problems,
                        workers, basis_key(spec))


def picked_frames(spec: PoolSpec) -> tuple[int, int] | None:
    """(k, F) when a read moves only k of an output's F frames: the sizing gives F and every scorer is a
    built-in that picks frames with numFrames set. k is the sum of their counts (capped at F): exact for one
    scorer, an upper bound of the frames a mixture's union holds. None: outputs are read whole."""
    frames = spec.sizing.frames if spec.sizing is not None else None
    if frames is None:
        return None
    counts = []
    for c in spec.components:
        k = c.numFrames if c.numFrames is not None else spec.scorer.numFrames
        if not _builtin(c).picks_frames or k is None:
            return None
        counts.append(min(k, frames))
    k = min(frames, sum(counts))
    return (k, frames) if k < frames else None


def model_bytes(component, shared) -> int:
    """Memory of one loaded model: the component's modelMemory, else the shared one, else the default."""
    given = component.modelMemory if component.modelMemory is not None else shared.modelMemory
    if given is not None:
        return parse_bytes(given)
    return _builtin(component).model_bytes


def _builtin(component) -> BuiltinScorer:
    """The registry's figures for a built-in scorer; zeros for a custom one."""
    return BUILTIN_SCORERS.get(component.name or "", BuiltinScorer(""))


def basis_key(spec: PoolSpec) -> str:
    """A digest of the inputs an auto segment is computed from (not replicas)."""
    inputs = {"sizing": spec.sizing.model_dump() if spec.sizing else None, "segment": str(spec.store.segmentSize),
              "auto": bool(spec.autoscaling and spec.autoscaling.enabled)}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:10]


def recorded_basis(spec: PoolSpec, status: dict | None) -> int | None:
    """The basis recorded in the pool's status, if it was computed for the same inputs (else None: re-base)."""
    seg = (status or {}).get("segment") or {}
    auto = spec.autoscaling is not None and spec.autoscaling.enabled
    if not auto and seg.get("basisKey") == basis_key(spec) and seg.get("basisReplicas"):
        return int(seg["basisReplicas"])
    return None

