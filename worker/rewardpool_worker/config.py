"""The one contract between operator and worker: the config the operator renders into every worker pod
and the worker reads at start. Both sides import this module; nothing else crosses between them."""
from __future__ import annotations

import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ENV_VAR = "REWARDPOOL_WORKER_CONFIG"
# Where the pod's Downward API volume puts its annotations (Multus network-status lives there).
ANNOTATIONS_FILE = "/etc/podinfo/annotations"
HTTP_PORT = 8000
# The worker's HTTP endpoints on HTTP_PORT: reads open to probes and scrapers, control calls authenticated.
HEALTH_PATH, READY_PATH, METRICS_PATH, DRAIN_PATH = "/healthz", "/readyz", "/metrics", "/drain"
# What the operator reads from each worker's /metrics (the autoscaler's queue signal); the worker's
# metrics.py registers them under these names.
QUEUE_DEPTH_METRIC = "rewardpool_worker_queue_depth"
PENDING_BYTES_METRIC = "rewardpool_worker_pending_bytes"
# The Ray actor of a pod is named ACTOR_PREFIX + "<namespace>/<pool>:<pod>"; pool clients find them by prefix.
ACTOR_PREFIX = "rewardpool:"


def actor_prefix(namespace: str, pool: str) -> str:
    return f"{ACTOR_PREFIX}{namespace}/{pool}:"
# Control calls (POST /drain, and any future mutating endpoint) carry the pool's token as a bearer token.
# The operator keeps it in a per-pool Secret and the pod mounts that Secret read-only; the worker reads the
# file on every call, so a rotated Secret (deleted, recreated by the operator) is picked up without a restart.
CONTROL_SECRET_KEY = "token"
CONTROL_TOKEN_DIR = "/etc/rewardpool/control"
CONTROL_TOKEN_FILE = f"{CONTROL_TOKEN_DIR}/{CONTROL_SECRET_KEY}"
CONTROL_HEADER = "Authorization"
CONTROL_SCHEME = "Bearer"
# The operator's drain request as a pod annotation: the worker honours it from its Downward API annotations
# file too, so a drain cannot be stranded when the HTTP call never arrives (a network policy mistake).
DRAIN_ANNOTATION = "rewardpool.io/drain-requested-at"


# One drain timeout (spec.drainTimeoutSeconds) drives all three: the worker finishes in-flight batches within
# it after SIGTERM, the operator waits that long for a drain it asked for, and the pod's grace period is the
# timeout plus this margin (time for the worker to leave Ray and the store cleanly after its last batch).
DRAIN_GRACE_MARGIN_SECONDS = 30


def termination_grace_seconds(drain_timeout: int) -> int:
    return drain_timeout + DRAIN_GRACE_MARGIN_SECONDS


# A client's demand hint: `{"outputs": N, "until": RFC 3339}` as an annotation on the RewardPool, written by
# `rewardpool_worker.demand.expect` at a rollout's start and read by the operator's autoscaler, so the pool
# grows before the queue builds, and can start from zero workers (no worker, no queue to read).
EXPECTED_OUTPUTS_ANNOTATION = "rewardpool.io/expected-outputs"


def parse_expected_outputs(value: str | None, now: float) -> int:
    """Outputs still expected per the annotation; 0 when absent, malformed or expired."""
    from datetime import datetime

    try:
        hint = json.loads(value or "")
        until = datetime.fromisoformat(str(hint["until"]).replace("Z", "+00:00")).timestamp()
        return max(int(hint["outputs"]), 0) if until > now else 0
    except (ValueError, KeyError, TypeError):
        return 0


def control_secret_name(pool: str) -> str:
    return f"{pool}-control"


def control_header(token: str) -> dict[str, str]:
    return {CONTROL_HEADER: f"{CONTROL_SCHEME} {token}"}
