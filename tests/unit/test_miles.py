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


def test_a_rollouts_calls_share_one_group_so_its_concurrent_micro_groups_get_one_version(monkeypatch):
    """miles scores a GRPO group's micro-groups as separate calls, at the same time: on a pool serving two
    versions (a roll), every call of the rollout is scored by one (the hook's group is the rollout)."""
    import asyncio
    from types import SimpleNamespace

    from rewardpool_worker.integrations import miles
    from tests.unit.fakes import FakeWorkerHandle, client_over

    handles = {"w-old": FakeWorkerHandle("v1-a", score=0.25), "w-new": FakeWorkerHandle("v2-b", score=0.75)}
    client = client_over(handles, batch_size=2, max_outstanding_per_worker=8)
    monkeypatch.setattr(miles, "_client", lambda cfg: client)
    monkeypatch.setattr(miles, "_rollouts", {})
    args = SimpleNamespace(custom_rm_args="pool=p,namespace=rl,hint=false,timeout=10", reward_key=None)

    def samples():
        return [SimpleNamespace(prompt="p", generated_output=torch.zeros(3, 1, 4, 4), metadata={},
                                reward_max_queue_depth=None) for _ in range(2)]

    async def rollout():
        batches = [samples() for _ in range(4)]
        await asyncio.gather(*(miles.rewardpool_rm(args, b) for b in batches))
        return [s.metadata["reward_scorer_version"]["p"] for b in batches for s in b]
    versions = asyncio.run(rollout())
    assert len(set(versions)) == 1, versions
    groups = {g for h in handles.values() for _, _, g in h.calls}
    assert groups == {"miles-rollout-1"}


def test_a_rollout_is_the_calls_between_gaps_with_none_in_flight():
    from rewardpool_worker.integrations.miles import HINT_GAP_SECONDS, Rollouts

    r = Rollouts()
    assert r.begin(0.0) == 1 and r.begin(1.0) == 1  # two at once: one rollout
    r.end(2.0)
    assert r.begin(2.0 + HINT_GAP_SECONDS * 2) == 1  # one still in flight: the same rollout, however late
    r.end(30.0)
    r.end(31.0)
    assert r.begin(31.0 + HINT_GAP_SECONDS - 1) == 1  # within the gap after the last one ended
    r.end(45.0)
    assert r.begin(45.0 + HINT_GAP_SECONDS) == 2  # a gap with nothing in flight: the next rollout
