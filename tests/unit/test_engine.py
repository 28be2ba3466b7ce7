"""The engine containers a pool renders for its hosted judges (pool/engine.py, through builders.pod_template): the
command each kind is started with, GPUs and tensor parallelism, memory and /dev/shm, probes on loopback, the
termination message, the weights in the engine's container and not the worker's, the judge pointed at its engine,
what of an engine is the scorer version, and what admission refuses."""
from __future__ import annotations

import pydantic
import pytest

from rewardpool_operator.pool import builders, engine, sizing, validate
from rewardpool_worker.contract import WorkerConfig
from tests.factories import pool

PVC = {"pvc": {"claimName": "qwen-vl", "subPath": "7b"}}


def judge(**eng):
    return {"name": "openai-judge", "args": {"form": "yes-probability"},
            "engine": {"kind": "vllm", "model": PVC, **eng}}


def render(p):
    s = sizing.compute(p.spec)
    pod = builders.pod_template(p, s)
    return pod, {c["name"]: c for c in pod["spec"]["containers"]}, WorkerConfig.from_json(
        {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}["REWARDPOOL_WORKER_CONFIG"])


@pytest.mark.parametrize("eng, command", [
    ({"gpus": 2, "maxModelLen": 8192, "gpuMemoryUtilization": 0.85, "args": ["--enable-prefix-caching"]},
     ["vllm", "serve", "/models/openai-judge", "--served-model-name", "openai-judge", "--host", "127.0.0.1",
      "--port", "8100", "--tensor-parallel-size", "2", "--max-model-len", "8192", "--gpu-memory-utilization", "0.85",
      "--enable-prefix-caching"]),
    ({"gpus": 1}, ["vllm", "serve", "/models/openai-judge", "--served-model-name", "openai-judge", "--host",
                   "127.0.0.1", "--port", "8100", "--tensor-parallel-size", "1"]),
    ({"kind": "sglang", "gpus": 4, "tensorParallel": 2, "maxModelLen": 4096, "gpuMemoryUtilization": 0.8,
      "servedModelName": "qwen"},
     ["python3", "-m", "sglang.launch_server", "--model-path", "/models/openai-judge", "--served-model-name", "qwen",
      "--host", "127.0.0.1", "--port", "8100", "--tp-size", "2", "--context-length", "4096",
      "--mem-fraction-static", "0.8"]),
    ({"kind": "llamacpp", "modelFile": "judge-q4.gguf"},
     ["python3", "-m", "llama_cpp.server", "--model", "/models/openai-judge/judge-q4.gguf", "--model_alias",
      "openai-judge", "--host", "127.0.0.1", "--port", "8100", "--n_ctx", "4096", "--n_gpu_layers", "0"]),
    ({"kind": "llamacpp", "modelFile": "j.gguf", "gpus": 1, "maxModelLen": 16384},
     ["python3", "-m", "llama_cpp.server", "--model", "/models/openai-judge/j.gguf", "--model_alias", "openai-judge",
      "--host", "127.0.0.1", "--port", "8100", "--n_ctx", "16384", "--n_gpu_layers", "-1"]),
])
def test_each_kind_is_started_on_loopback_with_its_own_flags(eng, command):
    _, containers, _ = render(pool(scorer=judge(**eng)))
    assert containers["engine-0"]["command"] == command
    assert containers["engine-0"]["image"] == engine.ENGINE_IMAGES[eng.get("kind", "vllm")]


