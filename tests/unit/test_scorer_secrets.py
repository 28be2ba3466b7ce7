"""A scorer's API key: named as a Secret in the spec, rendered as a secretKeyRef variable of the worker container,
read by the worker when it builds the scorer; never in args, the worker config or the pod spec's values."""
from __future__ import annotations

import json

import pytest

from rewardpool_operator.pool import builders, sizing
from rewardpool_worker.contract import ENV_VAR, ScorerConfig, WorkerConfig, api_key_env
from rewardpool_worker.scorers import build_scorer
from tests.factories import pool

JUDGE = {"name": "openai-judge", "args": {"base_url": "http://judge:8000/v1", "model": "qwen2.5-vl"}}


def rendered(p):
    pod = builders.pod_template(p, sizing.compute(p.spec))
    c = next(c for c in pod["spec"]["containers"] if c["name"] == "worker")
    env = {e["name"]: e for e in c["env"]}
    return env, WorkerConfig.from_json(env[ENV_VAR]["value"])


def test_the_single_scorers_key_is_a_secret_key_ref_and_the_config_names_only_the_variable():
    env, cfg = rendered(pool(scorer={**JUDGE, "apiKeySecret": {"name": "judge-key"}}))
    assert env[api_key_env(0)] == {"name": "REWARDPOOL_SCORER_API_KEY_0",
                                   "valueFrom": {"secretKeyRef": {"name": "judge-key", "key": "api-key"}}}
    assert cfg.scorer.api_key_env == "REWARDPOOL_SCORER_API_KEY_0"
    assert "value" not in env[api_key_env(0)]


def test_each_mixture_component_names_its_own_key_and_none_is_inherited():
    p = pool(scorer={"batchSize": 4}, scorers=[
        {"name": "mean-intensity"}, {**JUDGE, "apiKeySecret": {"name": "judge-key", "key": "token"}}])
    env, cfg = rendered(p)
    assert env[api_key_env(1)]["valueFrom"]["secretKeyRef"] == {"name": "judge-key", "key": "token"}
    assert api_key_env(0) not in env
    assert [c.api_key_env for c in cfg.scorers] == [None, api_key_env(1)]
    with pytest.raises(ValueError, match="name apiKeySecret on the component"):
        pool(scorer={"batchSize": 4, "apiKeySecret": {"name": "k"}}, scorers=[JUDGE])


def test_no_key_no_variable():
    env, cfg = rendered(pool(scorer=JUDGE))
    assert not [n for n in env if n.startswith("REWARDPOOL_SCORER_API_KEY")] and cfg.scorer.api_key_env is None


@pytest.mark.parametrize("arg", ["api_key", "apiKey", "token", "password"])
def test_a_key_in_args_is_refused_by_the_spec_and_by_the_worker(arg):
    with pytest.raises(ValueError, match="apiKeySecret"):
        pool(scorer={**JUDGE, "args": {**JUDGE["args"], arg: "sk-live"}})
    with pytest.raises(ValueError, match="would put a secret in the pool's spec"):
        build_scorer(ScorerConfig(name="openai-judge", args={**JUDGE["args"], arg: "sk-live"}))


def test_the_worker_gives_the_scorer_the_key_from_its_variable(monkeypatch):
    cfg = ScorerConfig(name="openai-judge", args=JUDGE["args"], api_key_env=api_key_env(0))
    monkeypatch.setenv(api_key_env(0), "sk-from-secret")
    assert build_scorer(cfg).api_key == "sk-from-secret"
    assert "sk-from-secret" not in cfg.model_dump_json()
    monkeypatch.delenv(api_key_env(0))
    with pytest.raises(ValueError, match="REWARDPOOL_SCORER_API_KEY_0 .* is empty or unset"):
        build_scorer(cfg)
    # a scorer that takes no key: the pool's apiKeySecret is a mistake, said at start
    monkeypatch.setenv(api_key_env(0), "sk")
    with pytest.raises(TypeError, match="takes no api_key"):
        build_scorer(ScorerConfig(name="mean-intensity", api_key_env=api_key_env(0)))


def test_the_key_changes_the_pod_template_but_not_the_scorer_version():
    """Which Secret holds the key is the pod's (a new Secret name rolls the pods), not the scores' identity."""
    a, b = pool(scorer={**JUDGE, "apiKeySecret": {"name": "k1"}}), pool(scorer={**JUDGE, "apiKeySecret": {"name": "k2"}})
    assert builders.scorer_digest(a) == builders.scorer_digest(b)
    ta = builders.pod_template(a, sizing.compute(a.spec))
    tb = builders.pod_template(b, sizing.compute(b.spec))
    assert json.dumps(ta, sort_keys=True) != json.dumps(tb, sort_keys=True)
