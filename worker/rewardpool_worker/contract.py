"""The one contract between operator and worker: the config the operator renders into every worker pod and
the worker reads at start, and every name both sides must agree on (API group, labels, annotations, paths,
ports, metric names, the health payload, actor names, read slots, the RoCE interface, the built-in scorers).
Both sides import this module; nothing else crosses between them. It imports nothing from the project and
nothing heavy (the operator image carries this file alone of the worker package)."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The RewardPool API, and the label every object of a pool carries (its selector, its scrape's `pool`).
GROUP, VERSION, PLURAL, KIND = "rewardpool.io", "v1alpha1", "rewardpools", "RewardPool"
API_VERSION = f"{GROUP}/{VERSION}"
POOL_LABEL = "rewardpool.io/pool"

ENV_VAR = "REWARDPOOL_WORKER_CONFIG"
# Where the pod's Downward API volume puts its annotations (Multus network-status lives there).
ANNOTATIONS_FILE = "/etc/podinfo/annotations"
HTTP_PORT = 8000
# Where the operator mounts a scorer's model source (scorer.model: a PVC or an OCI image), read-only:
# MODELS_ROOT/<component> (the component's key or name), the scorer's model path.
MODELS_ROOT = "/models"
# The pool's scoring Service (`<pool>-score`, its Ready workers) and the name of its port: an HTTP client finds the
# workers from the Service's EndpointSlices by these.
SCORE_PORT_NAME = "http"


def score_service_name(pool: str) -> str:
    return f"{pool}-score"


# The worker's HTTP endpoints on HTTP_PORT: reads open to probes and scrapers, control calls authenticated.
HEALTH_PATH, READY_PATH, METRICS_PATH, DRAIN_PATH = "/healthz", "/readyz", "/metrics", "/drain"
PROMOTE_PATH = "/promote"  # a shadow worker's version takes traffic now (SHADOW_ANNOTATION removed)
# spec.access.tenants: the operator sends each worker its pool's tenants (names, shares, their tokens' SHA-256, never
# the tokens) with the control token, at start and within seconds of any change (a tenant added, removed, its
# Secret rotated): no worker is replaced, and a worker that has not received them yet takes no HTTP scoring.
TENANTS_PATH = "/tenants"
# The name Multus gives the pod's RoCE interface (the first secondary network); the worker lends its segment
# on this interface's address.
ROCE_INTERFACE = "net1"
# Read slots per worker: one batch being scored, one read ahead of the model; each a registered buffer of one
# batch. The operator's memory sizing counts them, the actor holds them, the client keeps a worker this busy.
READ_SLOTS = 2


# ---- Metric names ------------------------------------------------------------------------------------------
# Every metric the project exports is declared here, to Prometheus conventions: base units in the name
# (_seconds, _bytes, _ratio), counters declared without `_total` (prometheus_client adds it on the wire),
# per-pool figures labelled namespace and pool. A worker's series carry no namespace/pool/pod labels of their
# own: the scrape adds them from the pod (the chart's ServiceMonitor relabels rewardpool.io/pool to `pool`),
# so they never come out as exported_namespace. Dashboards, the KEDA example and the operator's autoscaler
# read these names.
@dataclass(frozen=True)
class Metric:
    name: str
    kind: Literal["counter", "gauge", "histogram"]
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None

    @property
    def exposed(self) -> str:
        """The name a scrape sees (a histogram's series add _bucket/_sum/_count to it)."""
        return self.name + "_total" if self.kind == "counter" else self.name

    def make(self, registry=None, buckets: tuple[float, ...] | None = None):
        """The prometheus_client collector (registry None: the process's default registry). `buckets` replaces
        a histogram's own (a score histogram's come from its scorers' ranges)."""
        import prometheus_client as pc

        kw: dict[str, Any] = {"labelnames": self.labels}
        if registry is not None:
            kw["registry"] = registry
        if buckets or self.buckets:
            kw["buckets"] = buckets or self.buckets
        cls = {"counter": pc.Counter, "gauge": pc.Gauge, "histogram": pc.Histogram}[self.kind]
        return cls(self.name, self.help, **kw)


# A group that sent no batch for this long no longer holds a roll (spec.rollout.maxVersionSkewSeconds): its
# step is over, or it moved.
GROUP_ACTIVE_SECONDS = 60.0
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_POOL = ("namespace", "pool")


class WorkerMetricNames:
    """A worker's /metrics (scraped per pod)."""
    QUEUE_DEPTH = Metric("rewardpool_worker_queue_depth", "gauge",
                         "Batches accepted and not finished (the operator's autoscaling signal)")
    PENDING_BYTES = Metric("rewardpool_worker_pending_bytes", "gauge",
                           "Stored bytes of the accepted, unfinished batches")
    INLINE_BYTES = Metric("rewardpool_worker_inline_bytes", "gauge",
                          "Bytes of inline outputs (tensors sent in the call) the worker holds, accepted and unfinished")
    OUTPUT_READ_SECONDS = Metric("rewardpool_worker_output_read_seconds", "histogram",
                                 "Time to read one output from the store (a batch's read time over its outputs)",
                                 buckets=_SECONDS)
    OUTPUT_SCORE_SECONDS = Metric("rewardpool_worker_output_score_seconds", "histogram",
                                  "Model time per output (a batch's score time over its outputs)", ("scorer",),
                                  buckets=_SECONDS)
    BATCH_SIZE = Metric("rewardpool_worker_batch_size_outputs", "histogram", "Outputs per scored batch",
                        buckets=(1, 2, 4, 8, 16, 32, 64, 128))
    QUEUE_WAIT_SECONDS = Metric("rewardpool_worker_queue_wait_seconds", "histogram",
                                "Time a batch waited for a read slot after it was accepted", buckets=_SECONDS)
    SCORED_OUTPUTS = Metric("rewardpool_worker_scored_outputs", "counter", "Outputs scored", ("scorer",))
    BATCHES = Metric("rewardpool_worker_batches", "counter", "Batches scored")
    REFUSED_BATCHES = Metric("rewardpool_worker_refused_batches", "counter",
                             "Batches refused (larger than batchSize, or beyond the queue limit)")
    READ_BYTES = Metric("rewardpool_worker_read_bytes", "counter", "Bytes read from the store")
    # per tenant (spec.access.tenants; "default" for open pools and Ray callers): the fair share of the read slots
    TENANT_QUEUE_DEPTH = Metric("rewardpool_worker_tenant_queue_depth", "gauge",
                                "Batches waiting for a read slot, per tenant", ("tenant",))
    TENANT_BATCHES = Metric("rewardpool_worker_tenant_batches", "counter",
                            "Batches given a read slot, per tenant", ("tenant",))
    TENANT_QUEUE_WAIT_SECONDS = Metric("rewardpool_worker_tenant_queue_wait_seconds", "histogram",
                                       "Time a batch waited for a read slot, per tenant", ("tenant",),
                                       buckets=_SECONDS)
    STORE_READS = Metric("rewardpool_worker_store_read_batches", "counter",
                         "Batch reads from the store by result: ok, or failed (a transfer that failed or made no "
                         "progress: this worker's data path, or the outputs' owner gone); the operator compares "
                         "workers' failures to find a broken data path", ("result",))
    BUFFER_REGISTRATIONS = Metric("rewardpool_worker_buffer_registrations", "counter",
                                  "Read buffer registrations with the transfer engine (one per read slot)")
    READ_SLOTS_IN_USE = Metric("rewardpool_worker_read_slots_in_use", "gauge",
                               "Batches holding a read buffer (being read or scored); at most 2")
    READ_BUFFER_BYTES = Metric("rewardpool_worker_read_buffer_bytes", "gauge", "Registered read buffer bytes")
    DRAINING = Metric("rewardpool_worker_draining", "gauge", "1 while the worker drains")
    ACTIVE_GROUPS = Metric("rewardpool_worker_active_groups", "gauge",
                           "Caller groups (score(group=...): a GRPO prompt group, a rollout) that sent this worker a "
                           "batch within the last GROUP_ACTIVE_SECONDS: groups pinned to its scorer version")
    MODEL_BUSY_SECONDS = Metric("rewardpool_worker_model_busy_seconds", "gauge",
                                "How long the batch now in the model has run (0 when idle)")
    WARMUP_SECONDS = Metric("rewardpool_worker_warmup_seconds", "gauge",
                            "Time of the warm-up forward run before the worker became Ready")
    MODEL_LOAD_SECONDS = Metric("rewardpool_worker_model_load_seconds", "gauge", "Time to load the scorer(s)")
    # Drift: per component (a mixture's names and "weighted"; a single scorer's name) and scorer version. Its
    # _sum and _count give a window's mean; with SCORE_SQUARES, its spread. Buckets: score_buckets().
    SCORE = Metric("rewardpool_worker_score", "histogram", "Scores given, per component and scorer version",
                   ("component", "version"))
    SCORE_SQUARES = Metric("rewardpool_worker_score_squares", "counter",
                           "Sum of squared scores (with rewardpool_worker_score's _sum and _count: the spread)",
                           ("component", "version"))


class ClientMetricNames:
    """The training side's process (pool client, releaser)."""
    BATCH_RETRIES = Metric("rewardpool_client_batch_retries", "counter", "Batches sent again to another worker")
    TIMEOUTS = Metric("rewardpool_client_timeouts", "counter", "Score calls that ran past their deadline")
    SAMPLE_ERRORS = Metric("rewardpool_client_sample_errors", "counter", "Samples returned as a SampleError")
    RELEASES = Metric("rewardpool_client_releases", "counter",
                      "Outputs released from the store after their last reward")
    RELEASE_FAILURES = Metric("rewardpool_client_release_failures", "counter",
                              "Releases that failed (counted, not raised)")
    MEDIA_FAILURES = Metric("rewardpool_client_media_failures", "counter", "Media read-backs that failed")
    SWEPT = Metric("rewardpool_client_swept", "counter", "Stale outputs removed by a sweep")
    CONFIRMS_ABANDONED = Metric("rewardpool_client_release_check_failures", "counter",
                                "Removes whose later check (a highly available master) was given up: the master "
                                "did not answer for CONFIRM_GIVE_UP_SECONDS")


class OperatorMetricNames:
    """The operator's /metrics: its own work, and per-pool figures (what KEDA or an HPA reads)."""
    RECONCILES = Metric("rewardpool_operator_reconciles", "counter", "Reconciles run", ("result",))
    RECONCILE_SECONDS = Metric("rewardpool_operator_reconcile_seconds", "histogram", "Time of one reconcile",
                               buckets=_SECONDS)
    API_WRITES = Metric("rewardpool_operator_api_writes", "counter",
                        "Writes the operator sent to the Kubernetes API", ("kind",))
    POOL_QUEUE_DEPTH = Metric("rewardpool_pool_queue_depth", "gauge",
                              "Batches accepted by the pool's workers and not finished", _POOL)
    POOL_PENDING_BYTES = Metric("rewardpool_pool_pending_bytes", "gauge",
                                "Stored bytes of the pool's accepted, unfinished batches", _POOL)
    POOL_EXPECTED_OUTPUTS = Metric("rewardpool_pool_expected_outputs", "gauge",
                                   "Outputs a client said are coming (demand hint)", _POOL)
    POOL_STORE_FILL = Metric("rewardpool_pool_store_fill_ratio", "gauge",
                             "Allocated over total capacity of the pool's store", _POOL)
    POOL_STORE_WATERMARK = Metric("rewardpool_pool_store_eviction_watermark_ratio", "gauge",
                                  "Store fill above which the master evicts (the sizing's high watermark)", _POOL)
    POOL_DESIRED = Metric("rewardpool_pool_desired_replicas", "gauge",
                          "spec.replicas, or the built-in autoscaler's decision", _POOL)
    POOL_READY = Metric("rewardpool_pool_ready_replicas", "gauge", "Ready workers", _POOL)
    POOL_DRAINING = Metric("rewardpool_pool_draining_replicas", "gauge", "Workers draining before deletion",
                           _POOL)
    POOL_OLDEST_DRAIN = Metric("rewardpool_pool_oldest_drain_age_seconds", "gauge",
                               "Age of the oldest drain in progress (0 when none)", _POOL)
    POOL_SCALE_EVENTS = Metric("rewardpool_pool_scale_events", "counter",
                               "Replica changes the built-in autoscaler made", _POOL + ("direction",))


def all_metrics() -> list[Metric]:
    return [m for group in (WorkerMetricNames, ClientMetricNames, OperatorMetricNames)
            for m in vars(group).values() if isinstance(m, Metric)]


# What the operator reads from each worker's /metrics (the autoscaler's queue signal).
QUEUE_DEPTH_METRIC = WorkerMetricNames.QUEUE_DEPTH.name
PENDING_BYTES_METRIC = WorkerMetricNames.PENDING_BYTES.name
ACTIVE_GROUPS_METRIC = WorkerMetricNames.ACTIVE_GROUPS.name
STORE_READS_METRIC = WorkerMetricNames.STORE_READS.exposed  # `result`: ok | failed
SCORE_METRIC = WorkerMetricNames.SCORE.name  # its `version` label: the scorer version a worker scores with

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
# A worker of a new scorer version created for shadow scoring (spec.rollout.shadow): while the pod carries it,
# the worker scores only the shadow batches clients send it beside the serving version's, and reports how its
# scores agree; the operator removes it when the version takes traffic, and POSTs PROMOTE_PATH so the worker
# need not wait for the kubelet to refresh its Downward API file.
SHADOW_ANNOTATION = "rewardpool.io/shadow-since"


# One drain timeout (spec.drainTimeoutSeconds) drives all three: the worker finishes in-flight batches within
# it after SIGTERM, the operator waits that long for a drain it asked for, and the pod's grace period is the
# timeout plus this margin (time for the worker to leave Ray and the store cleanly after its last batch).
DRAIN_GRACE_MARGIN_SECONDS = 30


def termination_grace_seconds(drain_timeout: int) -> int:
    return drain_timeout + DRAIN_GRACE_MARGIN_SECONDS


# The worker's exit status when it leaves to rejoin the Ray cluster (its actor's name is gone: a Ray head
# restarted without GCS fault tolerance); the kubelet restarts it, and the operator reads it in the container's
# last state as "rejoining Ray", not as a crash.
EXIT_REJOIN = 3


# A client's demand hint: `{"outputs": N, "until": RFC 3339}` as an annotation on the RewardPool, written by
# `rewardpool_worker.client.demand.expect` at a rollout's start and read by the operator's autoscaler, so the
# pool grows before the queue builds, and can start from zero workers (no worker, no queue to read).
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


# A worker's scorer version: the operator's digest of the spec fields that decide scores, then the digest of the
# model files' contents the worker read at start (a new checkpoint at the same path is a new version). A pool
# client sends all batches of one call (and of one caller-given group) to workers of one version.
SCORER_VERSION_LABEL = "rewardpool.io/scorer-version"


def scorer_version(spec_digest: str, model_digest: str) -> str:
    return f"{spec_digest or 'unversioned'}-{model_digest[:8]}"


def version_label(version: str) -> str:
    """The pod label's part of a worker's scorer version (the operator's digest, without the model files')."""
    return version.rsplit("-", 1)[0]


def control_secret_name(pool: str) -> str:
    return f"{pool}-control"


def control_header(token: str) -> dict[str, str]:
    return {CONTROL_HEADER: f"{CONTROL_SCHEME} {token}"}


# ---- Built-in scorers -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltinScorer:
    """One built-in scorer as both sides see it: the worker imports `cls`, the operator's sizing reads the
    memory figures (the operator never imports scorer code)."""
    cls: str  # package.module:Class
    model_bytes: int = 0  # default host memory of the loaded model (spec modelMemory overrides it)
    # GPU working memory of one frame in a forward at float32 (activations of the widest layer, with the
    # allocator's slack); halved for float16/bfloat16. An estimate for the GPU figure, not a limit.
    gpu_bytes_per_frame: int = 0
    # It looks only at the frames the frame rule picks (its class says `picks_frames = True`): with numFrames
    # set, the operator sizes its read slots for those frames alone (the worker reads only their bytes).
    picks_frames: bool = False


def score_buckets(ranges: list[tuple[float, float]], steps: int = 20) -> tuple[float, ...]:
    """Histogram buckets over the span of the given score ranges, `steps` equal steps."""
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    if hi <= lo:
        hi = lo + 1.0
    return tuple(round(lo + (hi - lo) * i / steps, 6) for i in range(steps + 1))


# The registry: a new built-in scorer is its module in scorers/ plus one line here.
BUILTIN_SCORERS: dict[str, BuiltinScorer] = {
    "pickscore": BuiltinScorer("rewardpool_worker.scorers.pickscore:PickScoreScorer",
                               model_bytes=4 * 2**30, gpu_bytes_per_frame=64 * 2**20, picks_frames=True),  # CLIP-H/14
    "mean-intensity": BuiltinScorer("rewardpool_worker.scorers.intensity:MeanIntensityScorer", picks_frames=True),
    # HPS v2's open_clip ViT-H-14 (986M parameters); images only, so it reads whole outputs
    "hps": BuiltinScorer("rewardpool_worker.scorers.hps:HpsScorer", model_bytes=4 * 2**30,
                         gpu_bytes_per_frame=64 * 2**20),
    # PaddleOCR 2.x on the CPU (as miles runs it, GPU or not): small det/rec models, paddle's runtime and its
    # oneDNN buffers make up most of the memory
    "ocr": BuiltinScorer("rewardpool_worker.scorers.ocr:OcrScorer", model_bytes=1 * 2**30),
    # a model behind an OpenAI-compatible endpoint: nothing loaded here, no GPU
    "openai-judge": BuiltinScorer("rewardpool_worker.scorers.openai_judge:OpenAIJudgeScorer"),
}
# In a mixture's result dict for one sample: {component: reason} of the optional components (required: false)
# that refused it (their score there is NaN). The client moves it to ScoreReport.component_errors; it is never a
# component's name (those match ^[a-z]).
COMPONENT_ERRORS_KEY = "_errors"
# Constructor keywords that hold a secret: never in a pool's args (the spec is readable by anyone who can list
# pools); the pool names a Secret instead (apiKeySecret), which reaches the scorer as `api_key`.
SECRET_ARGS = frozenset({"api_key", "apiKey", "token", "password"})
API_KEY_ENV_PREFIX = "REWARDPOOL_SCORER_API_KEY"


def api_key_env(index: int) -> str:
    """The environment variable of the pod that holds scorer `index`'s API key (0: the single scorer, or the
    mixture's first component)."""
    return f"{API_KEY_ENV_PREFIX}_{index}"


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    master: str = Field(description="mooncake_master host:port")
    metadata_server: str = "P2PHANDSHAKE"
    protocol: Literal["rdma", "tcp"] = "rdma"
    devices: list[str] = Field(default_factory=list)
    segment_bytes: int = Field(ge=0, description="global segment this worker lends; 0 lends none")
    local_buffer_bytes: int = Field(ge=0)
    metrics_address: str | None = Field(default=None, description=(
        "the master's HTTP metrics host:port (spec.store.metricsAddress): what a worker stopped by SIGTERM reads "
        "to wait until its segment holds nothing"))


# The master's HTTP views of its segments (on store.metricsAddress), read by the operator's drain verdict and by a
# worker stopping on SIGTERM.
SEGMENTS_DETAIL_PATH, MASTER_METRICS_PATH = "/get_segments_detail", "/metrics"


def segment_used(detail: str | None, metrics: str | None, segment: str) -> int | None:
    """Bytes stored in one segment, from the master's two views of it; None (unknown) when the segment detail
    did not answer, as a standby master's does not (503), whose metrics list no segment. A segment being
    unmounted gracefully (a draining worker's) reads 0 in the detail while it still holds outputs; its
    `segment_allocated_bytes` series still counts them, so the larger of the two is taken."""
    from prometheus_client.parser import text_string_to_metric_families

    if not detail:
        return None
    used = 0  # a segment the master no longer lists holds nothing
    for seg in json.loads(detail).get("segments", []):
        if seg.get("segment_name") == segment:
            used = max(used, int(seg.get("allocator_used_bytes", 0)))
    for family in text_string_to_metric_families(metrics or ""):
        for sample in family.samples:
            if sample.name == "segment_allocated_bytes" and sample.labels.get("segment") == segment:
                used = max(used, int(sample.value))
    return used


class EngineLink(BaseModel):
    """The inference engine the operator runs beside this worker for one scorer (the scorer's `engine`), as the
    worker reaches it: the judge is pointed at `url` and `model` (build_scorer), and the worker waits for the engine
    to serve the model before it starts (unready_cause "engine")."""
    model_config = ConfigDict(extra="forbid")
    kind: Literal["vllm", "sglang", "llamacpp"]
    url: str = Field(description="the engine's OpenAI /v1 URL on the pod's loopback")
    model: str = Field(description="the name the engine serves the model under")


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
    processor_path: str | None = None  # default: model_path
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto",
                                                   description="auto: cuda when the process sees a GPU")
    gpus: int = Field(default=0, ge=0, description="GPUs the pod and the Ray actor request")
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    frames_per_forward: int = Field(default=32, ge=1, description="frames per model forward, across outputs")
    weight: float = Field(default=1.0, description="weight of this component in the weighted sum")
    args: dict[str, Any] = Field(default_factory=dict, description="constructor keywords of a custom scorer")
    key: str | None = Field(default=None, description=(
        "the name of this component's score in a mixture's result (miles' reward name: pickscore, hps, ocr, ...); "
        "default the built-in name"))
    required: bool = Field(default=True, description=(
        "a mixture component: False makes a sample it refuses NaN for it (the reason under COMPONENT_ERRORS_KEY) "
        "and `weighted` the rest's, their weights rescaled to the same total; True fails the sample"))
    api_key_env: str | None = Field(default=None, description=(
        "the environment variable holding this scorer's API key (the operator sets it from the pool's "
        "apiKeySecret); the key itself never enters this config"))
    engine: EngineLink | None = Field(default=None, description="the engine the pool hosts for this scorer")

    @property
    def ref(self) -> str:
        return self.name or self.cls or ""

    @property
    def component(self) -> str:
        """The key of this scorer's score in a mixture's result: its key, else the built-in name (else, for a
        single custom scorer, the class name)."""
        return self.key or self.name or (self.cls or "").rpartition(":")[2]


