"""Scorer versions on real Ray and a real mooncake_master: a pool rolled from one reward model to another under
a continuous scoring load gives every call, and every group, scores from one version only, and says which."""
from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
import ray
import torch

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.client import AsyncRewardPoolClient
from rewardpool_worker.contract import ScorerConfig
from rewardpool_worker.runtime.actor import model_digest, start_actor
from tests.worker.conftest import KEY, pool_cfg

SCALES = {"v-one": 1.0, "v-two": 3.0}  # the old and the new reward model: the new scores 3x the old


def workers(master, pool, spec_version, n, first, annotations_file=None):
    """n workers of one version, started side by side (each loads torch and connects to the store);
    `annotations_file`: their pods' Downward API annotations (a shadow worker's carries the shadow annotation)."""
    from concurrent.futures import ThreadPoolExecutor

    cfg = pool_cfg(master, pool, {"class": "tests.worker.custom_scorer:ScaledMean", "batch_size": 2,
                                  "args": {"scale": SCALES[spec_version]}})
    cfg = cfg.model_copy(update={"scorer_version": spec_version})
    with ThreadPoolExecutor(n) as ex:
        return list(ex.map(lambda i: start_actor(cfg, f"{pool}-pod-{first + i}", "127.0.0.1",
                                                 annotations_file=annotations_file, control_key=KEY), range(n)))


def test_a_roll_under_load_never_mixes_versions_in_a_call_or_a_group(ray_cluster, master, producer):
    import asyncio

    refs = [producer.put(f"ver-{i}", seed=70 + i, shape=(3, 2, 4, 4)) for i in range(12)]
    means = [float(make_tensor(70 + i, [3, 2, 4, 4], "float32").mean()) for i in range(12)]
    old = workers(master, "ver", "v-one", 2, 0)
    calls: list[tuple[str, str, list, list]] = []  # (group, version, scores, per-sample versions)
    stop = threading.Event()

    def load():
        async def run():
            client = AsyncRewardPoolClient("ver", "t", refresh_seconds=0.5)
            k = 0
            while not stop.is_set():
                group = f"prompt-group-{k % 4}"
                r = await client.score_detailed(refs, ["p"] * len(refs), group=group, timeout=60)
                calls.append((group, r.version, r.results, r.versions, r.restarts))
                k += 1
            return client
        return asyncio.run(run())

    result = {}
    t = threading.Thread(target=lambda: result.setdefault("client", load()))
    t.start()
    time.sleep(2)
    new = workers(master, "ver", "v-two", 2, 2)
    time.sleep(1.5)
    # what the operator holds a roll on (spec.rollout.maxVersionSkewSeconds): the old version's workers count
    # the 4 groups pinned to it, the new version's none (no group moves while its version still serves)
    pinned_old = [ray.get(w.stats.remote())["active_groups"] for w in old]
    pinned_new = [ray.get(w.stats.remote())["active_groups"] for w in new]
    assert max(pinned_old) >= 1 and all(n <= 4 for n in pinned_old) and pinned_new == [0, 0], (pinned_old, pinned_new)
    for w in old:  # the roll: one old worker at a time drains, then goes
        time.sleep(1.5)
        ray.get(w.drain.remote(KEY))
        time.sleep(0.5)
        ray.kill(w)
    time.sleep(3)
    stop.set()
    t.join(120)
    for w in new:
        ray.kill(w)

    assert len(calls) > 10
    seen = defaultdict(list)
    for group, version, scores, versions, _ in calls:
        assert version is not None and version.startswith(("v-one-", "v-two-")), version
        scale = SCALES[version.rsplit("-", 1)[0]]
        # every score of the call is that version's: no batch came from the other model
        assert scores == [pytest.approx(scale * m) for m in means], (version, scores)
        assert versions == [version] * len(refs)
        seen[group].append(version)
    both = {v for _, v, *_ in calls}
    assert len(both) == 2, both  # the load spanned the roll
    for group, versions in seen.items():  # each group switched at most once, old to new
        switches = sum(1 for a, b in zip(versions, versions[1:]) if a != b)
        assert switches <= 1 and versions[-1].startswith("v-two-"), (group, versions)
    print(f"{len(calls)} calls; restarts {sum(c[4] for c in calls)}; group moves {result['client'].group_moves}")


