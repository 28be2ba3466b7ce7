"""The cold-start bench's pure pieces: its pools pass the operator's own checks with their models from the claim
(scorer.model.pvc at each model's directory) and the file-set scorer mounted from its ConfigMap; the table puts
each worker's weight load next to the disk's own read of the same files."""
from __future__ import annotations

from pathlib import Path

from rewardpool_devcluster import bench_coldstart as bc
from rewardpool_operator.pool import builders, sizing, validate
from rewardpool_operator.api.spec import Pool


def test_the_cold_start_pools_mount_their_models_from_the_claim():
    models = {"pickscore": Path("/cache/coldstart-models/clip-h14-5.0"), "fileset": Path("/cache/coldstart-models/fileset-16g")}
    for obj, sub, path in zip(bc.pools("localhost/w:1", models), ("clip-h14-5.0", "fileset-16g"),
                              ("/models/pickscore", "/models/FileSetScorer")):
        pool = Pool.from_object({**obj, "metadata": {**obj["metadata"], "uid": "u"}})
        assert pool.spec.replicas == 0
        pod = builders.pod_template(pool, sizing.compute(pool.spec))
        assert [p.reason for p in validate.check(pool.spec, pod) if p.blocking] == []
        worker = pod["spec"]["containers"][0]
        assert {"name": "rewardpool-model-0", "mountPath": path, "readOnly": True, "subPath": sub} in worker["volumeMounts"]
        assert {"name": "rewardpool-model-0", "persistentVolumeClaim": {"claimName": bc.CLAIM, "readOnly": True}} \
            in pod["spec"]["volumes"]
    files = bc.pools("localhost/w:1", models)[1]["spec"]["podTemplate"]["spec"]
    assert files["volumes"] == [{"name": "scorer", "configMap": {"name": "coldstart-scorer"}}]
    pv, pvc, cm = bc.volume(Path("/cache/coldstart-models"))
    assert pv["spec"]["local"]["path"] == "/cache/coldstart-models" and pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert "class FileSetScorer" in cm["data"]["fileset_scorer.py"]


def test_the_cache_variant_reads_the_same_models_through_their_caches():
    models = {"pickscore": Path("/cache/coldstart-models/clip-h14-5.0"), "fileset": Path("/cache/coldstart-models/fileset-16g")}
    objs = bc.caches(Path("/cache/coldstart-models"), models)
    pv, pvc, *cs = objs
    assert pvc["metadata"]["namespace"] == bc.OPERATOR_NS and pv["spec"]["claimRef"]["name"] == bc.SOURCE_CLAIM
    assert [c["spec"]["source"]["pvc"] for c in cs] == [{"claimName": bc.SOURCE_CLAIM, "subPath": "clip-h14-5.0"},
                                                         {"claimName": bc.SOURCE_CLAIM, "subPath": "fileset-16g"}]
    for obj, cache in zip(bc.pools("localhost/w:1", models, "cache"), (c["metadata"]["name"] for c in cs)):
        assert obj["metadata"]["name"].endswith("-cache")
        pool = Pool.from_object({**obj, "metadata": {**obj["metadata"], "uid": "u"}})
        pod = builders.pod_template(pool, sizing.compute(pool.spec))
        assert [p.reason for p in validate.check(pool.spec, pod) if p.blocking] == []
        assert {"name": "rewardpool-model-0", "persistentVolumeClaim": {"claimName": f"rewardpool-cache-{cache}",
                                                                        "readOnly": True}} in pod["spec"]["volumes"]


def test_the_file_set_scorer_reads_every_byte(tmp_path):
    ns: dict = {}
    exec(compile(bc.FILESET_SCORER, "fileset_scorer.py", "exec"), ns)
    (tmp_path / "a").write_bytes(b"x" * 100)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b").write_bytes(b"y" * 23)
    s = ns["FileSetScorer"](str(tmp_path))
    assert s.bytes == 123 and s.read_seconds >= 0


def test_the_table_sets_the_weight_load_beside_the_disks_read():
    row = {"label": "CLIP-H/14", "pool": "cold-pickscore", "scale_to_created": 0.1, "created_to_scheduled": 0.0,
           "scheduled_to_started": 1.0, "pool_ready_seen": 30.0, "first_score": 31.5,
           "startup": {"imports_seconds": 3.0, "actor_seconds": 14.0, "weight_load_seconds": 8.0,
                       "warmup_seconds": 4.0, "weight_bytes": 3.9e9, "store_seconds": 1.5, "digest_seconds": 6.5}}
    text = bc.table([row], {"cold-pickscore": (5.0, int(3.9e9))})
    assert "| worker: **weight load** | 8.00 |" in text and "| weight load / disk read | 1.60x |" in text
    assert "| worker: actor, store client and registered buffers (outside the weight load) | 2.00 |" in text
    assert "| worker: beside it, store client and registered buffers | 1.50 |" in text
    assert "| worker: beside it, the weights' digest | 6.50 |" in text
    assert "| **zero to first score** | **31.5** |" in text and "3.90 GB" in text


def test_the_timeline_plot_draws_each_cold_start(tmp_path):
    from rewardpool_devcluster.plots import COLDSTART_PHASES, coldstart_timeline

    row = {"label": "(a) PVC", "scale_to_created": -0.1, "created_to_scheduled": 0.0, "scheduled_to_started": 1.0,
           "startup": {"imports_seconds": 8.0, "ray_seconds": 8.0, "actor_seconds": 25.0, "weight_load_seconds": 8.0,
                       "warmup_seconds": 7.0}, "pool_ready_seen": 45.0, "first_score": 52.0, "disk_seconds": 8.4}
    assert [round(f(row), 2) for _, f in COLDSTART_PHASES] == [1.0, 8.0, 8.0, 0.0, 10.0, 8.0, 7.0]
    path = coldstart_timeline([row, {**row, "label": "(c) cache"}], tmp_path / "t.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_image_case_runs_the_models_that_have_an_image_from_an_image_volume():
    models = {"pickscore": Path("/cache/coldstart-models/clip-h14-5.0"), "fileset": Path("/cache/coldstart-models/fileset-16g")}
    (pick,) = bc.pools("localhost/w:1", models, "image", {"pickscore": "localhost/rewardpool-model-x:1"})
    assert pick["metadata"]["name"] == "cold-pickscore-image" and pick["spec"]["replicas"] == 0
    assert pick["spec"]["scorer"]["model"] == {"image": {"reference": "localhost/rewardpool-model-x:1",
                                                         "pullPolicy": "IfNotPresent"}}
