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
                                         ("pool=p,release=true", "store_master"), ("pool", "not key=value"),
                                         ("pools=a:p;b:q,url=http://x:8000", "url= scores through one pool")])
def test_bad_args_fail_at_parse(text, match):
    with pytest.raises(ValueError, match=match):
        HookConfig.parse(text, env={})


def test_url_and_token_file_select_the_http_client_from_args_or_env():
    cfg = HookConfig.parse("pool=p,url=http://p-score.rl.svc:8000,token_file=/var/run/tok", env={})
    assert (cfg.url, cfg.token_file) == ("http://p-score.rl.svc:8000", "/var/run/tok")
    env = {"REWARDPOOL_URL": "http://e:8000", "REWARDPOOL_TOKEN_FILE": "/t"}
    assert (HookConfig.parse("pool=p", env=env).url, HookConfig.parse("pool=p", env=env).token_file) == \
        ("http://e:8000", "/t")
    assert HookConfig.parse("pool=p", env={}).url is None  # Ray, as before


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


def test_pools_by_reward_type_parse_and_refuse_what_is_ambiguous():
    cfg = HookConfig.parse("pools=pickscore:pool-a; hps:pool-b", env={})
    assert cfg.pools == (("pickscore", "pool-a"), ("hps", "pool-b")) and cfg.pool == ""
    for text, match in [("pool=p,pools=hps:b", "not both"), ("pools=hps", "not <reward type>:<pool>"),
                        ("pools=hps:a;hps:b", "twice"), ("namespace=rl", "needs pool")]:
        with pytest.raises(ValueError, match=match):
            HookConfig.parse(text, env={})


def test_a_samples_rm_type_picks_its_pool_else_the_runs_and_an_unmapped_type_is_refused():
    from types import SimpleNamespace

    from rewardpool_worker.integrations.miles import route

    cfg = HookConfig.parse("pools=pickscore:pool-a;hps:pool-b", env={})
    args = SimpleNamespace(rm_type="pickscore")
    samples = [SimpleNamespace(metadata={}), SimpleNamespace(metadata={"rm_type": "hps"}), SimpleNamespace()]
    assert route(cfg, args, samples) == ["pool-a", "pool-b", "pool-a"]
    with pytest.raises(ValueError, match="reward type 'ocr' .* has no pool: .* maps pickscore to pool-a, hps to pool-b"):
        route(cfg, args, [SimpleNamespace(metadata={"rm_type": "ocr"})])
    with pytest.raises(ValueError, match="reward type None"):
        route(cfg, SimpleNamespace(rm_type=None), [SimpleNamespace(metadata={})])
    assert route(HookConfig.parse("pool=p", env={}), args, samples) == ["p"] * 3


class Described:
    """A worker handle whose ready() names the pool's components and their numFrames."""

    def __new__(cls, version, score, components, num_frames, scorers=None, args=None):
        from tests.unit.fakes import FakeRef, FakeWorkerHandle

        h = FakeWorkerHandle(version, score=score)
        info = {"batch_size": 4, "max_queue": 8, "version": version, "shadow": False, "draining": False,
                "components": components, "num_frames": num_frames, "scorers": scorers or {}, "args": args or {}}
        h.ready.remote = lambda: FakeRef(info)
        return h


def _hook(monkeypatch, clients: dict):
    from rewardpool_worker.integrations import miles

    monkeypatch.setattr(miles, "_client", lambda cfg: clients[cfg.pool])
    monkeypatch.setattr(miles, "_rollouts", {})
    monkeypatch.setattr(miles, "_checked", set())
    return miles


