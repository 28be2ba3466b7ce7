"""The RewardPool spec as typed Python. Defaults mirror the CRD's, so `rewardpool render` on a plain YAML
file sees what the API server would store."""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardpool_worker.contract import API_VERSION, KIND, POOL_LABEL, SECRET_ARGS

HASH_LABEL = "rewardpool.io/template-hash"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY = {"app.kubernetes.io/managed-by": "rewardpool-operator"}
DEFAULT_RDMA_LABEL = "feature.node.kubernetes.io/rdma.capable"
WORKER_CONTAINER = "worker"  # a podTemplate container of this name merges into the worker container
Quantity = int | str


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SecretKey(_M):
    """A key of a Secret in the pool's namespace (a scorer's API key)."""
    name: str = Field(min_length=1)
    key: str = "api-key"


class PvcModel(_M):
    """A PersistentVolumeClaim in the pool's namespace holding the weights (mounted read-only)."""
    claimName: str = Field(min_length=1)
    subPath: str = ""


class ImageModel(_M):
    """The weights packaged as an OCI image (files in it), mounted read-only as an `image` volume: no download step."""
    reference: str = Field(min_length=1)
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] | None = None


class CacheModel(_M):
    """A RewardModelCache: the copy its node agent keeps on the nodes' disks, mounted read-only from the node the
    pod runs on. Required: pods go only to nodes whose copy is Ready; Preferred: there first, elsewhere the worker
    waits (ModelUnavailable) until the node's copy arrives."""
    name: str = Field(min_length=1, max_length=63)
    subPath: str = ""
    placement: Literal["Required", "Preferred"] = "Required"


class ModelSource(_M):
    """Where a scorer's weights come from; the operator mounts it at MODELS_ROOT/<component> and points the scorer
    there (`modelPath` is the plain-path form: a directory the user mounts)."""
    pvc: PvcModel | None = None
    image: ImageModel | None = None
    cache: CacheModel | None = None

    @model_validator(mode="after")
    def _one(self):
        if sum(x is not None for x in (self.pvc, self.image, self.cache)) != 1:
            raise ValueError("scorer.model names exactly one source: pvc, image or cache")
        return self

    @property
    def sub_path(self) -> str:
        if self.pvc is not None:
            return self.pvc.subPath.strip("/")
        return self.cache.subPath.strip("/") if self.cache is not None else ""

    @property
    def identity(self) -> dict:
        """What decides the weights a scorer loads (its version): the claim and path, the cache and path, or the
        image reference."""
        if self.pvc is not None:
            return {"pvc": self.pvc.claimName, "subPath": self.sub_path}
        if self.cache is not None:
            return {"cache": self.cache.name, "subPath": self.sub_path}
        return {"image": self.image.reference}


ENGINE_PORT = 8100  # the first hosted engine's port on the pod's loopback; a mixture's next ones follow it


class Engine(_M):
    """An inference engine the pool runs beside each worker for this scorer (a judge): a container in the worker
    pod serving on the pod's loopback, with its weights from a model source, its memory and GPUs its own. The
    scorer is pointed at it (no URL to write); its kind, image, model and args are part of the scorer version."""
    kind: Literal["vllm", "sglang", "llamacpp"]
    image: str | None = Field(default=None, min_length=1)  # default: ENGINE_IMAGES[kind]
    model: ModelSource
    # llamacpp serves one GGUF file: its path under the model source
    modelFile: str | None = Field(default=None, min_length=1, pattern=r"^[^/].*$")
    servedModelName: str | None = Field(default=None, min_length=1, max_length=253)  # default: the component
    args: list[str] = Field(default_factory=list, max_length=64)  # more flags for the engine, after ours
    gpus: int = Field(default=0, ge=0, le=16)
    tensorParallel: int | None = Field(default=None, ge=1, le=16)  # default: gpus (1 without)
    maxModelLen: int | None = Field(default=None, ge=128)
    gpuMemoryUtilization: float | None = Field(default=None, gt=0, le=1)
    memory: Quantity = "8Gi"  # the engine container's memory (request = limit)
    cpu: Quantity = "2"
    shmSize: Quantity = "1Gi"  # its /dev/shm (NCCL between tensor-parallel ranks), counted in its memory
    startupSeconds: int = Field(default=1800, ge=10, le=86400)  # weights load and warm-up before it must answer

    @model_validator(mode="after")
    def _fits(self):
        if self.kind == "llamacpp" and not self.modelFile:
            raise ValueError("scorer.engine.modelFile: llamacpp serves one GGUF file: name it under the model source")
        if self.tensorParallel is not None and self.gpus and self.tensorParallel > self.gpus:
            raise ValueError(f"scorer.engine.tensorParallel {self.tensorParallel} is more than its {self.gpus} GPUs")
        return self


