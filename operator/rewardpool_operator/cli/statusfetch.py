"""`rewardpool status`'s print/watch loop: one frame from the cluster's reads (cluster/statusreads.py), printed by
statusview (pure)."""
from __future__ import annotations

import asyncio
import signal
import sys
import time

from ..cluster.kube import ApiException, api_message
from ..cluster.statusreads import (CONFIG_ERRORS, CONNECT_ERRORS, ApiClient, all_health, connect, list_pools,
                                   pool_events, pool_pods, read_pool)
from . import statusview

CLEAR = "\033[H\033[2J"  # cursor home + clear screen: what `watch` does between frames


# ---- one frame -------------------------------------------------------------------------------------------------
async def frame(api: ApiClient, pool_name: str | None, ns: str | None) -> tuple[str, bool]:
    """(text, found). ns None: every namespace (only without a pool name)."""
    if pool_name is None:
        return statusview.render_pools(await list_pools(api, ns), time.time(), ns), True
    pool = await read_pool(api, ns, pool_name)
    if pool is None:
        return f"RewardPool {ns}/{pool_name} not found.\n", False
    pods, events = await asyncio.gather(pool_pods(api, pool, statusview.pod_selector(pool["metadata"]["name"])),
                                         pool_events(api, pool))
    health, errors = await all_health(api, pods)
    return statusview.render_pool(pool, pods, events, health, time.time(), errors), True


async def run(pool_name: str | None, namespace: str | None, all_namespaces: bool, watch: bool, interval: float,
              kubeconfig: str | None = None, context: str | None = None, out=None) -> int:
    out = out or sys.stdout
    try:
        api, default_ns = await connect(kubeconfig, context)
    except CONFIG_ERRORS as e:  # no or a broken kubeconfig: say so, as kubectl does
        print(f"error: no usable Kubernetes config: {e}", file=sys.stderr)
        return 1
    ns = None if all_namespaces else (namespace or default_ns)
    # A watch ends on Ctrl-C (or SIGTERM) at once, whatever it is waiting for: the signal sets `stop`, and the
    # frame being fetched is dropped.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if watch:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    try:
        while not stop.is_set():
            fetch = asyncio.ensure_future(frame(api, pool_name, ns))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({fetch, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if stop.is_set():
                fetch.cancel()
                await asyncio.gather(fetch, return_exceptions=True)
                break
            try:
                text, found = fetch.result()
            except ApiException as e:  # in a watch, an API hiccup is shown and the next frame tries again
                text, found = f"error: {api_message(e)}\n", False
            except CONNECT_ERRORS as e:
                text, found = f"error: cannot reach the API server: {e}\n", False
            if not watch:
                (out if found else sys.stderr).write(text)
                return 0 if found else 1
            header = f"Every {interval:g}s: rewardpool status {pool_name or ''}  {time.strftime('%H:%M:%S')}\n\n"
            out.write(CLEAR + header + text)
            out.flush()
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
        return 0
    finally:
        if watch:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        await api.close()
