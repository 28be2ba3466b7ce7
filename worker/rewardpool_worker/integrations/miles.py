"""The miles reward hook: score a rollout's samples through a RewardPool.

    --custom-rm-path rewardpool_worker.integrations.miles.rewardpool_rm
    --custom-rm-args pool=pickscore,namespace=rl,timeout=600

miles calls `await rewardpool_rm(args, samples)` per micro-group (once per whole group under --group-rm, and
for evaluation) and sets each sample's reward from the list it returns, in sample order.

`--custom-rm-args` (`args.custom_rm_args`) is `key=value` pairs separated by commas; each key can also come
from an environment variable (the argument wins):

| key | env | default | meaning |
|---|---|---|---|
| pool | REWARDPOOL_POOL | (required, unless pools) | the RewardPool's name |
| pools | REWARDPOOL_POOLS | (none) | reward types to pools, `pickscore:pool-a;hps:pool-b`: each sample goes to the pool of its `metadata["rm_type"]` (miles' per-sample and per-eval-dataset override), else of the run's `--rm-type`; a type with no pool is refused (not with pool=) |
| namespace | REWARDPOOL_NAMESPACE | default | its Kubernetes namespace |
| ray_namespace | REWARDPOOL_RAY_NAMESPACE | rewardpool | the pool's `spec.ray.namespace` |
| reward_key | REWARDPOOL_REWARD_KEY | (none) | return this component of a several-scorer pool as a float (e.g. `weighted`); without it such a pool returns `{component..., "weighted": sum}` dicts, for miles' `--reward-key` (the two together are refused) |
| timeout | REWARDPOOL_TIMEOUT | 600 | seconds for one call; past it the batches are cancelled and the call raises TimeoutError |
| on_error | REWARDPOOL_ON_ERROR | raise | `raise`: a sample that cannot be scored fails the call; a number: its reward instead (logged; a dict of that number per component when the others are dicts) |
| release | REWARDPOOL_RELEASE | false | remove the stored outputs after the reward (only for framework versions that do not release them themselves) |
| store_master | REWARDPOOL_STORE_MASTER | (none) | mooncake_master host:port, needed by release=true |
| store_protocol | REWARDPOOL_STORE_PROTOCOL | tcp | the store client's protocol, for release=true |
| hint | REWARDPOOL_HINT | true | announce a new rollout's outputs to the pool's autoscaler (`rewardpool_worker.client.demand.expect`) so it grows before the queue builds; needs `patch` on `rewardpools` |
| expect | REWARDPOOL_EXPECT | rollout size | outputs a rollout brings (default `args.rollout_batch_size x args.n_samples_per_prompt`) |
| url | REWARDPOOL_URL | (none) | score over HTTP (`http://<pool>-score.<namespace>.svc:8000`): no Ray cluster of the pool's is needed; in a pod whose service account may list EndpointSlices in `namespace=`, the workers themselves (least outstanding work, one version per call), else through this Service; `pool=` still names the pool in the records |
| token_file | REWARDPOOL_TOKEN_FILE | (none) | the file holding the tenant's token (spec.access.tenants), for url= |

A sample's `generated_output` is a stored-tensor ref (anything with `key`, `shape`, `dtype` and `size` or
`nbytes`; or an OutputRef) which the worker reads from the store, or an inline (C, F, H, W) tensor (the
evaluation path, and every output in public miles, which has no output store); one call may mix both. An inline
video is sent cut to the frames the pool's scorers pick when they all pick frames (as miles' pickscore_rm
slices `generated_output[:, indices]` before its actors), else whole.

Rewards come in the shape miles reads. A one-scorer pool gives floats. A several-scorer pool gives
`{component..., "weighted": sum}` dicts, which need miles' `--reward-key` (it indexes each reward with it);
or `reward_key` here gives that component as a float, which then must not be combined with `--reward-key`
(refused). With `--reward-key`, a one-scorer pool's float comes as `{reward_key: score}` and an `on_error`
reward as a dict of every component, so every sample's reward is a dict.

Each sample's `reward_max_queue_depth` gets the pool's name and each of its components' names (`pickscore`,
`ocr`, ...: miles' own reward pools each record theirs) set to the deepest queue a batch of the call joined on a
worker (0: it waited behind nothing), merged into the dict that is there, as miles' `record_reward_queue_depth`
does (its rollout metrics log `perf/reward_max_queue_depth_<name>`).

At a pool's first call the hook compares it with miles' own flags and refuses a mismatch, which would change
rewards silently: the pool's pickscore numFrames against `--pickscore-num-frames` (when that is set), and
`--reward-key` against a mixture's components.

A mixture component with `required: false` that refused a sample has NaN there; the reason goes to the sample's
`metadata["reward_errors"]` under the pool's name (and the log).

Each sample's `metadata["reward_scorer_version"]` gets the pool's name set to the scorer version that gave its
reward (every reward of one call comes from one version, also during a roll). Every call of one rollout is one
client group (`Rollouts`): concurrent micro-groups of a GRPO group are scored by one version, and a roll with
`spec.rollout.maxVersionSkewSeconds` keeps that version's last worker until the rollout's calls end.

A new rollout is a call after HINT_GAP_SECONDS without one (the first micro-group of a rollout): the hook
then announces the rollout's outputs once, expiring after `timeout` (a failed announcement is logged, once,
and scoring goes on).

The hook does not release outputs by default: miles removes them after the reward and reads the first
`--wandb-log-num-images` back for media first, so removing them here would break its media logging."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, replace

import torch

from ..client.async_client import AsyncRewardPoolClient
from ..errors import SampleError
from ..records import OutputRef
from ..scorers.hps import DEFAULT_VERSION as HPS_DEFAULT_VERSION
from ..scorers.mixture import WEIGHTED

log = logging.getLogger("rewardpool.miles")

ENV = {"pool": "REWARDPOOL_POOL", "pools": "REWARDPOOL_POOLS", "namespace": "REWARDPOOL_NAMESPACE", "ray_namespace": "REWARDPOOL_RAY_NAMESPACE",
       "reward_key": "REWARDPOOL_REWARD_KEY", "timeout": "REWARDPOOL_TIMEOUT", "on_error": "REWARDPOOL_ON_ERROR",
       "release": "REWARDPOOL_RELEASE", "store_master": "REWARDPOOL_STORE_MASTER",
       "store_protocol": "REWARDPOOL_STORE_PROTOCOL", "hint": "REWARDPOOL_HINT", "expect": "REWARDPOOL_EXPECT",
       "url": "REWARDPOOL_URL", "token_file": "REWARDPOOL_TOKEN_FILE"}
HINT_GAP_SECONDS = 10.0
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class HookConfig:
    pool: str = ""
    namespace: str = "default"
    ray_namespace: str = "rewardpool"
    reward_key: str | None = None
    timeout: float | None = 600.0
    on_error: str = "raise"
    release: bool = False
    store_master: str | None = None
    store_protocol: str = "tcp"
    hint: bool = True
    expect: int = 0  # 0: the rollout's size from the framework's args
    pools: tuple[tuple[str, str], ...] = ()  # (reward type, pool), from pools=
    url: str | None = None  # score over HTTP through this Service URL (no Ray cluster of the pool's needed)
    token_file: str | None = None  # the tenant's bearer token, read from this file (never in the args)

    @classmethod
    def parse(cls, text: str | None, env: dict | None = None) -> "HookConfig":
        """`key=value,...` over the REWARDPOOL_* environment variables over the defaults."""
        env = os.environ if env is None else env
        values = {k: env[v] for k, v in ENV.items() if env.get(v)}
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or key not in ENV:
                raise ValueError(f"--custom-rm-args: {part!r} is not key=value with a key of {sorted(ENV)}")
            values[key] = value.strip()
        if values.get("url") and values.get("pools"):
            raise ValueError("--custom-rm-args: url= scores through one pool's Service: use pool=, not pools=")
        if values.get("pools") and values.get("pool"):
            raise ValueError("--custom-rm-args: set pool= (one pool) or pools= (a pool per reward type), not both")
        if not values.get("pool") and not values.get("pools"):
            raise ValueError("--custom-rm-args needs pool=<RewardPool name> (or REWARDPOOL_POOL), or pools=<type>:<pool>"
                             ";... (or REWARDPOOL_POOLS)")
        out: dict = dict(values)
        if "pools" in out:
            out["pools"] = parse_pools(out["pools"])
        if "timeout" in out:
            t = out["timeout"].lower()
            out["timeout"] = None if t in ("none", "0", "") else float(t)
        for flag in ("release", "hint"):
            if flag in out:
                r = out[flag].lower()
                if r not in _TRUE | _FALSE:
                    raise ValueError(f"--custom-rm-args: {flag}={out[flag]!r} is not true or false")
                out[flag] = r in _TRUE
        if "expect" in out:
            out["expect"] = int(out["expect"])
        if "on_error" in out and out["on_error"] != "raise":
            float(out["on_error"])  # a number, or fail here rather than mid-rollout
        if out.get("release") and not out.get("store_master"):
            raise ValueError("--custom-rm-args: release=true needs store_master=<mooncake_master host:port>")
        return cls(**out)


def parse_pools(text: str) -> tuple[tuple[str, str], ...]:
    """`pickscore:pool-a;hps:pool-b` -> (("pickscore", "pool-a"), ("hps", "pool-b"))."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        kind, sep, pool = (x.strip() for x in part.partition(":"))
        if not sep or not kind or not pool:
            raise ValueError(f"--custom-rm-args pools: {part!r} is not <reward type>:<pool>")
        pairs.append((kind, pool))
    kinds = [k for k, _ in pairs]
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"--custom-rm-args pools maps a reward type twice: {text!r}")
    return tuple(pairs)