class _ScorerFields(_M):
    """What names and loads one scorer: shared by `spec.scorer` and the entries of `spec.scorers`."""
    name: str | None = None
    cls: str | None = Field(default=None, alias="class")
    args: dict[str, Any] = Field(default_factory=dict)
    numFrames: int | None = Field(default=None, ge=1)
    modelPath: str | None = None
    model: ModelSource | None = None
    processorPath: str | None = None
    modelMemory: Quantity | None = None
    # its own, never inherited by a mixture's components (each names its endpoint's key)
    apiKeySecret: SecretKey | None = None
    # its own too: the engine the pool hosts for this judge
    engine: Engine | None = None

    @model_validator(mode="after")
    def _path_or_source(self):
        if self.model is not None and self.modelPath:
            raise ValueError("set scorer.model (the operator mounts it) or scorer.modelPath (a directory you mount), "
                             "not both")
        return self

    @model_validator(mode="after")
    def _engine_for_a_judge(self):
        if self.engine is None:
            return self
        if self.name is not None and self.name != "openai-judge":
            raise ValueError(f"scorer.engine: {self.name} is not a judge; an engine serves openai-judge (or a custom "
                             "class that takes base_url, model and hosted)")
        if {"base_url", "model"} & set(self.args):
            raise ValueError("scorer.engine: the pool points the judge at its engine: drop base_url and model from "
                             "args")
        if self.model is not None or self.modelPath:
            raise ValueError("scorer.engine: the engine's weights go in scorer.engine.model, not scorer.model")
        return self

    @model_validator(mode="after")
    def _no_secret_in_args(self):
        secret = sorted(set(self.args) & SECRET_ARGS)
        if secret:
            raise ValueError(f"args {secret}: a key never goes in the spec (anyone who can read the pool sees it); "
                             "put it in a Secret and name it in apiKeySecret")
        return self

    @property
    def component(self) -> str:
        """The key of this scorer's score in a mixture's result: the built-in name or the class name."""
        return self.name or (self.cls or "").rpartition(":")[2]


class ScorerComponent(_ScorerFields):
    """One scorer of a weighted mixture (`spec.scorers`). Unset fields inherit from `spec.scorer`."""
    weight: float = 1.0
    framesPerForward: int | None = Field(default=None, ge=1)
    key: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]*$", max_length=63)
    required: bool = True

    @model_validator(mode="after")
    def _one_of(self):
        if (self.name is None) == (self.cls is None):
            raise ValueError("set exactly one of name (a built-in scorer) or class in each spec.scorers entry")
        if self.cls is not None and self.key is None:
            raise ValueError(f"spec.scorers entry {self.cls}: a custom class needs key, the name its score is "
                             "reported under (miles' reward name, e.g. ocr)")
        if self.key == "weighted":
            raise ValueError("spec.scorers key weighted is the mixture's sum: name the component otherwise")
        return self

    @property
    def component(self) -> str:
        return self.key or self.name or ""


