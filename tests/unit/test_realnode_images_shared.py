"""A peer's image files hard-linked to the first node's identical ones (realnode_images.share_image_files): a blob
when its digest and size match, an unpacked layer when every file's path, size, mode and time do; anything else
keeps its own copy, and a second pass has nothing left to share."""
from __future__ import annotations

import os
from pathlib import Path

from rewardpool_devcluster.realnode_images import share_image_files

BLOBS = Path("io.containerd.content.v1.content/blobs/sha256")
SNAPS = Path("io.containerd.snapshotter.v1.overlayfs/snapshots")


def _root(base: Path, blobs: dict[str, bytes], layers: dict[str, dict[str, bytes]], mtime: int = 1_700_000_000):
    for name, data in blobs.items():
        (base / BLOBS).mkdir(parents=True, exist_ok=True)
        (base / BLOBS / name).write_bytes(data)
    for sid, files in layers.items():
        for rel, data in files.items():
            f = base / SNAPS / sid / "fs" / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
            os.utime(f, ns=(mtime * 10**9, mtime * 10**9))
    return base


def _same(a: Path, b: Path) -> bool:
    return a.stat().st_ino == b.stat().st_ino


def test_identical_blobs_and_layers_are_shared_and_the_rest_kept(tmp_path):
    layer = {"usr/lib/a.so": b"x" * 100, "etc/b": b"yy"}
    first = _root(tmp_path / "first", {"d1": b"blob-one", "d2": b"blob-two"}, {"7": layer, "8": {"only": b"1"}})
    # the peer: d1 the same blob; d2 named alike but another size (not trusted); the layer unpacked under another
    # id; a layer whose file differs in time (another layer)
    peer = _root(tmp_path / "peer", {"d1": b"blob-one", "d2": b"blob-2", "d3": b"mine"}, {"2": layer})
    _root(peer, {}, {"3": {"only": b"1"}}, mtime=1_700_000_001)
    shared = share_image_files(first, peer)
    assert _same(first / BLOBS / "d1", peer / BLOBS / "d1")
    assert not _same(first / BLOBS / "d2", peer / BLOBS / "d2") and (peer / BLOBS / "d2").read_bytes() == b"blob-2"
    for rel in layer:
        assert _same(first / SNAPS / "7" / "fs" / rel, peer / SNAPS / "2" / "fs" / rel)
    assert not _same(first / SNAPS / "8" / "fs" / "only", peer / SNAPS / "3" / "fs" / "only")
    assert shared == len(b"blob-one") + 100 + 2
    assert share_image_files(first, peer) == 0  # done once
    assert not list(peer.rglob("*.rewardpool-link"))


def test_an_empty_or_missing_root_shares_nothing(tmp_path):
    assert share_image_files(tmp_path / "none", tmp_path / "neither") == 0
    first = _root(tmp_path / "first", {"d1": b"a"}, {"1": {"f": b"a"}})
    assert share_image_files(first, tmp_path / "neither") == 0