def route(cfg: HookConfig, args, samples) -> list[str]:
    """The pool of each sample: pool=, or with pools= the pool of its reward type (`metadata["rm_type"]`, else
    the run's --rm-type)."""
    if not cfg.pools:
        return [cfg.pool] * len(samples)
    mapped, default = dict(cfg.pools), getattr(args, "rm_type", None)
    out = []
    for i, s in enumerate(samples):
        meta = getattr(s, "metadata", None)
        kind = (meta.get("rm_type") if isinstance(meta, dict) else None) or default
        if kind not in mapped:
            raise ValueError(f"sample {i}'s reward type {kind!r} (its metadata rm_type, else --rm-type) has no pool: "
                             f"--custom-rm-args pools= maps {', '.join(f'{k} to {p}' for k, p in cfg.pools)}")
        out.append(mapped[kind])
    return out


def as_output(x) -> OutputRef | torch.Tensor:
    """A sample's generated_output as the pool takes it: an OutputRef (read by the worker) or a tensor."""
    if isinstance(x, (OutputRef, torch.Tensor)):
        return x
    get = (lambda k: x.get(k)) if isinstance(x, dict) else (lambda k: getattr(x, k, None))
    key, shape, dtype = get("key"), get("shape"), get("dtype")
    if key is None or shape is None or dtype is None:
        raise TypeError(f"generated_output of type {type(x).__name__} is neither a tensor nor a stored-tensor ref "
                        "(key, shape, dtype, size)")
    dtype = str(dtype).removeprefix("torch.")
    shape = tuple(int(d) for d in shape)
    ref = OutputRef(str(key), 0, dtype, shape)
    nbytes = torch.Size(shape).numel() * torch.empty((), dtype=ref.torch_dtype).element_size()
    size = get("nbytes") if get("nbytes") is not None else get("size")
    if size is not None and int(size) not in (nbytes, torch.Size(shape).numel()):  # bytes, or elements
        raise ValueError(f"stored output {key!r}: size {size} matches neither the bytes ({nbytes}) nor the "
                         f"elements of shape {shape} {dtype}")
    return OutputRef(str(key), nbytes, dtype, shape)