# Ray's own setting (read from the environment by the raylet and the worker's core worker): how long a Ray node
# waits for an unreachable GCS before it exits. Ray's default is 60 s.
RAY_GCS_RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str | None = None
    namespace: str = "rewardpool"
    gcs_reconnect_seconds: int | None = Field(default=None, ge=1, description=(
        "set when the Ray cluster's GCS is fault tolerant (spec.ray.gcsFaultTolerance): a restarted head keeps "
        "the actors' names, so the worker waits this long for an unreachable GCS instead of exiting to rejoin"))


class Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    weight: int = Field(default=1, ge=1, le=100, description="its share of the worker's read slots")
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", description=(
        "hex SHA-256 of its bearer token (the Secret key's value, stripped); None: its Secret is missing, so no "
        "token is this tenant's"))


class Tenants(BaseModel):
    """What the operator sends to TENANTS_PATH: the pool's tenants as they are now."""
    model_config = ConfigDict(extra="forbid")
    tenants: list[Tenant] = Field(default_factory=list)

    @property
    def version(self) -> str:
        """A digest of the set: the worker reports the one it holds (/healthz `tenants`), the operator compares."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    def weights(self) -> dict[str, int]:
        return {t.name: t.weight for t in self.tenants}


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
    tenant_auth: bool = Field(default=False, description=(
        "spec.access lists tenants: HTTP scoring needs a tenant's token, and the worker is Ready once the operator "
        "sent it the tenants (TENANTS_PATH); False: HTTP scoring is open to whoever the network admits, as the Ray "
        "path is"))
    scorer_version: str = Field(default="", description=(
        "the operator's digest of what decides scores (image, scorers, args, model paths, numFrames, dtype, "
        "weights); the worker appends its model files' content digest (scorer_version())"))

    def scorer_label(self) -> str:
        """The `scorer` label of the worker's score metrics: the scorer's name (or class), or the mixture's
        components joined by "+"."""
        parts = self.scorers or [self.scorer]
        return "+".join(c.key or c.name or (c.cls or "custom").rpartition(":")[2] for c in parts)

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


class Agreement(BaseModel):
    """How a shadow worker's scores agree with the serving version's on the same outputs: the running sums
    of the pairs (x: the serving score, y: the shadow's), which add across workers and give the correlation
    and the mean difference without keeping the pairs."""
    model_config = ConfigDict(extra="ignore")
    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    sxy: float = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        self.sx, self.sy = self.sx + x, self.sy + y
        self.sxx, self.syy, self.sxy = self.sxx + x * x, self.syy + y * y, self.sxy + x * y

    def __add__(self, other: "Agreement") -> "Agreement":
        return Agreement(n=self.n + other.n, sx=self.sx + other.sx, sy=self.sy + other.sy,
                         sxx=self.sxx + other.sxx, syy=self.syy + other.syy, sxy=self.sxy + other.sxy)

    @property
    def mean_difference(self) -> float | None:
        """Mean of (shadow - serving) over the pairs."""
        return (self.sy - self.sx) / self.n if self.n else None

    @property
    def correlation(self) -> float | None:
        """Pearson's r of the pairs; None with fewer than two, or when either side gave one score throughout."""
        if self.n < 2:
            return None
        vx, vy = self.n * self.sxx - self.sx ** 2, self.n * self.syy - self.sy ** 2
        if vx <= 1e-12 * max(1.0, self.n * self.sxx) or vy <= 1e-12 * max(1.0, self.n * self.syy):
            return None
        return max(-1.0, min(1.0, (self.n * self.sxy - self.sx * self.sy) / (vx * vy) ** 0.5))


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
    scorer_version: str | None = None  # the version of the scores this worker gives (see scorer_version())
    # Why a live worker is not Ready when the cause is outside it (the operator says so in Degraded):
    # "model" (starting: a scorer's model is missing, empty or does not load; it looks again), "ray" (clients
    # cannot find its actor: the Ray head restarted or its GCS does not answer), "store" (the store master does
    # not answer its probes), "engine" (a hosted judge's engine does not serve its model yet, or its warm-up
    # judgement did not parse, or, once Ready, it stopped answering); None when Ready, starting, draining or
    # live-failing.
    unready_cause: Literal["model", "engine", "ray", "store"] | None = None
    unready_reason: str | None = None
    # Seconds per start-up step, as they end: imports (process start to the entrypoint), network, ray,
    # model_wait, actor (store client, registered buffers, weights, warm-up), registered, total; and the
    # actor's weight_load_seconds, weight_bytes, warmup_seconds, and store_seconds and digest_seconds (the store
    # client with its registered buffers, and the weights' digest, which run beside the weight load).
    startup: dict[str, float] = Field(default_factory=dict)
    # Shadow scoring (SHADOW_ANNOTATION): whether the worker is in shadow, and its agreement with each serving
    # scorer version whose outputs it scored beside it.
    shadow: bool = False
    agreement: dict[str, Agreement] = Field(default_factory=dict)
    tenants: str | None = None  # the version (Tenants.version) of the tenants it holds; None: none received
