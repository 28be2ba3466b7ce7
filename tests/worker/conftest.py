"""Worker-test fixtures: real worker actors (the worker's own Ray actor class, each with its own store client
against the session's real mooncake_master) started as a pod's entrypoint starts them. They lend no segment
(pure readers): a killed worker leaves no dead segment behind for the next test's puts to land in."""
from __future__ import annotations

import pytest
import ray

from rewardpool_worker.contract import RayConfig, ScorerConfig, StoreConfig, WorkerConfig
from rewardpool_worker.runtime.actor import start_actor

KEY = "test-control-key"  # what the tests' workers take drain and promote with (a pod's entrypoint draws its own)


def pool_cfg(master, pool: str, scorer: dict, ns: str = "t", scorers: list[dict] | None = None) -> WorkerConfig:
    return WorkerConfig(pool=pool, namespace=ns,
                        store=StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                          local_buffer_bytes=16 << 20),
                        scorer=ScorerConfig(**scorer), scorers=[ScorerConfig(**s) for s in scorers or []],
                        ray=RayConfig(namespace="rewardpool"), read_buffer_bytes=1 << 20)


@pytest.fixture()
def pool_actors(ray_cluster, master):
    """pool_actors(pool, n, scorer, scorers=None) -> handles of n new workers of that pool."""
    made, count = [], {}

    def make(pool, n, scorer=None, scorers=None):
        cfg = pool_cfg(master, pool, scorer or {"name": "mean-intensity"}, scorers=scorers)
        for _ in range(n):
            i = count[pool] = count.get(pool, -1) + 1
            made.append(start_actor(cfg, f"{pool}-pod-{i}", "127.0.0.1", control_key=KEY))
        return made[-n:]
    yield make
    for a in made:
        try:
            ray.kill(a)
        except Exception:
            pass


def get_json(port: int, path: str, timeout: float = 5) -> tuple[int, dict]:
    """A worker's HTTP answer on loopback as (status, JSON body); (0, {}) while nothing answers."""
    import json
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}


def start_entrypoint(pool, tmp_path, pod_name: str, wait: bool = True, engine_url: str | None = None, **env):
    """The worker entrypoint as a pod runs it, from the config the operator renders for `pool` (its HTTP port on a
    free loopback port; a hosted judge's engine at `engine_url` when given, where the test runs it), waited for
    until Ready (unless `wait` is False). Returns (process, port, log path, the /readyz answer or None); the caller
    stops the process."""
    import json
    import os
    import subprocess
    import sys

    from rewardpool_devcluster.cluster import free_port
    from rewardpool_operator.pool import builders, sizing
    from tests.conftest import wait_for

    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    cfg = json.loads({e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]
                      if "value" in e}["REWARDPOOL_WORKER_CONFIG"])
    cfg["http_port"] = port = free_port()
    for c in [cfg["scorer"], *cfg.get("scorers", [])]:
        if engine_url and c.get("engine"):
            c["engine"]["url"] = engine_url
    log_path = tmp_path / "worker.log"
    proc = subprocess.Popen([sys.executable, "-m", "rewardpool_worker.runtime.main"], env={
        **os.environ, "REWARDPOOL_WORKER_CONFIG": json.dumps(cfg), "POD_NAME": pod_name, "POD_IP": "127.0.0.1",
        "REWARDPOOL_HTTP_HOST": "127.0.0.1", "REWARDPOOL_ANNOTATIONS_FILE": str(tmp_path / "x"), **env},
        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)

    def ready():
        assert proc.poll() is None, log_path.read_text()[-3000:]
        code, body = get_json(port, "/readyz", timeout=2)
        return body if code == 200 else None
    if not wait:
        return proc, port, log_path, None
    try:
        info = wait_for(ready, timeout=120, what="the worker Ready")
    except BaseException:
        proc.kill()
        raise
    return proc, port, log_path, info