BUILTIN_SCORERS = ("pickscore", "mean-intensity")


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    master: str = Field(description="mooncake_master host:port")
    metadata_server: str = "P2PHANDSHAKE"
    protocol: Literal["rdma", "tcp"] = "rdma"
    devices: list[str] = Field(default_factory=list)
    segment_bytes: int = Field(ge=0, description="global segment this worker lends; 0 lends none")
    local_buffer_bytes: int = Field(ge=0)


class ScorerConfig(BaseModel):
    """One scorer, complete: the operator resolves what a component of `scorers` inherits from `scorer`, so
    the worker never merges settings itself. In the mixture form `WorkerConfig.scorer` carries only the
    settings the components share (batch size, device, GPUs) and names no scorer."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str | None = None
    cls: str | None = Field(default=None, alias="class", description="package.module:Class")
    num_frames: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=8, ge=1, description="most outputs one call may carry; larger is refused")
    model_path: str | None = None
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto",
                                                   description="auto: cuda when the process sees a GPU")
    gpus: int = Field(default=0, ge=0, description="GPUs the pod and the Ray actor request")
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    frames_per_forward: int = Field(default=32, ge=1, description="frames per model forward, across outputs")
    weight: float = Field(default=1.0, description="weight of this component in the weighted sum")
    args: dict[str, Any] = Field(default_factory=dict, description="constructor keywords of a custom scorer")

    @property
    def ref(self) -> str:
        return self.name or self.cls or ""

    @property
    def component(self) -> str:
        """The key of this scorer's score in a mixture's result: the built-in name or the class name."""
        return self.name or (self.cls or "").rpartition(":")[2]


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str | None = None
    namespace: str = "rewardpool"


class WorkerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    pool: str
    namespace: str
    store: StoreConfig
    scorer: ScorerConfig
    scorers: list[ScorerConfig] = Field(default_factory=list, description=(
        "components of a weighted mixture, each read once and scored by all; empty: `scorer` alone"))
    ray: RayConfig = Field(default_factory=RayConfig)
    read_buffer_bytes: int = Field(ge=0, description="initial size of each registered read buffer")
    read_buffer_max_bytes: int = Field(default=0, ge=0, description=(
        "cap of each registered read buffer (one batch; the pod's memory counts two: one scored, one read "
        "ahead); 0: not sized, no cap"))
    network_attachment: str | None = Field(default=None, description="namespace/name of the RoCE attachment")
    http_port: int = HTTP_PORT
    drain_timeout_seconds: int = Field(default=600, ge=0, description="finish in-flight batches within this "
                                       "after SIGTERM (the pool's drainTimeoutSeconds)")
    wedge_floor_seconds: float = Field(default=300.0, gt=0, description=(
        "liveness fails when a batch holds the model longer than max(this, 10 x the slowest batch seen)"))

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, text: str) -> "WorkerConfig":
        return cls.model_validate(json.loads(text))

    @classmethod
    def from_env(cls) -> "WorkerConfig":
        text = os.environ.get(ENV_VAR)
        if not text:
            raise RuntimeError(f"{ENV_VAR} is not set: the worker is started by the RewardPool operator, "
                               "which renders this config into the pod")
        return cls.from_json(text)

    @property
    def components(self) -> list[ScorerConfig]:
        return self.scorers or [self.scorer]

    def actor_name(self, pod_name: str) -> str:
        """Ray actor name the pool client discovers: one per pool and pod."""
        return actor_prefix(self.namespace, self.pool) + pod_name


class WorkerHealth(BaseModel):
    """The /healthz payload: what the operator's drain decisions and `rewardpool status` read (200 when live,
    503 when wedged)."""
    model_config = ConfigDict(extra="ignore")
    phase: Literal["starting", "ready", "draining", "drained", "failed"]
    live: bool = True
    reason: str | None = None
    in_flight: int = 0
    store_hostname: str | None = None
    # For `rewardpool status`; defaulted so the operator still parses the payload of workers built before them.
    queue_depth: int = 0
    last_batch_seconds_ago: float | None = Field(default=None, description="None: no batch finished yet")
