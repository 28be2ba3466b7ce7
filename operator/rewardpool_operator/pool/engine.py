"""Desired state of the inference engines a pool hosts for its judges (a scorer's `engine`): one container per
judge in each worker pod, serving the OpenAI API on the pod's loopback only (nothing outside the pod reaches an
engine that has no key), its command from the engine's kind, its memory, CPU and GPUs its own, its weights
mounted read-only from the model source, a RAM-backed /dev/shm, probes that give a loading engine its start-up
budget and restart a hung one, and the tail of its log as its termination message (the pool's EngineFailed).
Pure."""
from __future__ import annotations

import math

from rewardpool_worker.contract import MODELS_ROOT, EngineLink

from ..api.spec import ENGINE_PORT, Engine, Pool

ENGINE_CONTAINER_PREFIX = "engine"
ENGINE_SHM_PREFIX = "engine-shm-"
# The images a kind runs when the pool names none: none of them is pulled on this project's machines (no registry
# is reachable); the tests run llama-cpp-python's server with the rendered command (docs/judges.md).
ENGINE_IMAGES = {"vllm": "vllm/vllm-openai:v0.33.0", "sglang": "lmsysorg/sglang:v0.5.23",
                 "llamacpp": "ghcr.io/abetlen/llama-cpp-python:v0.3.36"}
DEFAULT_CONTEXT = 4096  # llama.cpp's context when the pool sets no maxModelLen (vLLM and SGLang read the model's)
PROBE_PERIOD_SECONDS = 10


def hosted(pool: Pool) -> list[tuple[int, object, Engine]]:
    """(engine index, component, engine) of each scorer the pool hosts an engine for, in the mixture's order."""
    out = []
    for c in pool.spec.components:
        if getattr(c, "engine", None) is not None:
            out.append((len(out), c, c.engine))
    return out


def container_name(index: int) -> str:
    return f"{ENGINE_CONTAINER_PREFIX}-{index}"


def port(index: int) -> int:
    return ENGINE_PORT + index


def served_name(component, engine: Engine) -> str:
    return engine.servedModelName or component.component


def model_dir(component) -> str:
    """Where the engine's weights are mounted in its container: the component's models folder, as
    builders.model_mount_path names it."""
    return f"{MODELS_ROOT}/{component.component}"


def link(pool: Pool, component) -> EngineLink | None:
    """How the worker reaches the engine of `component` (None when it has none)."""
    for i, c, e in hosted(pool):
        if c is component:
            return EngineLink(kind=e.kind, url=f"http://127.0.0.1:{port(i)}/v1", model=served_name(c, e))
    return None


def tensor_parallel(engine: Engine) -> int:
    return engine.tensorParallel or max(engine.gpus, 1)


def command(engine: Engine, component, index: int) -> list[str]:
    """The engine's command line: the model, the name it is served under, loopback and the port, its parallelism
    and memory settings as the kind spells them, then the pool's own `args`."""
    where, name, p = model_dir(component), served_name(component, engine), str(port(index))
    tp, n, util = str(tensor_parallel(engine)), engine.maxModelLen, engine.gpuMemoryUtilization
    if engine.kind == "vllm":
        cmd = ["vllm", "serve", where, "--served-model-name", name, "--host", "127.0.0.1", "--port", p,
               "--tensor-parallel-size", tp]
        cmd += ["--max-model-len", str(n)] if n else []
        cmd += ["--gpu-memory-utilization", str(util)] if util else []
    elif engine.kind == "sglang":
        cmd = ["python3", "-m", "sglang.launch_server", "--model-path", where, "--served-model-name", name,
               "--host", "127.0.0.1", "--port", p, "--tp-size", tp]
        cmd += ["--context-length", str(n)] if n else []
        cmd += ["--mem-fraction-static", str(util)] if util else []
    else:  # llamacpp: llama-cpp-python's OpenAI server, one GGUF file, every layer on the GPU when it has one
        cmd = ["python3", "-m", "llama_cpp.server", "--model", f"{where}/{engine.modelFile}", "--model_alias", name,
               "--host", "127.0.0.1", "--port", p, "--n_ctx", str(n or DEFAULT_CONTEXT),
               "--n_gpu_layers", "-1" if engine.gpus else "0"]
    return cmd + list(engine.args)


def probe(index: int, failures: int) -> dict:
    """An exec probe of GET /v1/models on loopback (the kubelet's HTTP probes go to the pod's IP, where the engine
    does not listen; every kind's image has python3). vLLM's /health answers before the model is served, and
    llama.cpp's server has none: the model list is what every kind answers once it can serve."""
    check = ("import urllib.request; urllib.request.urlopen("
             f"'http://127.0.0.1:{port(index)}/v1/models', timeout=4).read()")
    return {"exec": {"command": ["python3", "-c", check]}, "periodSeconds": PROBE_PERIOD_SECONDS,
            "timeoutSeconds": 5, "failureThreshold": failures}


def resources(pool: Pool, engine: Engine) -> dict:
    gpu = pool.spec.placement.gpuResource
    requests = {"memory": str(engine.memory), "cpu": str(engine.cpu)}
    limits = {"memory": str(engine.memory)}  # no CPU limit: a loading engine's throttling only slows its start
    if engine.gpus:
        requests[gpu] = limits[gpu] = str(engine.gpus)
    return {"requests": requests, "limits": limits}


def containers(pool: Pool, mounts: dict[str, list[dict]]) -> list[dict]:
    """The engine containers of a worker pod; `mounts`: each component's model mounts (builders.model_mounts)."""
    out = []
    for i, c, e in hosted(pool):
        out.append({
            "name": container_name(i), "image": e.image or ENGINE_IMAGES[e.kind],
            "command": command(e, c, i),
            # offline: the weights are the model source's, never a download from a hub at start
            "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "HF_HOME", "value": "/tmp/hf"}],
            "resources": resources(pool, e),
            "startupProbe": probe(i, math.ceil(e.startupSeconds / PROBE_PERIOD_SECONDS)),
            "livenessProbe": probe(i, 6),
            # its last words (the tail of its log when it fails) in its status: the pool's EngineFailed quotes them
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "securityContext": {"privileged": False, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [*mounts.get(c.component, []),
                             {"name": f"{ENGINE_SHM_PREFIX}{i}", "mountPath": "/dev/shm"}],
        })
    return out


def volumes(pool: Pool) -> list[dict]:
    """Each engine's /dev/shm: RAM-backed (NCCL between tensor-parallel ranks, the engine's worker processes),
    bounded by shmSize, which its memory limit counts."""
    return [{"name": f"{ENGINE_SHM_PREFIX}{i}", "emptyDir": {"medium": "Memory", "sizeLimit": str(e.shmSize)}}
            for i, _, e in hosted(pool)]


def identity(engine: Engine, component) -> dict:
    """What of an engine decides its judgements (part of the scorer version): its kind, image, served model, the
    command it runs (the model path, context and args); not its memory, CPU, GPUs or start-up budget."""
    return {"kind": engine.kind, "image": engine.image or ENGINE_IMAGES[engine.kind],
            "modelFile": engine.modelFile, "args": list(engine.args), "maxModelLen": engine.maxModelLen,
            "served": served_name(component, engine)}
