"""The worker's own RoCE address: Multus writes the attached interfaces into the pod annotation
`k8s.v1.cni.cncf.io/network-status`, which the Downward API puts in a file; the store client must bind to
the ipvlan address, not the pod IP."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..contract import ROCE_INTERFACE

NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"


def parse_annotations_file(text: str) -> dict[str, str]:
    """The Downward API annotations file: one `key="value"` per line, value a Go-quoted string."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = json.loads(value)  # Go's %q quoting is JSON-compatible for these values
    return out


def roce_address(annotations: dict[str, str], attachment: str | None, interface: str = ROCE_INTERFACE) -> str | None:
    """The first IP Multus reports for the attachment (namespace/name) or the interface; None if absent."""
    raw = annotations.get(NETWORK_STATUS)
    if not raw:
        return None
    for net in json.loads(raw):
        if (attachment and net.get("name") == attachment) or net.get("interface") == interface:
            ips = net.get("ips") or []
            if ips:
                return ips[0]
    return None


def local_hostname(protocol: str, attachment: str | None, annotations_file: str | Path,
                   pod_ip: str | None = None, wait: float = 0.0) -> str:
    """The address the store client announces: the RoCE address under rdma; the pod IP under tcp (or the RoCE
    address when present). Raises with a clear message when rdma has no RoCE address.

    Multus writes `network-status` while the pod sandbox is set up, after the kubelet first wrote the Downward
    API file: with an attachment configured, wait up to `wait` seconds for the kubelet to refresh the file."""
    path = Path(annotations_file)
    deadline = time.monotonic() + wait
    while True:
        ann = {}
        if path.exists():
            try:
                ann = parse_annotations_file(path.read_text())
            except ValueError:  # a partial write: read again
                ann = {}
        addr = roce_address(ann, attachment)
        if addr:
            return addr
        if not attachment or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    pod_ip = pod_ip or os.environ.get("POD_IP")
    if protocol == "rdma" and attachment:
        raise RuntimeError(f"no address for the RoCE attachment {attachment} in {NETWORK_STATUS} ({path}); "
                           "is Multus attaching the network?")
    if not pod_ip:
        raise RuntimeError("no POD_IP and no RoCE address: cannot tell the store where this worker is")
    return pod_ip