class Scorer(_ScorerFields):
    """The single scorer (name or class set; PoolSpec checks which form), or, with `spec.scorers`, what every
    component shares."""
    batchSize: int = Field(default=8, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    gpus: int = Field(default=0, ge=0)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    framesPerForward: int = Field(default=32, ge=1)


class Store(_M):
    master: str
    metricsAddress: str | None = None
    metadataServer: str = "P2PHANDSHAKE"
    protocol: Literal["rdma", "tcp"] = "rdma"
    devices: list[str] = Field(default_factory=list)
    segmentSize: Quantity = "auto"
    localBufferSize: Quantity = "512Mi"
    maxRegistrationSize: Quantity = "64Gi"


class Sizing(_M):
    samplesPerRollout: int = Field(ge=1)
    outputBytesPerSample: Quantity
    latentBytesPerSample: Quantity = 0
    latentRollouts: int = Field(default=2, ge=0)
    highWatermark: float = Field(default=0.9, gt=0, le=1)
    framesPerSample: int | None = Field(default=None, ge=1, le=100000)
    outputShape: list[int] | None = Field(default=None, min_length=3, max_length=4)

    @property
    def frames(self) -> int | None:
        """Frames of one stored video: framesPerSample, else F of a (C, F, H, W) outputShape."""
        if self.framesPerSample is not None:
            return self.framesPerSample
        return self.outputShape[1] if self.outputShape and len(self.outputShape) == 4 else None


class RdmaResource(_M):
    name: str = "rdma/rdma_shared_device_a"
    count: int = Field(default=1, ge=0)


class Placement(_M):
    rdmaNodeSelector: dict[str, str] = Field(default_factory=lambda: {DEFAULT_RDMA_LABEL: "true"})
    rdmaResource: RdmaResource = Field(default_factory=RdmaResource)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    gpuResource: str = "nvidia.com/gpu"


class Ipvlan(_M):
    master: str
    mode: Literal["l2", "l3", "l3s"] = "l2"
    mtu: int | None = None
    ipam: dict[str, Any]


class Network(_M):
    ipvlan: Ipvlan | None = None
    attachment: str | None = None


class GcsFaultTolerance(_M):
    reconnectTimeoutSeconds: int = Field(default=600, ge=10, le=86400)


class Ray(_M):
    address: str | None = None
    namespace: str = "rewardpool"
    gcsFaultTolerance: GcsFaultTolerance | None = None


class ScaleUp(_M):
    percent: int = Field(default=100, ge=0)
    pods: int = Field(default=4, ge=0)
    periodSeconds: int = Field(default=15, ge=1)


class Autoscaling(_M):
    enabled: bool = False
    minReplicas: int = 1
    maxReplicas: int = 8
    targetQueueDepth: int = 4
    scaleDownStabilizationSeconds: int = 300
    scaleUp: ScaleUp = Field(default_factory=ScaleUp)


class PodTemplate(_M):
    metadata: dict[str, dict[str, str]] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict)


IntOrPercent = int | str  # a count, or a percentage of replicas ("25%"), as a Deployment's rolling update takes


