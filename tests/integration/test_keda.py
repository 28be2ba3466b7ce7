"""The HPA/KEDA path on the real control plane: the operator exports each pool's demand on its /metrics under
the names the KEDA example queries, the example ScaledObject is valid against KEDA's own CRD (v2.21.0, fetched
from the Go module proxy by the install step), and what KEDA would do (write /scale) moves the pool."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rewardpool_devcluster.stack import kubectl, third_party_crds
from tests.conftest import wait_for
from tests.factories import pool_manifest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "keda-scaledobject.yaml"


@pytest.fixture(scope="module")
def keda_crd(chart):
    crd = third_party_crds() / "keda.sh_scaledobjects.yaml"
    kubectl(chart, "apply", "--server-side", "-f", str(crd))
    chart.wait_crd_established("scaledobjects.keda.sh")
    return crd


def test_example_scaled_object_is_valid_for_keda(keda_crd, chart):
    kubectl(chart, "create", "namespace", "rl", check=False)
    res = kubectl(chart, "apply", "--dry-run=server", "--server-side", "-f", str(EXAMPLE), check=False)
    assert res.returncode == 0, res.stderr
    # A broken one is refused by the same schema (the check can fail).
    bad = yaml.safe_load(EXAMPLE.read_text())
    bad["spec"]["triggers"][0]["metadata"] = "not-a-map"
    res = kubectl(chart, "apply", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False)
    assert res.returncode != 0


def test_operator_exports_the_metrics_the_example_queries(pools, ns, operator):
    pools.create(pool_manifest("kd", replicas=2))
    pools.wait_ready("kd", 2)
    query = yaml.safe_load(EXAMPLE.read_text())["spec"]["triggers"][0]["metadata"]["query"]
    names = set(re.findall(r"(rewardpool_[a-z_]+)\{", query))
    assert names == {"rewardpool_pool_queue_depth", "rewardpool_pool_expected_outputs"}

    def exported(ready=2):
        from prometheus_client.parser import text_string_to_metric_families
        import urllib.request

        text = urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5).read().decode()
        found = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.labels.get("namespace") == ns and s.labels.get("pool") == "kd"}
        return found if names <= set(found) and found.get("rewardpool_pool_ready_replicas") == ready else None
    found = wait_for(exported, 60, what="the pool's metrics on the operator's /metrics")
    assert found["rewardpool_pool_desired_replicas"] == 2

    # What KEDA does with them: write /scale. The pool follows, and the metrics with it.
    pools.co.patch_namespaced_custom_object_scale("rewardpool.io", "v1alpha1", ns, "rewardpools", "kd",
                                                  {"spec": {"replicas": 3}})
    pools.wait_ready("kd", 3)
    found = wait_for(lambda: exported(ready=3), 60, what="ready replicas 3 on /metrics")
    assert found["rewardpool_pool_desired_replicas"] == 3
