#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: checks the worker's GPU path (PickScore, hps) and records the
# PickScore, hps and ocr (CPU) benchmark tables there. Run from the repository root:   bash scripts/gpu-check.sh [OUT_DIR]
#
# Needs: python3.11+, the repo's worker extra (it creates its own venv under OUT_DIR if `rewardpool` is not
# importable), a visible GPU, and `ip netns` (root) or nothing else listening: Ray and Mooncake bind loopback.
# Writes OUT_DIR/gpu-check.log, OUT_DIR/bench-score-fp32.json, OUT_DIR/bench-score-bf16.json and
# OUT_DIR/bench-score.md (the tables docs/benchmarks.md takes).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-gpu-check-out}}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
echo "[gpu-check] $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "no GPU visible"; exit 1; }

PY=${PYTHON:-python3}
if ! "$PY" -c 'import rewardpool_worker, torch, mooncake, transformers' 2>/dev/null; then
  echo "[gpu-check] installing the worker extra into $OUT/venv"
  "$PY" -m venv "$OUT/venv"
  "$OUT/venv/bin/pip" install --quiet -e ".[worker,dev]"
  PY="$OUT/venv/bin/python"
fi
"$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "torch sees no GPU (driver, CUDA_VISIBLE_DEVICES?)"
print("[gpu-check] torch", torch.__version__, "cuda", torch.version.cuda, "on", torch.cuda.get_device_name(0))
from rewardpool_worker.scorers.device import resolve_device
assert resolve_device("auto") == "cuda"
PY

# The scorer's GPU path against the CPU path: same frames, fp32 scores within the parity tolerance.
"$PY" - <<'PY'
import math, tempfile, pathlib, torch
from rewardpool_devcluster import random_clip
from rewardpool_worker.scorers.pickscore import PickScoreScorer
d = random_clip.build(pathlib.Path(tempfile.mkdtemp()) / "tiny", "tiny", logit_scale=math.log(100))
g = torch.Generator().manual_seed(7)
outs = [torch.rand(3, 16, 64, 64, generator=g) for _ in range(6)] + [torch.rand(3, 64, 64, generator=g)]
prompts = [f"prompt {i}" for i in range(len(outs))]
cpu = PickScoreScorer(str(d), num_frames=4, device="cpu").score_batch(outs, prompts)
gpu = PickScoreScorer(str(d), num_frames=4, device="cuda", frames_per_forward=5).score_batch(outs, prompts)
bf16 = PickScoreScorer(str(d), num_frames=4, device="cuda", dtype="bfloat16").score_batch(outs, prompts)
worst = max(abs(a - b) - 1e-3 * abs(b) for a, b in zip(gpu, cpu))
print(f"[gpu-check] fp32 cuda vs cpu: worst excess over 1e-3 rel = {worst:.2e}; bf16 max diff "
      f"{max(abs(a - b) for a, b in zip(bf16, cpu)):.2e}")
assert worst <= 1e-4, (gpu, cpu)
PY

# hps on the GPU (fp16 autocast, as miles scores it) against the CPU's float32: the same images, scores within
# fp16's reach of each other (a cosine similarity: 2e-3 absolute).
"$PY" - <<'PY'
import tempfile, pathlib, torch
from rewardpool_devcluster import random_hps
from rewardpool_worker.contract import ScorerConfig
from rewardpool_worker.scorers import build_scorer
path, arch = random_hps.build(pathlib.Path(tempfile.mkdtemp()) / "hps", "tiny")
g = torch.Generator().manual_seed(8)
outs = [torch.rand(3, 512, 512, generator=g) for _ in range(8)]
prompts = [f'a poster that reads "hello {i}"' for i in range(len(outs))]
cpu, gpu = (build_scorer(ScorerConfig(name="hps", model_path=str(path), device=d, args={"architecture": arch}))
            .score_batch(outs, prompts) for d in ("cpu", "cuda"))
worst = max(abs(a - b) for a, b in zip(gpu, cpu))
print(f"[gpu-check] hps fp16-autocast cuda vs fp32 cpu: max diff {worst:.2e}")
assert worst <= 2e-3, (gpu, cpu)
PY

run_bench() {  # the benchmark starts a mooncake_master and store clients on loopback
  if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
    REWARDPOOL_NETNS=rewardpool-gpu-check PATH="$(dirname "$PY"):$PATH" bash scripts/in-netns.sh "$PY" -m rewardpool_devcluster.bench "$@"
  else
    "$PY" -m rewardpool_devcluster.bench "$@"
  fi
}
# The per-stage table (read, pick + quantise, text, preprocess, forward, total, slowest) on the GPU. The
# forwards run asynchronously: the host's preprocessing of the next chunk overlaps them, and the forward column
# counts what the host waited for them, so the columns still add up to each output's wall time.
run_bench score --device cuda --dtype float32 --outputs 64 --large-outputs 64 --batch-size 8 \
  --frames 121 --height 384 --width 512 --num-frames 8 --json "$OUT/bench-score-fp32.json" | tee "$OUT/bench-score.md"
run_bench score --device cuda --dtype bfloat16 --models clip-h14 --outputs 64 --large-outputs 64 \
  --batch-size 8 --frames 121 --height 384 --width 512 --num-frames 8 --json "$OUT/bench-score-bf16.json" \
  | tee -a "$OUT/bench-score.md"
# hps images/s per worker: the tests' small config and HPS v2's real ViT-H-14 (random weights), SD3.5's sizes
run_bench hps --device cuda --models tiny vit-h-14 --sizes 512 1024 --batch 8 --batches 10 | tee -a "$OUT/bench-score.md"
# ocr runs on the CPU on any machine (as miles runs it): its images/s on this machine's cores
run_bench ocr --sizes 512 1024 --batch 4 --batches 10 | tee -a "$OUT/bench-score.md"
echo "[gpu-check] done: $OUT/bench-score.md"
