"""The image import's plumbing (buildah push -> fifo -> ctr import) with stand-in commands: a push that fails
before it opens the fifo must not leave the import waiting on it forever, and a good stream goes through."""
from __future__ import annotations

import subprocess
import sys

import pytest

from rewardpool_devcluster.node_images import import_missing


def fake_ctr(have: str, seen: list):
    def ctr(*args, check=True, timeout=900, popen=False):
        seen.append(args)
        if popen:  # the import reads the stream to its end, as ctr does
            return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(0 if open(sys.argv[1], 'rb').read() "
                                     "else 1)", args[-1]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return subprocess.CompletedProcess(args, 0, have, "")
    return ctr


def test_a_push_that_fails_early_ends_the_import_with_both_errors(tmp_path):
    seen: list = []
    buildah = ["bash", "-c", 'echo "image not known" >&2; exit 125', "buildah"]
    with pytest.raises(RuntimeError, match="buildah push exited 125 .*image not known.*ctr import exited"):
        import_missing(fake_ctr("", seen), buildah, ["localhost/x:1"], set(), tmp_path / "fifo")
    assert not (tmp_path / "fifo").exists()


def test_present_images_are_skipped_and_old_builds_removed_first(tmp_path):
    seen: list = []
    # a stand-in push that writes the archive into the fifo (its last argument names it)
    buildah = ["bash", "-c", 'f=${3#docker-archive:}; f=${f%%:*}; echo archive > "$f"', "buildah"]
    have = "localhost/rewardpool-worker:dev-old\nlocalhost/pause:1\n"
    took = import_missing(fake_ctr(have, seen), buildah, ["localhost/pause:1", "localhost/rewardpool-worker:dev-new"],
                          {"localhost/rewardpool-worker:dev-new"}, tmp_path / "fifo")
    assert list(took) == ["localhost/rewardpool-worker:dev-new"]
    assert ("images", "rm", "--sync", "localhost/rewardpool-worker:dev-old") in seen
    assert seen.index(("images", "rm", "--sync", "localhost/rewardpool-worker:dev-old")) < len(seen) - 1


def test_the_install_step_reads_the_last_line_images_sh_prints(tmp_path, monkeypatch):
    """images.sh's stdout may carry buildah's own lines before its answer (the cold check's first run had)."""
    import json
    import os

    from rewardpool_devcluster import node_images

    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "owner.json").write_text(json.dumps({"pid": os.getpid(), "netns": "x"}))  # a live node
    line = "sha256:0123abcd\nlocalhost/rewardpool-operator:dev-1 localhost/rewardpool-worker:dev-1 localhost/pause:1 /s\n"
    assert node_images.preimport(line, tmp_path, tmp_path / "bin") == 0  # parsed, then left to the running node
