"""Kubernetes quantities <-> bytes (the subset the CRD's patterns admit)."""
from __future__ import annotations

import math
import re

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTPE]i|[kMGTPE])?$")


def parse_bytes(value: int | float | str) -> int:
    """'72Gi' -> 77309411328; ints pass through. Raises ValueError with the offending text."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    m = _RE.match(value.strip())
    if not m:
        raise ValueError(f"not a quantity: {value!r} (use e.g. 512Mi, 72Gi, 269M)")
    return math.ceil(float(m.group(1)) * _SUFFIX[m.group(2) or ""])


def format_bytes(n: int) -> str:
    """Largest binary unit that keeps an integer, else Mi rounded up (what a memory request would use)."""
    if n == 0:
        return "0"
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if n % _SUFFIX[unit] == 0:
            return f"{n // _SUFFIX[unit]}{unit}"
    return f"{math.ceil(n / 2**20)}Mi"


def human(n: int) -> str:
    """Readable size for messages and status (e.g. 79.6GiB)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"
