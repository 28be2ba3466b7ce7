"""The operator's reading of a segment's usage, on answers captured from a real mooncake_master 0.3.13.post1:
a segment being unmounted gracefully (a draining worker's) and a standby master of a highly available pair."""
from __future__ import annotations

import json

from rewardpool_worker.contract import segment_used

SEG = "10.252.0.7:12641"
UNMOUNTING = json.dumps({"total_segments": 1, "segments": [{
    "segment_name": SEG, "segment_id": "4345449653053509697-6152962674172902045", "size_bytes": 33554432,
    "protocol": "tcp", "status": "GRACEFULLY_UNMOUNTING", "allocator_used_bytes": 0,
    "allocator_capacity_bytes": 0, "allocator_usage_percent": 0.0}]})
METRICS = f"""# HELP segment_allocated_bytes Total memory bytes currently allocated of the segment
# TYPE segment_allocated_bytes gauge
segment_allocated_bytes{{segment="{SEG}"}} 1000
segment_allocated_bytes{{segment="10.252.0.8:14019"}} 5000
# HELP segment_total_capacity_bytes Total memory capacity of the mounted segment
# TYPE segment_total_capacity_bytes gauge
segment_total_capacity_bytes{{segment="{SEG}"}} 33554432
"""


def test_a_gracefully_unmounting_segment_still_counts_what_it_holds():
    assert segment_used(UNMOUNTING, METRICS, SEG) == 1000  # the detail says 0; the series still counts it


def test_a_mounted_segment_reads_from_the_detail_and_an_unlisted_one_is_empty():
    ok = json.loads(UNMOUNTING)
    ok["segments"][0].update(status="OK", allocator_used_bytes=2048)
    assert segment_used(json.dumps(ok), None, SEG) == 2048
    assert segment_used(json.dumps({"total_segments": 0, "segments": []}), "", SEG) == 0


def test_a_master_whose_detail_does_not_answer_leaves_the_usage_unknown():
    # a standby answers the detail with 503 ("service plane is not active") while its /metrics answer lists
    # no segment: that must read as unknown (the drain waits), never as empty (the pod would be deleted)
    assert segment_used(None, "# TYPE master_allocated_bytes gauge\nmaster_allocated_bytes 0\n", SEG) is None


def test_a_workers_reported_version_is_read_from_its_score_series():
    from prometheus_client import CollectorRegistry, generate_latest

    from rewardpool_operator.controller.workers import reported_version
    from rewardpool_worker.contract import WorkerMetricNames

    reg = CollectorRegistry()
    WorkerMetricNames.SCORE.make(reg, buckets=(0.5, 1.0)).labels("pickscore", "3f9a1c-0a1b2c3d")
    assert reported_version(generate_latest(reg).decode()) == "3f9a1c-0a1b2c3d"
    assert reported_version("# nothing here\n") is None
