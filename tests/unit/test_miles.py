"""--custom-rm-args parsing for the miles hook (pure code)."""
import pytest
import torch

from rewardpool_worker.integrations.miles import HookConfig, as_output
from rewardpool_worker.records import OutputRef


def test_args_over_env_over_defaults():
    cfg = HookConfig.parse("pool=pickscore, timeout=30,release=false", env={"REWARDPOOL_NAMESPACE": "rl",
                                                                          "REWARDPOOL_POOL": "other"})
    assert cfg == HookConfig(pool="pickscore", namespace="rl", timeout=30.0, release=False)
    assert HookConfig.parse("pool=p,timeout=none", env={}).timeout is None
    assert HookConfig.parse(None, env={"REWARDPOOL_POOL": "p", "REWARDPOOL_REWARD_KEY": "weighted"}).reward_key == "weighted"


@pytest.mark.parametrize("text, match", [("", "needs pool"), ("pool=p,colour=red", "not key=value"),
                                         ("pool=p,release=maybe", "true or false"),
                                         ("pool=p,release=true", "store_master"), ("pool", "not key=value")])
def test_bad_args_fail_at_parse(text, match):
    with pytest.raises(ValueError, match=match):
        HookConfig.parse(text, env={})


def test_stored_refs_in_the_framework_shapes():
    class Stored:
        key, shape, dtype, size = "k", (3, 2, 4, 4), torch.float16, 3 * 2 * 4 * 4 * 2
    assert as_output(Stored()) == OutputRef("k", 192, "float16", (3, 2, 4, 4))
    assert as_output({"key": "k", "shape": [2], "dtype": "uint8", "size": 2}) == OutputRef("k", 2, "uint8", (2,))
    t = torch.zeros(3, 1, 2, 2)
    assert as_output(t) is t
    with pytest.raises(ValueError, match="size"):
        as_output({"key": "k", "shape": [2], "dtype": "float32", "size": 5})
    with pytest.raises(TypeError):
        as_output("not an output")


def test_rollout_hint_settings():
    cfg = HookConfig.parse("pool=p", env={})
    assert cfg.hint is True and cfg.expect == 0
    assert HookConfig.parse("pool=p,hint=false", env={}).hint is False
    assert HookConfig.parse("pool=p,expect=64", env={}).expect == 64
    with pytest.raises(ValueError, match="true or false"):
        HookConfig.parse("pool=p,hint=sometimes", env={})


def test_rollout_size_comes_from_the_framework_args():
    from types import SimpleNamespace

    from rewardpool_worker.integrations.miles import rollout_outputs

    args = SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=4)
    assert rollout_outputs(HookConfig.parse("pool=p", env={}), args) == 64
    assert rollout_outputs(HookConfig.parse("pool=p,expect=10", env={}), args) == 10
    assert rollout_outputs(HookConfig.parse("pool=p", env={}), SimpleNamespace()) == 0


def test_a_new_rollout_is_announced_once(monkeypatch):
    import asyncio

    from rewardpool_worker.client import demand
    from rewardpool_worker.integrations import miles

    sent = []

    async def fake_expect(pool, namespace, n, ttl_seconds):
        sent.append((pool, namespace, n))
    monkeypatch.setattr(demand, "expect_async", fake_expect)
    monkeypatch.setattr(miles, "_last_call", {})
    cfg = HookConfig.parse("pool=p,namespace=rl,expect=64", env={})
    for t in (100.0, 101.0, 105.0, 200.0):  # two micro-groups of one rollout, then another rollout
        asyncio.run(miles._announce(cfg, None, t))
    assert sent == [("p", "rl", 64), ("p", "rl", 64)]  # at 100 and at 200, not for the later micro-groups
