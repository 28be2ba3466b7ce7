# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target operator -t rewardpool-operator .   (kopf operator: no torch, Ray or Mooncake)
#   docker build --target worker   -t rewardpool-worker .     (reward worker: torch, Ray, Mooncake, transformers)
# The worker needs libibverbs at run time (even for tcp) and the RDMA device from the device plugin for rdma.
# On GPU nodes, build FROM a CUDA base and install the CUDA Mooncake wheel (mooncake-transfer-engine) instead.

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
RUN apt-get update && apt-get install -y --no-install-recommends libibverbs1 ibverbs-providers \
    && rm -rf /var/lib/apt/lists/*
RUN pip install ".[worker]"
# Root inside the container is what IPC_LOCK applies to (pinning the segment); the pod drops every other
# capability and is never privileged.
EXPOSE 8000
ENTRYPOINT ["rewardpool-worker"]
