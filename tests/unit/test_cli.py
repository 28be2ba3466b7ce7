import json
from pathlib import Path

import yaml

from rewardpool_operator.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pickscore-pool.yaml"


def test_render_prints_every_object_from_the_builders(capsys):
    assert main(["render", "-f", str(EXAMPLE), "--namespace", "rl"]) == 0
    objs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [o["kind"] for o in objs]
    assert kinds == ["NetworkAttachmentDefinition", "Service", "PodDisruptionBudget", "Pod", "Pod"]
    assert all(o["metadata"]["namespace"] == "rl" for o in objs)
    assert json.loads(objs[0]["spec"]["config"])["master"] == "bond0"


def test_size_prints_the_sizing_as_json(capsys):
    assert main(["size", "--samples-per-rollout", "64", "--output-bytes", "269M", "--replicas", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "auto" and out["required_bytes"] == 64 * 269_000_000
    assert out["per_worker_bytes"] * 2 >= out["required_bytes"] / 0.9
    assert main(["size", "-f", str(EXAMPLE)]) == 0
    assert json.loads(capsys.readouterr().out)["required_bytes"] == 64 * 269_000_000 + 2 * 64 * 10_000_000
