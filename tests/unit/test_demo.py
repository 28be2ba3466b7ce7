"""The demo's pieces that are pure: its pool passes the operator's own checks with its models' claim mounted,
the model volume binds its one claim on the real node, and the per-output figures come from what workers
export."""
from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from rewardpool_devcluster import demo
from rewardpool_devcluster.incluster import real_node_pool
from rewardpool_operator.pool import builders, sizing, validate
from rewardpool_operator.api.spec import Pool
from rewardpool_worker.runtime.metrics import WorkerMetrics


def test_the_demo_pool_with_its_model_volume_passes_the_operators_checks():
    scorer, scorers = demo.pool_scorers({"pickscore": "clip-small", "hps": "hps-tiny", "ocr": "ppocr"})
    obj = real_node_pool(demo.POOL, demo.NS, "localhost/w:1", scorer=scorer, scorers=scorers, samples=demo.SAMPLES,
                         output_bytes=str(demo.OUTPUT_BYTES), frames_per_sample=demo.FRAMES)
    pool = Pool.from_object({**obj, "metadata": {**obj["metadata"], "uid": "u"}})
    size = sizing.compute(pool.spec)
    pod = builders.pod_template(pool, size)
    assert [p.reason for p in validate.check(pool.spec, pod) if p.blocking] == []
    worker = next(c for c in pod["spec"]["containers"] if c["name"] == "worker")
    # the one claim, mounted by the operator once per component at its directory (scorer.model.pvc)
    assert {"name": "rewardpool-model-0", "persistentVolumeClaim": {"claimName": demo.MODEL_CLAIM, "readOnly": True}} \
        in pod["spec"]["volumes"]
    assert [(m["mountPath"], m["subPath"]) for m in worker["volumeMounts"] if m["name"] == "rewardpool-model-0"] == \
        [("/models/pickscore", "clip-small"), ("/models/hps", "hps-tiny"), ("/models/ocr", "ppocr")]
    # miles' SD3.5 mixture under miles' reward names, ocr optional (a prompt without quoted text scores the rest)
    assert [c.get("name") for c in pool.spec.model_dump(by_alias=True)["scorers"]] == list(demo.COMPONENTS)
    assert [c.get("required", True) for c in scorers] == [True, True, False]
    # the models' memory is the demo's own figures, not the built-ins' defaults (4 GiB each for real weights)
    assert size.model_bytes < 2 * 2**30, size


def test_the_model_volume_binds_its_claim_on_the_real_node():
    pv, pvc = demo.model_volume(Path("/cache/models/clip-small-abc"))
    assert pv["spec"]["local"]["path"] == "/cache/models"
    assert pv["spec"]["claimRef"] == {"namespace": demo.NS, "name": demo.MODEL_CLAIM}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] and pvc["metadata"]["name"] == demo.MODEL_CLAIM
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == ["realnode"]


def test_per_output_figures_from_the_workers_metrics():
    texts = []
    for outputs, read, score, nbytes in ((3, 0.03, 0.3, 300_000), (1, 0.01, 0.1, 100_000)):
        m = WorkerMetrics("pickscore")
        m.update({"queue_depth": 0, "pending_bytes": 0, "draining": False, "outputs": outputs,
                  "bytes_read": nbytes, "batch_log": [(outputs, 0.0, read, score)]})
        texts.append(generate_latest(m.registry).decode())
    got = demo.worker_figures(texts)
    assert got["outputs"] == 4 and round(got["read_bytes"]) == 100_000
    assert abs(got["read_s"] - 0.01) < 1e-9 and abs(got["score_s"] - 0.1) < 1e-9


def test_the_demo_pool_reads_pickscore_from_its_image_and_the_others_from_the_claim():
    scorer, scorers = demo.pool_scorers({"pickscore": "clip-small", "hps": "hps-tiny", "ocr": "ppocr"},
                                        "localhost/rewardpool-model-pickscore-small:abc")
    obj = real_node_pool(demo.POOL, demo.NS, "localhost/w:1", scorer=scorer, scorers=scorers, samples=demo.SAMPLES,
                         output_bytes=str(demo.OUTPUT_BYTES), frames_per_sample=demo.FRAMES)
    pool = Pool.from_object({**obj, "metadata": {**obj["metadata"], "uid": "u"}})
    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    assert [p.reason for p in validate.check(pool.spec, pod) if p.blocking] == []
    images = [v for v in pod["spec"]["volumes"] if "image" in v]
    assert [v["image"] for v in images] == [{"reference": "localhost/rewardpool-model-pickscore-small:abc",
                                             "pullPolicy": "IfNotPresent"}]
    worker = next(c for c in pod["spec"]["containers"] if c["name"] == "worker")
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    assert mounts["/models/pickscore"]["name"] == images[0]["name"] and mounts["/models/pickscore"]["readOnly"]
    assert mounts["/models/hps"]["subPath"] == "hps-tiny"


def test_a_model_image_is_named_by_what_is_in_the_directory(tmp_path):
    from rewardpool_devcluster.realnode_images import MODEL_IMAGE, model_ref

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"1234")
    (tmp_path / "sub" / "b.json").write_text("{}")
    ref = model_ref(tmp_path, "pick")
    assert ref.startswith(f"{MODEL_IMAGE}pick:") and ref == model_ref(tmp_path, "pick")
    (tmp_path / "a.bin").write_bytes(b"12345")  # a rebuilt model: another image
    assert model_ref(tmp_path, "pick") != ref
    (tmp_path / "a.bin").chmod(0o600)
    before = model_ref(tmp_path, "pick")
    (tmp_path / "a.bin").chmod(0o644)  # made readable to all (what the packaging does): another image too
    assert model_ref(tmp_path, "pick") != before
