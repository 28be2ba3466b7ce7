import json
from pathlib import Path

import yaml

from rewardpool_operator.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pickscore-pool.yaml"


def test_render_prints_every_object_from_the_builders(capsys):
    assert main(["render", "-f", str(EXAMPLE), "--namespace", "rl"]) == 0
    objs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [o["kind"] for o in objs]
    assert kinds == ["NetworkAttachmentDefinition", "Service", "Service", "PodDisruptionBudget", "Pod", "Pod"]
    assert all(o["metadata"]["namespace"] == "rl" for o in objs)
    assert json.loads(objs[0]["spec"]["config"])["master"] == "bond0"


def test_size_prints_the_sizing_as_json(capsys):
    assert main(["size", "--samples-per-rollout", "64", "--output-bytes", "269M", "--replicas", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "auto" and out["required_bytes"] == 64 * 269_000_000
    assert out["per_worker_bytes"] * 2 >= out["required_bytes"] / 0.9
    assert main(["size", "-f", str(EXAMPLE)]) == 0
    assert json.loads(capsys.readouterr().out)["required_bytes"] == 64 * 269_000_000 + 2 * 64 * 10_000_000


def test_render_a_gpu_mixture_pool(capsys):
    from rewardpool_worker.contract import ENV_VAR, WorkerConfig

    gpu = EXAMPLE.parent / "pickscore-ocr-gpu-pool.yaml"
    assert main(["render", "-f", str(gpu), "--namespace", "rl"]) == 0
    out = capsys.readouterr()
    assert "#" not in out.err  # no problem reported
    pod = [o for o in yaml.safe_load_all(out.out) if o["kind"] == "Pod"][0]
    (c,) = pod["spec"]["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert c["resources"]["requests"]["cpu"] == c["resources"]["limits"]["cpu"] == "16"
    assert c["resources"]["requests"]["memory"] == c["resources"]["limits"]["memory"]
    cfg = WorkerConfig.from_json(next(e["value"] for e in c["env"] if e["name"] == ENV_VAR))
    assert [(s.component, s.weight) for s in cfg.scorers] == [("pickscore", 0.7), ("ocr", 0.3)]
    assert cfg.scorer.gpus == 1 and cfg.scorers[1].args == {"lang": "en"}
    assert main(["size", "-f", str(gpu)]) == 0
    size = json.loads(capsys.readouterr().out)
    assert size["gpus"] == 1 and size["model_bytes"] == 6 * 2**30 and "GPU: 1 x nvidia.com/gpu" in size["memory_formula"]


def test_render_of_a_blocked_pool_prints_its_findings_renders_no_pod_and_fails(tmp_path, capsys):
    pool = yaml.safe_load(EXAMPLE.read_text())
    pool["spec"]["podTemplate"] = {"spec": {"containers": [
        {"name": "side", "image": "busybox", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(pool))
    assert main(["render", "-f", str(bad), "--namespace", "rl"]) == 1
    out = capsys.readouterr()
    kinds = [o["kind"] for o in yaml.safe_load_all(out.out)]
    assert "Pod" not in kinds and "Service" in kinds  # what the operator would create for it: no workers
    assert "ForbiddenPodSetting (blocking)" in out.err and 'container "side"' in out.err
    assert "seccompProfile.type='Unconfined'" in out.err and "no worker pods rendered for pickscore" in out.err