_clients: dict = {}
_releasers: dict = {}
_last_call: dict = {}
_hint_failed: set = set()


@dataclass
class Rollouts:
    """Which rollout a call belongs to, for its group key: a call that starts after HINT_GAP_SECONDS with no call
    in flight begins a new rollout. Every call of one rollout shares its group, so every GRPO group in it (however
    miles splits it into micro-groups, run one after another or at once) is scored by one scorer version, and a
    roll with spec.rollout.maxVersionSkewSeconds keeps that version until the rollout ends."""
    number: int = 0
    in_flight: int = 0
    last_end: float | None = None

    def begin(self, now: float) -> int:
        if self.in_flight == 0 and (self.last_end is None or now - self.last_end >= HINT_GAP_SECONDS):
            self.number += 1
        self.in_flight += 1
        return self.number

    def end(self, now: float) -> None:
        self.in_flight -= 1
        self.last_end = now


_rollouts: dict = {}


def rollout_outputs(cfg: HookConfig, args) -> int:
    """Outputs one rollout brings: the configured figure, else the framework's rollout size."""
    if cfg.expect:
        return cfg.expect
    return int(getattr(args, "rollout_batch_size", 0) or 0) * int(getattr(args, "n_samples_per_prompt", 1) or 1)


async def _announce(cfg: HookConfig, args, now: float) -> None:
    """At a new rollout (the first call after a gap), tell the pool's autoscaler what is coming."""
    key = (cfg.pool, cfg.namespace)
    last, _last_call[key] = _last_call.get(key), now
    if not cfg.hint or key in _hint_failed or (last is not None and now - last < HINT_GAP_SECONDS):
        return
    n = rollout_outputs(cfg, args)
    if n <= 0:
        return
    from ..client import demand

    try:
        await demand.expect_async(cfg.pool, cfg.namespace, n, ttl_seconds=cfg.timeout or 600)
    except Exception as e:  # no API access (RBAC, no kubeconfig): scoring goes on without the hint
        _hint_failed.add(key)
        log.warning("rollout hint for %s/%s not sent (%s); the pool scales on its queue alone", cfg.namespace,
                    cfg.pool, e)