def test_the_model_files_content_is_part_of_the_version(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00" * 1000)
    (model / "config.json").write_text("{}")
    cfg = pool_cfg(type("M", (), {"address": "m:1"})(), "p", {"name": "pickscore", "model_path": str(model)})
    before = model_digest(cfg)
    assert model_digest(cfg) == before  # stable
    (model / "weights.bin").write_bytes(b"\x00" * 999 + b"\x01")  # a new checkpoint at the same path
    assert model_digest(cfg) != before
    other = cfg.model_copy(update={"scorer": ScorerConfig(name="pickscore", model_path=str(model),
                                                          processor_path=str(tmp_path / "absent"))})
    assert model_digest(other) != model_digest(cfg)  # a processor path counts, even when it is not on disk


@pytest.mark.parametrize("shadow", [False, True], ids=["both-serving", "shadow-then-promoted"])
def test_a_miles_run_through_a_roll_scores_each_rollout_with_one_version(ray_cluster, master, producer,
                                                                         monkeypatch, tmp_path, shadow):
    """miles' reward hook as miles calls it (its micro-groups awaited at once, rollout after rollout) on a pool in
    the middle of a roll (both versions serving, or the new one first in shadow and then promoted; then the old
    one drained away): every rollout, so every GRPO group in it, is scored by one version, with that version's
    rewards; the old version's workers count the rollout as a pinned group while it runs (what the operator's
    maxVersionSkewSeconds hold reads); in shadow, the new version scores the same outputs beside, unseen."""
    import asyncio
    from types import SimpleNamespace

    from rewardpool_worker.integrations import miles
    from tests.worker.test_shadow import annotations

    monkeypatch.setattr(miles, "HINT_GAP_SECONDS", 0.3)
    monkeypatch.setattr(miles, "_rollouts", {})
    monkeypatch.setattr(miles, "_clients", {})
    refs = [producer.put(f"mroll-{i}", seed=170 + i, shape=(3, 2, 4, 4)) for i in range(8)]
    means = {r.key: float(make_tensor(170 + i, [3, 2, 4, 4], "float32").mean()) for i, r in enumerate(refs)}
    pool = "mrs" if shadow else "mroll"
    podinfo = None
    if shadow:
        podinfo = tmp_path / "annotations"
        annotations(podinfo, shadow=True)
    old = workers(master, pool, "v-one", 1, 0)
    new = workers(master, pool, "v-two", 1, 1, annotations_file=str(podinfo) if podinfo else None)
    args = SimpleNamespace(custom_rm_args=f"pool={pool},namespace=t,hint=false,timeout=60", reward_key=None)

    def sample(r):
        return SimpleNamespace(prompt="p", metadata={}, reward_max_queue_depth=None,
                               generated_output=SimpleNamespace(key=r.key, shape=r.shape, dtype=torch.float32,
                                                                size=r.nbytes))

    async def rollout():
        groups = [[sample(r) for r in refs[i:i + 2]] for i in range(0, 8, 2)]  # 4 micro-groups, at once
        rewards = await asyncio.gather(*(miles.rewardpool_rm(args, g) for g in groups))
        return [(s.generated_output.key, s.metadata["reward_scorer_version"][pool], w)
                for g, ws in zip(groups, rewards) for s, w in zip(g, ws)]

    async def run():
        out, pinned = [], []
        for k in range(6):
            task = asyncio.ensure_future(rollout())
            if k == 1:  # while a rollout runs: its group is counted where it is pinned
                await asyncio.sleep(0.05)
                pinned = await asyncio.to_thread(lambda: [ray.get(w.stats.remote())["active_groups"]
                                                          for w in old + new])
            out.append(await task)
            if k == 1 and shadow:  # the operator promotes the shadow (its gate passed): both serve
                assert await asyncio.to_thread(ray.get, new[0].promote.remote(KEY)) is True
            if k == 2:  # the roll drains the old version's worker
                await asyncio.to_thread(ray.get, old[0].drain.remote(KEY))
            await asyncio.sleep(0.4)  # the gap between rollouts
        return out, pinned
    rollouts, pinned = asyncio.run(run())
    agreement = ray.get(new[0].stats.remote())["agreement"]
    for w in old + new:
        ray.kill(w)

    versions = []
    for scored in rollouts:
        (version,) = {v for _, v, _ in scored}  # one version for the whole rollout
        scale = SCALES[version.rsplit("-", 1)[0]]
        assert [w for _, _, w in scored] == [pytest.approx(scale * means[key]) for key, _, _ in scored]
        versions.append(version)
    assert all(v.startswith("v-two-") for v in versions[3:])  # after the drain, the new version only
    if shadow:  # in shadow, the old version served every rollout; the new one scored them beside, unseen
        assert all(v.startswith("v-one-") for v in versions[:2]), versions
        assert sum(a["n"] for a in agreement.values()) > 0, agreement  # (an idle shadow takes a batch)
    assert sum(pinned) >= 1, pinned  # the running rollout is a pinned group on the version scoring it
