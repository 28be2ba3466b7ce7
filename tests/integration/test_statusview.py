"""`rewardpool status` against the real control plane: the command as a user runs it, with the cluster's
kubeconfig, reading a pool the operator made Ready (kwok pods: their /healthz cannot be reached, which the
view must survive and explain)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.conftest import wait_for
from tests.factories import pool_manifest

STATUS = [sys.executable, "-m", "rewardpool_operator.cli", "status"]


def status_env(cluster) -> dict:
    return {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}


def test_status_shows_the_pools_workers_and_watch_redraws_until_ctrl_c(pools, ns, cluster):  # noqa: F811
    pools.create(pool_manifest("sv", replicas=2))
    pools.wait_ready("sv", 2)
    names = sorted(p.metadata.name for p in pools.pods("sv"))

    done = subprocess.run([*STATUS, "sv", "-n", ns], env=status_env(cluster), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"RewardPool {ns}/sv") and "Replicas:    2/2 ready" in out
    rows = {line.split()[0]: line.split() for line in out.split("Workers (2):")[1].splitlines()[2:4]}
    assert sorted(rows) == names and all(r[1:3] == ["Running", "True"] for r in rows.values()), out
    # kwok pods have fake IPs: the pod proxy cannot reach them; dashes, and the reason once
    assert all(r[4:] == ["-"] * 4 for r in rows.values()), out  # worker phase, queue, in flight, last batch
    assert out.count("no /healthz from 2 of 2 workers through the API server's pod proxy") == 1, out
    assert "WorkerCreated" in out.split("Events (last 5):")[1], out

    table = subprocess.run([*STATUS, "-n", ns], env=status_env(cluster), capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and table.stdout.splitlines()[1].split()[:2] == ["sv", "2/2"], table

    missing = subprocess.run([*STATUS, "nope", "-n", ns], env=status_env(cluster), capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 1 and f"RewardPool {ns}/nope not found" in missing.stderr

    watch = subprocess.Popen([*STATUS, "sv", "-n", ns, "--watch", "--interval", "0.5"], env=status_env(cluster),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    errs: list[str] = []  # stderr read as it comes too: a full pipe would block the process it is waited on
    threading.Thread(target=lambda: seen.extend(iter(lambda: watch.stdout.read(1), "")), daemon=True).start()
    threading.Thread(target=lambda: errs.extend(iter(watch.stderr.readline, "")), daemon=True).start()
    try:
        frames = lambda: "".join(seen).count("Every 0.5s: rewardpool status sv")  # noqa: E731
        started = time.monotonic()
        wait_for(lambda: frames() >= 2, 20, 0.1, what="two frames of --watch")
        assert time.monotonic() - started < 20
        watch.send_signal(signal.SIGINT)
        try:
            rc = watch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            watch.send_signal(signal.SIGUSR1)  # its threads' stacks to stderr (faulthandler): where it hangs
            time.sleep(2)
            raise AssertionError(f"--watch still running 30s after Ctrl-C; stderr: {''.join(errs)[-6000:]}") from None
        assert rc == 0, "".join(errs)[-3000:]
    finally:
        if watch.poll() is None:
            watch.kill()
    text = "".join(seen)
    assert text.count("\033[H\033[2J") >= 2 and all(n in text for n in names)