def _client(cfg: HookConfig):
    """The pool's client for this event loop: over HTTP through its Service (url=), else over Ray."""
    if cfg.url:
        loop = asyncio.get_running_loop()
        key = ("http", cfg.url, cfg.token_file, cfg.timeout)
        cached = _clients.get(key)
        if cached is None or cached[0] is not loop:
            from ..client.http_client import HttpRewardPoolClient

            token = open(cfg.token_file).read().strip() if cfg.token_file else None
            # the pool's workers from its EndpointSlices when this pod may list them (least outstanding routing, one
            # version per call), else through the Service
            cached = _clients[key] = (loop, HttpRewardPoolClient(cfg.url, token, pool=cfg.pool, namespace=cfg.namespace,
                                                                 timeout=cfg.timeout))
        return cached[1]
    import ray

    if not ray.is_initialized():  # the rollout process is a Ray driver already; a script may not be
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace=cfg.ray_namespace, log_to_driver=False)
    loop = asyncio.get_running_loop()
    key = (cfg.pool, cfg.namespace, cfg.ray_namespace, cfg.timeout)
    cached = _clients.get(key)
    if cached is None or cached[0] is not loop:  # one client per event loop (its waits belong to the loop)
        cached = _clients[key] = (loop, AsyncRewardPoolClient(cfg.pool, cfg.namespace, cfg.ray_namespace,
                                                              timeout=cfg.timeout))
    return cached[1]


def _releaser(cfg: HookConfig):
    from ..client.releaser import Releaser
    from ..contract import StoreConfig
    from ..store import Store

    key = (cfg.store_master, cfg.store_protocol)
    if key not in _releasers:
        store = Store.connect(StoreConfig(master=cfg.store_master, protocol=cfg.store_protocol, segment_bytes=0,
                                          local_buffer_bytes=16 << 20),
                              os.environ.get("REWARDPOOL_LOCAL_HOSTNAME", "127.0.0.1"))
        _releasers[key] = Releaser(store)
    return _releasers[key]