def test_a_call_split_over_pools_by_type_comes_back_in_sample_order(monkeypatch):
    import asyncio
    from types import SimpleNamespace

    from tests.unit.fakes import client_over

    clients = {"pool-a": client_over({"a": Described("va", 0.25, ["pickscore"], {"pickscore": 8})}),
               "pool-b": client_over({"b": Described("vb", 0.75, ["hps"], {"hps": None})})}
    miles = _hook(monkeypatch, clients)
    args = SimpleNamespace(custom_rm_args="pools=pickscore:pool-a;hps:pool-b,hint=false,timeout=10",
                           reward_key=None, rm_type="pickscore")
    kinds = ["pickscore", "hps", "hps", "pickscore", None]
    samples = [SimpleNamespace(prompt="p", generated_output=torch.zeros(3, 1, 4, 4), reward_max_queue_depth=None,
                               metadata={"rm_type": k} if k else {}) for k in kinds]
    rewards = asyncio.run(miles.rewardpool_rm(args, samples))
    assert rewards == [0.25, 0.75, 0.75, 0.25, 0.25]
    assert [list(s.metadata["reward_scorer_version"]) for s in samples] == [["pool-a"], ["pool-b"], ["pool-b"],
                                                                            ["pool-a"], ["pool-a"]]
    # the queue depth under the pool's name and its component's, as miles' own pools record theirs
    assert set(samples[1].reward_max_queue_depth) == {"pool-b", "hps"}
    assert set(samples[0].reward_max_queue_depth) == {"pool-a", "pickscore"}


@pytest.mark.parametrize("flags, match", [
    ({"pickscore_num_frames": 4}, "numFrames 8 but miles' --pickscore-num-frames is 4"),
    ({"reward_key": "hps"}, "--reward-key 'hps' is not a component"),
    ({"pickscore_num_frames": 8, "reward_key": "weighted"}, None),
    ({"pickscore_num_frames": None, "reward_key": "ocr"}, None)])
def test_the_pool_is_checked_against_miles_flags_at_its_first_call(monkeypatch, flags, match):
    import asyncio
    from types import SimpleNamespace

    from tests.unit.fakes import client_over

    from tests.unit.fakes import FakeRef

    h = Described("v", 0.5, ["pickscore", "ocr"], {"pickscore": 8, "ocr": 1})

    def mixture(outputs, prompts, batch_id, group=None):
        h.calls.append((batch_id, len(outputs), group))
        return FakeRef([{"pickscore": 0.5, "ocr": 1.0, "weighted": 1.5}] * len(outputs))
    h.score_batch.remote = mixture
    miles = _hook(monkeypatch, {"mix": client_over({"w": h})})
    args = SimpleNamespace(custom_rm_args="pool=mix,hint=false,timeout=10", **{"reward_key": None, **flags})
    samples = [SimpleNamespace(prompt="p", generated_output=torch.zeros(3, 1, 4, 4), reward_max_queue_depth=None,
                               metadata={})]
    if match:
        with pytest.raises(ValueError, match=match):
            asyncio.run(miles.rewardpool_rm(args, samples))
        assert not h.calls  # refused before anything was scored
    else:
        (reward,) = asyncio.run(miles.rewardpool_rm(args, samples))
        assert reward["weighted"] == 1.5


@pytest.mark.parametrize("pool_args, flag, match", [
    ({}, "v2.0", "HPS v2.1 but miles' --hps-version is v2.0"),  # the scorer's default is miles' default
    ({"version": "v2.0"}, "v2.1", "HPS v2.0 but miles' --hps-version is v2.1"),
    ({"version": "v2.0"}, "v2.0", None),
    ({}, "v2.1", None),
    ({"version": "v2.0"}, None, None)])  # the flag unset: nothing to compare
def test_an_hps_scorer_is_checked_against_hps_version(monkeypatch, pool_args, flag, match):
    """Whatever key the hps component has in the mixture, its version is what is compared."""
    import asyncio
    from types import SimpleNamespace

    from tests.unit.fakes import client_over

    h = Described("v", 0.5, ["human_pref"], {"human_pref": None}, scorers={"human_pref": "hps"},
                  args={"human_pref": pool_args})
    miles = _hook(monkeypatch, {"p": client_over({"w": h})})
    args = SimpleNamespace(custom_rm_args="pool=p,hint=false,timeout=10", reward_key=None, hps_version=flag)
    samples = [SimpleNamespace(prompt="p", generated_output=torch.zeros(3, 1, 4, 4), reward_max_queue_depth=None,
                               metadata={})]
    if match:
        with pytest.raises(ValueError, match=match):
            asyncio.run(miles.rewardpool_rm(args, samples))
        assert not h.calls
    else:
        assert asyncio.run(miles.rewardpool_rm(args, samples)) == [0.5]
