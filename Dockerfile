# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target operator -t rewardpool-operator .   (kopf operator: no torch, Ray or Mooncake)
#   docker build --target worker   -t rewardpool-worker .     (reward worker: torch, Ray, Mooncake, transformers)
# The worker needs libibverbs at run time (even for tcp) and the RDMA device from the device plugin for rdma.
#
# GPU nodes: the same worker image scores on GPUs. The PyPI torch wheel for Linux x86_64 carries its CUDA
# runtime (cuDNN, cuBLAS, NCCL as pip packages); the NVIDIA container toolkit mounts the driver into the
# container when the pod requests nvidia.com/gpu (spec.scorer.gpus). No CUDA base image is needed. For
# GPUDirect RDMA into GPU memory, build with the CUDA build of Mooncake:
#   docker build --target worker --build-arg MOONCAKE_WHEEL=mooncake-transfer-engine -t rewardpool-worker:cuda .

FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
COPY worker/ worker/
COPY devcluster/ devcluster/

FROM base AS operator
RUN pip install . && useradd --uid 65532 --no-create-home nonroot
USER 65532
ENTRYPOINT ["rewardpool"]
CMD ["operator", "--log-json"]

FROM base AS worker
# mooncake-transfer-engine-non-cuda (the default, CPU memory only) or mooncake-transfer-engine (CUDA build);
# both install the same `mooncake` package, so the extra's wheel is swapped for the one asked for.
ARG MOONCAKE_WHEEL=mooncake-transfer-engine-non-cuda
RUN apt-get update && apt-get install -y --no-install-recommends libibverbs1 ibverbs-providers \
    && rm -rf /var/lib/apt/lists/*
RUN pip install ".[worker]" \
    && if [ "$MOONCAKE_WHEEL" != "mooncake-transfer-engine-non-cuda" ]; then \
         pip uninstall -y mooncake-transfer-engine-non-cuda && pip install "$MOONCAKE_WHEEL"; fi
# Many threads (Ray calls, the store client, torch) would each get a malloc arena that keeps what its thread
# freed; capping the arenas keeps that retained memory out of the pod's budget (the scorer itself runs in
# one thread for the same reason, see worker/rewardpool_worker/actor.py).
ENV MALLOC_ARENA_MAX=2
# Root inside the container is what IPC_LOCK applies to (pinning the segment); the pod drops every other
# capability and is never privileged.
EXPOSE 8000
ENTRYPOINT ["rewardpool-worker"]