def test_the_engine_container_has_its_own_resources_weights_shm_probes_and_last_words():
    p = pool(scorer=judge(gpus=2, memory="96Gi", cpu="8", shmSize="16Gi", startupSeconds=1200,
                          image="registry.example/vllm:1"))
    pod, containers, cfg = render(p)
    assert list(containers) == ["worker", "engine-0"]
    e, w = containers["engine-0"], containers["worker"]
    assert e["image"] == "registry.example/vllm:1"
    assert e["resources"] == {"requests": {"memory": "96Gi", "cpu": "8", "nvidia.com/gpu": "2"},
                              "limits": {"memory": "96Gi", "nvidia.com/gpu": "2"}}
    assert "nvidia.com/gpu" not in w["resources"]["limits"]  # the judge itself needs no GPU
    # the weights are mounted in the engine's container, read-only, and not in the worker's
    (model,) = [m for m in e["volumeMounts"] if m["mountPath"] == "/models/openai-judge"]
    assert model["readOnly"] is True and model["subPath"] == "7b"
    assert not any(m["mountPath"].startswith("/models") for m in w["volumeMounts"])
    vol = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert vol[model["name"]]["persistentVolumeClaim"] == {"claimName": "qwen-vl", "readOnly": True}
    (shm,) = [m for m in e["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert vol[shm["name"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    # probed on loopback (the kubelet's HTTP probes reach the pod's IP, where the engine does not listen)
    probe = e["startupProbe"]["exec"]["command"]
    assert probe[:2] == ["python3", "-c"] and "'http://127.0.0.1:8100/v1/models'" in probe[2]
    assert e["startupProbe"]["failureThreshold"] * e["startupProbe"]["periodSeconds"] == 1200
    assert e["livenessProbe"]["exec"] == e["startupProbe"]["exec"] and e["livenessProbe"]["failureThreshold"] == 6
    assert "ports" not in e and "readinessProbe" not in e  # nothing outside the pod reaches it
    assert e["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert e["securityContext"] == {"privileged": False, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in e["env"]
    # the judge is pointed at its engine, loads no weights itself
    assert cfg.scorer.engine.model_dump() == {"kind": "vllm", "url": "http://127.0.0.1:8100/v1",
                                              "model": "openai-judge"}
    assert cfg.scorer.model_path is None and "base_url" not in cfg.scorer.args
    for level in ("baseline", "restricted"):
        q = pool(scorer=judge(gpus=1), podSecurity=level)
        assert validate.pod_security(q.spec, render(q)[0]) == [], level


def test_a_mixture_runs_one_engine_per_judge_each_on_its_own_port():
    p = pool(scorer={"batchSize": 4}, scorers=[
        {"name": "pickscore", "modelPath": "/models/clip", "weight": 1.0},
        {"name": "openai-judge", "key": "vlm", "engine": {"kind": "vllm", "model": PVC, "gpus": 1}},
        {"name": "openai-judge", "key": "grader", "args": {"form": "yes-probability"},
         "engine": {"kind": "sglang", "model": {"image": {"reference": "registry.example/grader:1"}}}}])
    pod, containers, cfg = render(p)
    assert list(containers) == ["worker", "engine-0", "engine-1"]
    assert containers["engine-0"]["command"][2] == "/models/vlm" and "8100" in containers["engine-0"]["command"]
    assert containers["engine-1"]["command"][4] == "/models/grader" and "8101" in containers["engine-1"]["command"]
    assert [c.engine.url if c.engine else None for c in cfg.scorers] == [
        None, "http://127.0.0.1:8100/v1", "http://127.0.0.1:8101/v1"]
    assert [c.engine.model if c.engine else None for c in cfg.scorers] == [None, "vlm", "grader"]
    assert cfg.scorers[0].model_path == "/models/clip"


@pytest.mark.parametrize("change, moves, rolls", [
    ({"kind": "sglang"}, True, True),
    ({"image": "registry.example/vllm:2"}, True, True),
    ({"model": {"pvc": {"claimName": "qwen-vl", "subPath": "72b"}}}, True, True),
    ({"args": ["--max-num-seqs", "64"]}, True, True),
    ({"maxModelLen": 2048}, True, True),
    ({"servedModelName": "judge"}, True, True),
    ({"gpus": 4}, False, True),  # speed, not judgements: a roll, the same version
    ({"memory": "64Gi"}, False, True),
    ({"startupSeconds": 600}, False, True),
])
def test_what_of_an_engine_is_the_scorer_version(change, moves, rolls):
    base, changed = pool(scorer=judge()), pool(scorer=judge(**change))
    assert (builders.scorer_digest(changed) != builders.scorer_digest(base)) is moves
    s0, s1 = sizing.compute(base.spec), sizing.compute(changed.spec)
    assert (builders.worker_identity(changed, s1) != builders.worker_identity(base, s0)) is rolls


@pytest.mark.parametrize("scorer, says", [
    ({"name": "pickscore", "engine": {"kind": "vllm", "model": PVC}}, "pickscore is not a judge"),
    ({"name": "openai-judge", "args": {"base_url": "http://x/v1"}, "engine": {"kind": "vllm", "model": PVC}},
     "drop base_url and model from args"),
    ({"name": "openai-judge", "model": PVC, "engine": {"kind": "vllm", "model": PVC}},
     "the engine's weights go in scorer.engine.model"),
    ({"name": "openai-judge", "engine": {"kind": "llamacpp", "model": PVC}}, "llamacpp serves one GGUF file"),
    ({"name": "openai-judge", "engine": {"kind": "vllm", "model": PVC, "gpus": 2, "tensorParallel": 4}},
     "tensorParallel 4 is more than its 2 GPUs"),
])
def test_an_engine_the_pool_cannot_run_is_refused_with_why(scorer, says):
    with pytest.raises(pydantic.ValidationError) as e:
        pool(scorer=scorer)
    assert says in str(e.value)


def test_an_engine_that_exited_is_engine_failed_with_its_last_words_until_it_is_ready_again():
    """Container statuses as the kubelet writes them: an engine OOM-killed and back-off restarting, one whose
    process exited with its log's tail as termination message (FallbackToLogsOnError), one loading again after a
    crash, one that never failed, one Ready again after a crash; and an engine image the node cannot pull, which
    stays a pull problem."""
    from rewardpool_operator.pool.podstatus import container_problems

    def pod(name, state, last=None, ready=False, restarts=1, image="vllm/vllm-openai:v0.33.0"):
        engine = {"name": "engine-0", "image": image, "state": state, "ready": ready, "restartCount": restarts,
                  **({"lastState": {"terminated": last}} if last else {})}
        worker = {"name": "worker", "image": "w:1", "state": {"running": {}}, "ready": False, "restartCount": 0}
        return {"metadata": {"name": name}, "status": {"containerStatuses": [worker, engine]}}
    backoff = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"}}
    oom = {"reason": "OOMKilled", "exitCode": 137}
    words = ("INFO loading weights\n" * 50) + "ValueError: The model's max seq len (32768) is larger than the " \
        "maximum number of tokens that can be stored in KV cache (9000)."
    error = {"reason": "Error", "exitCode": 1, "message": words}
    probs = container_problems([
        pod("a", backoff, oom, restarts=3), pod("b", {"terminated": error}), pod("c", {"running": {}}, error),
        pod("d", {"running": {}}, restarts=0), pod("e", {"running": {}}, oom, ready=True),
        pod("f", {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}, restarts=0, image="bad:1")])
    by = {p.reason: p.message for p in probs}
    assert set(by) == {"EngineFailed", "WorkerImagePullFailed"}
    assert by["EngineFailed"].startswith("3 judge engine(s) exited: a: engine-0 OOMKilled (exit code 137, restarts 3)")
    assert "b: engine-0 Error (exit code 1, restarts 1): " in by["EngineFailed"]
    assert by["EngineFailed"].endswith("maximum number of tokens that can be stored in KV cache (9000).")
    assert len(by["EngineFailed"]) < 600  # its last words, not its whole log
    assert "f (image bad:1)" in by["WorkerImagePullFailed"]
    assert not any(p.blocking for p in probs)