def check_reward_key(cfg: HookConfig, miles_key: str | None) -> None:
    """Refuse what would crash miles later: with its --reward-key, miles indexes every sample's reward as a dict
    (get_reward_value, the per-component panels), so the hook's own reward_key (floats) cannot be combined."""
    if cfg.reward_key and miles_key:
        raise ValueError(f"--custom-rm-args reward_key={cfg.reward_key} together with miles' --reward-key "
                         f"{miles_key}: miles then reads each reward as a dict and indexes it with {miles_key!r}, "
                         "but reward_key makes the hook return floats; drop reward_key from --custom-rm-args (the "
                         "hook returns the component dicts and miles picks its key)")


def record_queue_depth(sample, name: str, depth: int) -> None:
    """As miles' record_reward_queue_depth: `sample.reward_max_queue_depth` is a dict of depths (floats) by reward
    name, merged with what is there; miles' rollout metrics log each name's maximum."""
    depths = sample.reward_max_queue_depth if isinstance(getattr(sample, "reward_max_queue_depth", None), dict) \
        else {}
    depths[name] = float(depth)
    sample.reward_max_queue_depth = depths


def record_scorer_version(sample, name: str, version: str | None) -> None:
    """The scorer version that gave this sample's reward, under the pool's name in `sample.metadata`
    (`reward_scorer_version`), when the sample has a metadata dict (miles' Sample does); nothing otherwise."""
    meta = getattr(sample, "metadata", None)
    if isinstance(meta, dict) and version is not None:
        meta.setdefault("reward_scorer_version", {})[name] = version


def record_component_errors(sample, name: str, errors: dict[str, str]) -> None:
    """An optional component that refused this sample (its score is NaN in the reward dict): why, under the
    pool's name in `sample.metadata["reward_errors"]`, and in the log."""
    log.warning("%s: optional component(s) %s gave no score for a sample: %s", name, sorted(errors), errors)
    meta = getattr(sample, "metadata", None)
    if isinstance(meta, dict):
        meta.setdefault("reward_errors", {})[name] = dict(errors)


def _value(result, cfg: HookConfig, miles_key: str | None):
    """A scored sample's reward in the shape miles reads: a float, or (with its --reward-key) a dict holding it."""
    if cfg.reward_key is not None:
        if not isinstance(result, dict):
            return result
        if cfg.reward_key not in result:
            raise KeyError(f"reward_key {cfg.reward_key!r} is not a component of the pool's result {sorted(result)}")
        return result[cfg.reward_key]
    if miles_key:
        if not isinstance(result, dict):
            return {miles_key: float(result)}  # one scorer: the dict miles indexes, under its key
        if miles_key not in result:
            raise KeyError(f"miles' --reward-key {miles_key!r} is not a component of {cfg.namespace}/{cfg.pool}'s "
                           f"results {sorted(result)}")
        return result
    if isinstance(result, dict):
        raise ValueError(f"{cfg.namespace}/{cfg.pool} scores with several scorers ({sorted(result)}): set miles' "
                         "--reward-key to one of them (or reward_key= in --custom-rm-args); miles cannot train on "
                         "a dict reward without it")
    return result


def _error_reward(cfg: HookConfig, miles_key: str | None, components: list[str] | None):
    """on_error's number in the same shape as the scored samples' rewards (a dict of every component with
    miles' --reward-key, so its per-component panels average it like the others)."""
    value = float(cfg.on_error)
    if not miles_key or cfg.reward_key is not None:
        return value
    keys = list(components) + [WEIGHTED] if components and len(components) > 1 else []
    return {k: value for k in dict.fromkeys([*keys, miles_key])}


async def rewardpool_rm(args, samples, **kwargs):
    """miles' custom reward function: rewards for `samples` in their order (one value for one sample)."""
    single = not isinstance(samples, (list, tuple))
    samples = [samples] if single else list(samples)
    cfg = HookConfig.parse(getattr(args, "custom_rm_args", None))
    miles_key = getattr(args, "reward_key", None)
    check_reward_key(cfg, miles_key)
    by_pool: dict[str, list[int]] = {}
    for i, pool in enumerate(route(cfg, args, samples)):
        by_pool.setdefault(pool, []).append(i)
    parts = await asyncio.gather(*(_score_on(replace(cfg, pool=pool, pools=()), args, [samples[i] for i in idx],
                                             miles_key) for pool, idx in by_pool.items()))
    rewards: list = [None] * len(samples)
    for idx, got in zip(by_pool.values(), parts):
        for i, r in zip(idx, got):
            rewards[i] = r
    return rewards[0] if single else rewards


