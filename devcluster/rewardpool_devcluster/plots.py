"""Timeline plots of the benchmarks (PNG next to their JSON), drawn headless with matplotlib's Agg backend.

`bench autoscale`: one panel per configuration: desired and Ready workers, the client's outstanding outputs
and the pool's queue depth, the store's fill against its eviction watermark, rollouts as shaded spans and
scale events as markers. `bench operator`: pods Ready over time, ReplicaSets and RewardPools on one axis."""
from __future__ import annotations

from pathlib import Path

EVICTION_WATERMARK = 0.9  # mooncake_master's default eviction_high_watermark_ratio


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def autoscale_timeline(result: dict, configs: list[str], path: Path) -> Path:
    """`result[config]["timeline"]`: samples {t, desired, ready, serving, outstanding, queue, fill};
    `result[config]["rollout_spans"]`: [(start, end)] in the same clock (seconds from the pool's creation)."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(configs), 1, figsize=(11, 2.9 * len(configs)), squeeze=False, sharex=False)
    for ax, name in zip(axes[:, 0], configs):
        run = result[name]
        tl = run.get("timeline") or []
        t = [s["t"] for s in tl]
        for i, (a, b) in enumerate(run.get("rollout_spans", [])):
            ax.axvspan(a, b, color="0.92", zorder=0, label="rollout" if i == 0 else None)
        ax.step(t, [s["desired"] for s in tl], where="post", color="tab:blue", label="desired workers")
        ax.step(t, [s["ready"] for s in tl], where="post", color="tab:green", lw=0.8, label="Ready pods")
        if tl and "serving" in tl[0]:  # the worker's actor is up: what the client can route to
            ax.step(t, [s["serving"] for s in tl], where="post", color="tab:olive", ls="-.",
                    label="workers serving")
        changes = [(s["t"], s["desired"]) for prev, s in zip(tl, tl[1:]) if s["desired"] != prev["desired"]]
        if changes:
            ax.scatter(*zip(*changes), color="tab:blue", marker="v", zorder=3, label="scale event")
        ax.set_ylabel("workers")
        ax.set_ylim(bottom=0)
        q = ax.twinx()
        q.plot(t, [s["outstanding"] for s in tl], color="tab:orange", lw=0.9, label="outstanding outputs (client)")
        q.plot(t, [s["queue"] for s in tl], color="tab:red", lw=0.9, ls="--", label="pool queue depth (status)")
        q.plot(t, [100 * s["fill"] for s in tl], color="tab:purple", lw=0.9, label="store fill %")
        q.axhline(100 * EVICTION_WATERMARK, color="tab:purple", ls=":", lw=0.9, label="eviction watermark")
        q.set_ylabel("outputs / fill %")
        q.set_ylim(bottom=0)
        ax.set_title(f"{name}: rollouts "
                     + ", ".join(f"{r['ratio_to_generation_bound']}x" for r in run.get("rollouts", []))
                     + " of the generation bound", fontsize=10)
        ax.set_xlabel("seconds since the pool was created")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = q.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def operator_timeline(out: dict, path: Path) -> Path:
    """`out[path]["ready_timeline"]`: [(seconds since the first create, pods Ready)] for "replicaset" and
    "rewardpool"."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for key, label, color in (("replicaset", "ReplicaSets (in-tree controller)", "tab:gray"),
                              ("rewardpool", "RewardPools (this operator)", "tab:blue")):
        tl = (out.get(key) or {}).get("ready_timeline")
        if tl:
            ax.step([a for a, _ in tl], [b for _, b in tl], where="post", color=color,
                    label=f"{label}: all Ready in {out[key]['all_ready_s']} s")
    ax.axhline(out["pods"], color="k", ls=":", lw=0.8)
    ax.set_xlabel("seconds since the first create")
    ax.set_ylabel("pods Ready")
    ax.set_title(f"{out['pools']} x {out['workers_per_pool']} workers ({out['pods']} pods), {out['cores']} cores",
                 fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# (label, how to read its seconds from a cold start's row) in the order they happen
COLDSTART_PHASES = [
    ("pod created, scheduled, container started",
     lambda r: max(0.0, r["scale_to_created"]) + r["created_to_scheduled"] + r["scheduled_to_started"]),
    ("imports", lambda r: r["startup"].get("imports_seconds", 0.0)),
    ("Ray", lambda r: r["startup"].get("network_seconds", 0.0) + r["startup"].get("ray_seconds", 0.0)),
    ("model wait", lambda r: r["startup"].get("model_wait_seconds", 0.0)),
    ("actor, store client, buffers", lambda r: r["startup"].get("actor_seconds", 0.0)
     - r["startup"].get("weight_load_seconds", 0.0) - r["startup"].get("warmup_seconds", 0.0)),
    ("weight load", lambda r: r["startup"].get("weight_load_seconds", 0.0)),
    ("warm-up forward", lambda r: r["startup"].get("warmup_seconds", 0.0)),
]


def coldstart_timeline(rows: list[dict], path: Path) -> Path:
    """`bench coldstart`: one bar per cold start, its phases end to end from the scale-up, then the wait for the
    pool's Ready (probe, status) and the first score; the disk's own read time of the weights marked on the
    weight-load phase."""
    plt = _pyplot()
    colors = ["0.7", "tab:blue", "tab:cyan", "tab:gray", "tab:olive", "tab:red", "tab:orange"]
    fig, ax = plt.subplots(figsize=(11, 1.8 + 0.8 * len(rows)))
    for y, r in enumerate(rows):
        start = 0.0
        for (label, f), color in zip(COLDSTART_PHASES, colors):
            width = max(0.0, f(r))
            ax.barh(y, width, left=start, color=color, label=label if y == 0 else None)
            if label == "weight load" and r.get("disk_seconds"):
                ax.plot([start + r["disk_seconds"]] * 2, [y - 0.4, y + 0.4], color="k", lw=1.5,
                        label="disk's own read (dd)" if y == 0 else None)
            start += width
        ax.barh(y, max(0.0, r["pool_ready_seen"] - start), left=start, color="tab:green",
                label="to pool Ready (probe, status)" if y == 0 else None)
        ax.barh(y, max(0.0, r["first_score"] - r["pool_ready_seen"]), left=r["pool_ready_seen"], color="k",
                label="first score" if y == 0 else None)
        ax.text(r["first_score"] + 0.5, y, f"{r['first_score']:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from replicas 0 -> 1")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