class Rollout(_M):
    # As a Deployment's rollingUpdate: workers of the new template started beyond replicas (a percentage rounds
    # up), and Ready workers the roll may take out of service at once (rounds down). Both 0 is refused; both
    # resolving to 0 (a small pool) lets one go, as a Deployment does. The defaults keep a 1-replica pool serving.
    maxSurge: IntOrPercent = "25%"
    maxUnavailable: IntOrPercent = "25%"
    # Hold a roll's removal of a scorer version's last Ready worker while groups are pinned to it, up to this
    # long after the roll began; None: no hold (pinned groups move to the new version when theirs is gone).
    maxVersionSkewSeconds: int | None = Field(default=None, ge=0)
    # A roll to another scorer version first runs one worker of it in shadow: it scores a sample of the calls'
    # outputs beside the serving version, and takes traffic once shadowSamples pairs agree as the status shows
    # (and at least as well as shadowMinCorrelation, when set).
    shadow: bool = False
    shadowSamples: int = Field(default=200, ge=1)
    shadowMinCorrelation: float | None = Field(default=None, ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _budget(self):
        for name in ("maxSurge", "maxUnavailable"):
            v = getattr(self, name)
            if isinstance(v, str) and not re.fullmatch(r"[0-9]{1,3}%", v):
                raise ValueError(f"rollout.{name} must be a count (2) or a percentage of replicas (25%), not {v!r}")
            if isinstance(v, int) and v < 0:
                raise ValueError(f"rollout.{name} must not be negative")
        if str(self.maxSurge).rstrip("%") == "0" and str(self.maxUnavailable).rstrip("%") == "0":
            raise ValueError("rollout.maxSurge and rollout.maxUnavailable cannot both be 0: a roll could never "
                             "start a new worker nor stop an old one")
        return self


class TokenSecret(_M):
    """A key of a Secret in the pool's namespace holding a tenant's bearer token."""
    name: str = Field(min_length=1, max_length=253)
    key: str = Field(default="token", min_length=1, max_length=253)


class Tenant(_M):
    name: str = Field(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    weight: int = Field(default=1, ge=1, le=100)
    tokenSecret: TokenSecret


class Access(_M):
    # Who may score over HTTP, each with a token and a share of the workers; empty: HTTP scoring is open to
    # whatever the network admits.
    tenants: list[Tenant] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _unique(self):
        names = [t.name for t in self.tenants]
        if len(set(names)) != len(names):
            raise ValueError(f"access.tenants names must be unique: {names}")
        return self


class PoolSpec(_M):
    replicas: int = Field(default=1, ge=0)
    image: str
    scorer: Scorer = Field(default_factory=Scorer)
    scorers: list[ScorerComponent] | None = None
    store: Store
    sizing: Sizing | None = None
    placement: Placement = Field(default_factory=Placement)
    network: Network = Field(default_factory=Network)
    ray: Ray = Field(default_factory=Ray)
    autoscaling: Autoscaling | None = None
    drainTimeoutSeconds: int = Field(default=600, ge=0)
    progressDeadlineSeconds: int = Field(default=600, ge=1)
    rollout: Rollout = Field(default_factory=Rollout)
    access: Access = Field(default_factory=Access)
    resources: dict[str, Any] = Field(default_factory=dict)
    podTemplate: PodTemplate = Field(default_factory=PodTemplate)
    # The Pod Security level every worker pod is held to (plus IPC_LOCK on the worker): podsecurity.py.
    podSecurity: Literal["baseline", "restricted"] = "baseline"

    @model_validator(mode="after")
    def _scorer_form(self):
        named = self.scorer.name is not None or self.scorer.cls is not None
        if self.scorers:
            if named:
                raise ValueError("with spec.scorers, spec.scorer holds only shared settings: drop its name/class")
            if self.scorer.apiKeySecret is not None:
                raise ValueError("with spec.scorers, name apiKeySecret on the component that calls the API (it is "
                                 "not shared)")
        elif (self.scorer.name is None) == (self.scorer.cls is None):
            raise ValueError("set exactly one of scorer.name (a built-in scorer) or scorer.class")
        return self

    @property
    def components(self) -> list[ScorerComponent | Scorer]:
        """The scorers every output goes through: `scorers`, or `scorer` alone."""
        return list(self.scorers) if self.scorers else [self.scorer]


class Pool(BaseModel):
    """What the builders need of a RewardPool object: identity plus parsed spec."""
    name: str
    namespace: str
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    spec: PoolSpec

    @classmethod
    def from_object(cls, obj: dict) -> "Pool":
        meta = obj.get("metadata", {})
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default", uid=meta.get("uid", ""),
                   generation=meta.get("generation", 0), resource_version=meta.get("resourceVersion", ""),
                   spec=PoolSpec.model_validate(obj.get("spec") or {}))

    @property
    def selector(self) -> dict[str, str]:
        return {POOL_LABEL: self.name}

    @property
    def selector_string(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.selector.items())

    def owner_reference(self) -> dict:
        return {"apiVersion": API_VERSION, "kind": KIND, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}