_checked: set = set()


async def check_pool(cfg: HookConfig, client: AsyncRewardPoolClient, args, miles_key: str | None) -> None:
    """At a pool's first call: refuse what would silently change rewards against miles' own flags: the pool's
    pickscore numFrames against --pickscore-num-frames (when set), an hps scorer's version against --hps-version
    (when set), and --reward-key against a mixture's components."""
    key = (cfg.pool, cfg.namespace, cfg.ray_namespace)
    if key in _checked:
        return
    desc = await client.describe(timeout=cfg.timeout)
    components, frames = desc["components"], desc["num_frames"]
    want = getattr(args, "pickscore_num_frames", None)
    if want is not None and "pickscore" in frames and frames["pickscore"] != int(want):
        raise ValueError(f"{cfg.namespace}/{cfg.pool} scores pickscore with numFrames {frames['pickscore']} but miles' "
                         f"--pickscore-num-frames is {want}: the rewards would differ from miles'; set the pool's "
                         f"scorer.numFrames to {want} (or drop the flag)")
    want = getattr(args, "hps_version", None)
    for name, ref in desc.get("scorers", {}).items():
        have = desc.get("args", {}).get(name, {}).get("version", HPS_DEFAULT_VERSION)
        if ref == "hps" and want is not None and have != want:
            raise ValueError(f"{cfg.namespace}/{cfg.pool} scores {name} with HPS {have} but miles' --hps-version is "
                             f"{want}: the rewards would differ from miles'; set that scorer's args.version to "
                             f"{want} (and its modelPath to that checkpoint)")
    if miles_key and len(components) > 1 and miles_key not in [*components, WEIGHTED]:
        raise ValueError(f"miles' --reward-key {miles_key!r} is not a component of {cfg.namespace}/{cfg.pool} "
                         f"({', '.join(components)}, {WEIGHTED}): give the component that key (spec.scorers[].key) "
                         "or pick one of these")
    _checked.add(key)


async def _score_on(cfg: HookConfig, args, samples: list, miles_key: str | None) -> list:
    """One pool's share of a call: score, set the samples' records, release when asked."""
    await _announce(cfg, args, time.monotonic())
    outputs = [as_output(s.generated_output) for s in samples]
    prompts = [s.prompt if isinstance(s.prompt, str) else str(s.prompt) for s in samples]
    client = _client(cfg)
    await check_pool(cfg, client, args, miles_key)
    rollouts = _rollouts.setdefault((cfg.pool, cfg.namespace), Rollouts())
    group = f"miles-rollout-{rollouts.begin(time.monotonic())}"
    try:
        report = await client.score_detailed(outputs, prompts, timeout=cfg.timeout, group=group)
    finally:
        rollouts.end(time.monotonic())
    rewards = []
    # the queue depth under the pool's name and each component's (miles' own pools record theirs by reward name)
    names = list(dict.fromkeys([cfg.pool, *(client.components or [])]))
    for i, (s, r) in enumerate(zip(samples, report.results)):
        for name in names:
            record_queue_depth(s, name, report.max_queue_depth)
        record_scorer_version(s, cfg.pool, report.version)
        if i in report.component_errors:
            record_component_errors(s, cfg.pool, report.component_errors[i])
        if isinstance(r, SampleError):
            if cfg.on_error == "raise":
                raise r.cause
            log.warning("sample %s not scored (%s); reward %s", r.index, r, cfg.on_error)
            rewards.append(_error_reward(cfg, miles_key, client.components))
        else:
            rewards.append(_value(r, cfg, miles_key))
    if cfg.release:
        refs = [o for o in outputs if isinstance(o, OutputRef)]
        rel = _releaser(cfg)
        await asyncio.to_thread(lambda: (rel.expect(refs), rel.rewarded(refs)))
        for s, o in zip(samples, outputs):
            if isinstance(o, OutputRef):
                s.generated_output = None
    return rewards
