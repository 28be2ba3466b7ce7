# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build --target operator -t rewardpool-operator .   (kopf operator: no torch, Ray or Mooncake)
#   docker build --target worker   -t rewardpool-worker .     (reward worker: torch, Ray, Mooncake, transformers)
# BASE is any Debian-bookworm-like image with python3 (>= 3.11) and its venv module: the public Python image by
# default; the dev cluster passes a bookworm base it makes with mmdebstrap (devcluster/images.sh).
# The worker needs libibverbs at run time (even for tcp) and the RDMA device from the device plugin for rdma.
#
# GPU nodes: the same worker image scores on GPUs. The PyPI torch wheel for Linux x86_64 carries its CUDA
# runtime (cuDNN, cuBLAS, NCCL as pip packages); the NVIDIA container toolkit mounts the driver into the
# container when the pod requests nvidia.com/gpu (spec.scorer.gpus). No CUDA base image is needed. For
# GPUDirect RDMA into GPU memory, build with the CUDA build of Mooncake:
#   docker build --target worker --build-arg MOONCAKE_WHEEL=mooncake-transfer-engine -t rewardpool-worker:cuda .
# Dev tooling (devcluster, benchmarks, tests) is not in either image: only operator/ and worker/ are copied.
# The *-deps stages hold the dependencies alone (keyed by pyproject.toml): with a layer cache, a code change
# rebuilds only the last layers.
#
# Build arguments for builds behind a TLS-intercepting proxy or with a shared wheel cache (buildah/podman):
#   PIP_CERT       a CA bundle path mounted into the build (-v /etc/ssl/certs/ca-certificates.crt:/run/ca.crt:ro)
#   PIP_CACHE_DIR  a pip cache mounted into the build (-v ~/.cache/pip:/root/.cache/pip); unset = no cache
ARG BASE=python:3.11-slim-bookworm

# The dependency lists, extracted from pyproject.toml: the layers below copy these files, so they are rebuilt
# only when a dependency changes (not for a packaging or tool setting, never for a code change).
FROM ${BASE} AS requirements
COPY pyproject.toml /tmp/
RUN python3 -c 'import tomllib; p = tomllib.load(open("/tmp/pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"]))' > /tmp/operator.txt \
    && python3 -c 'import tomllib; p = tomllib.load(open("/tmp/pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["worker"]))' > /tmp/worker.txt

FROM ${BASE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VIRTUAL_ENV=/opt/rewardpool PATH=/opt/rewardpool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN python3 -m venv /opt/rewardpool
WORKDIR /app

FROM runtime AS operator-deps
ARG PIP_CERT
ARG PIP_CACHE_DIR
COPY --from=requirements /tmp/operator.txt /app/requirements.txt
RUN pip install $([ -n "$PIP_CACHE_DIR" ] || echo --no-cache-dir) --progress-bar off -r /app/requirements.txt
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin nonroot

FROM operator-deps AS operator
COPY operator/rewardpool_operator /app/rewardpool_operator
# Of the worker package, only the contract the operator renders (config, names, ports, the scorer registry):
# it imports nothing else, so no worker code and none of its dependencies are in this image.
COPY worker/rewardpool_worker/__init__.py worker/rewardpool_worker/contract.py /app/rewardpool_worker/
ENV PYTHONPATH=/app
USER 65532
ENTRYPOINT ["python3", "-m", "rewardpool_operator.cli"]
CMD ["operator", "--log-json"]

FROM runtime AS worker-deps
ARG PIP_CERT
ARG PIP_CACHE_DIR
# libibverbs (even for tcp), libcurl and libnuma: what the Mooncake wheels (store client, mooncake_master) link to;
# libgl1 and libglib2.0-0: what OpenCV's wheels (paddleocr's cv2, for the ocr built-in) link to
RUN apt-get update && apt-get install -y --no-install-recommends libibverbs1 ibverbs-providers libcurl4 libnuma1 \
      libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/*
# The heavy layer (torch with its CUDA libraries from PyPI, Ray, Mooncake, transformers): several GB, built once.
COPY --from=requirements /tmp/worker.txt /app/requirements.txt
RUN pip install $([ -n "$PIP_CACHE_DIR" ] || echo --no-cache-dir) --progress-bar off -r /app/requirements.txt
# mooncake-transfer-engine-non-cuda (the default, CPU memory only) or mooncake-transfer-engine (CUDA build);
# both install the same `mooncake` package, so the extra's wheel is swapped for the one asked for (declared
# after the heavy layer, so the default build reuses it).
ARG MOONCAKE_WHEEL=mooncake-transfer-engine-non-cuda
RUN if [ "$MOONCAKE_WHEEL" != "mooncake-transfer-engine-non-cuda" ]; then \
      pip uninstall -y mooncake-transfer-engine-non-cuda \
      && pip install $([ -n "$PIP_CACHE_DIR" ] || echo --no-cache-dir) "$MOONCAKE_WHEEL"; fi

FROM worker-deps AS worker
COPY worker/rewardpool_worker /app/rewardpool_worker
ENV PYTHONPATH=/app
# Many threads (Ray calls, the store client, torch) would each get a malloc arena that keeps what its thread
# freed; capping the arenas keeps that retained memory out of the pod's budget (the scorer itself runs in
# one thread for the same reason, see worker/rewardpool_worker/runtime/slots.py).
ENV MALLOC_ARENA_MAX=2
# Root inside the container is what IPC_LOCK applies to (pinning the segment); the pod drops every other
# capability and is never privileged.
EXPOSE 8000
ENTRYPOINT ["python3", "-m", "rewardpool_worker.runtime.main"]
