"""The copy pod's work on a real filesystem: copy, verify, publish, and every way it refuses (no room, a source
that is not there, a digest that differs), never leaving a half copy where workers read; a new source's copy
beside the old one, which workers may still mount."""
from __future__ import annotations

import json
import os

import pytest

from rewardpool_operator.modelcache import copier as cc
from rewardpool_operator.modelcache.agent import read_disk
from rewardpool_operator.modelcache.layout import copy_dir, data_dir, partial_dir, ready_file


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text('{"a": 1}')
    (src / "sub" / "weights.bin").write_bytes(os.urandom(3 << 20))
    return src


def test_copy_verifies_and_publishes(source, tmp_path):
    root = tmp_path / "root"
    ready = cc.copy(source, root, "pick", "id1")
    data = root / copy_dir("pick", "id1")
    assert (data / "config.json").read_text() == '{"a": 1}'
    assert (data / "sub" / "weights.bin").read_bytes() == (source / "sub" / "weights.bin").read_bytes()
    assert ready["bytes"] == 8 + (3 << 20) and ready["files"] == 2 and ready["identity"] == "id1"
    assert json.loads((root / ready_file("pick", "id1")).read_text())["digest"] == ready["digest"]
    assert not (root / partial_dir("pick")).exists()
    assert cc.intact(root, "pick", ready)
    disk = read_disk(root, "pick", "id1")
    assert disk.ready["digest"] == ready["digest"] and disk.ready_intact
    # the digest is the set's: the same files elsewhere give the same digest; one byte changes it
    again = cc.copy(source, tmp_path / "other", "pick", "id1")
    assert again["digest"] == ready["digest"]
    (source / "config.json").write_text('{"a": 2}')
    assert cc.copy(source, tmp_path / "third", "pick", "id1")["digest"] != ready["digest"]


def test_a_missing_file_breaks_intact(source, tmp_path):
    root = tmp_path / "root"
    ready = cc.copy(source, root, "pick", "id1")
    (root / copy_dir("pick", "id1") / "sub" / "weights.bin").unlink()
    assert not cc.intact(root, "pick", ready)
    assert read_disk(root, "pick", "id1").ready_intact is False


def test_out_of_disk_is_refused_before_copying(source, tmp_path):
    root = tmp_path / "root"
    with pytest.raises(cc.CopyError) as e:
        cc.copy(source, root, "pick", "id1", free_bytes=lambda _: 1 << 20)
    assert e.value.reason == "OutOfDisk" and "1048576 bytes free" in str(e.value)
    assert not (root / partial_dir("pick")).exists() and not (root / ready_file("pick", "id1")).exists()


def test_source_missing_or_empty(tmp_path):
    with pytest.raises(cc.CopyError) as e:
        cc.copy(tmp_path / "nope", tmp_path / "root", "pick", "id1")
    assert e.value.reason == "SourceNotFound"
    (tmp_path / "empty").mkdir()
    with pytest.raises(cc.CopyError) as e:
        cc.copy(tmp_path / "empty", tmp_path / "root", "pick", "id1")
    assert e.value.reason == "SourceEmpty"


def test_digest_mismatch_publishes_nothing(source, tmp_path):
    root = tmp_path / "root"
    with pytest.raises(cc.CopyError) as e:
        cc.copy(source, root, "pick", "id1", digest="sha256:" + "0" * 64)
    assert e.value.reason == "DigestMismatch"
    assert not (root / copy_dir("pick", "id1")).exists() and not (root / ready_file("pick", "id1")).exists()


def test_a_new_source_is_copied_beside_the_old_copy_which_stays_whole(source, tmp_path):
    """A worker may still mount the old copy: the new one lands beside it (one rename: all or nothing), the old
    one's files and manifest are untouched; which copies go is the agent's decision (plan_copies)."""
    root = tmp_path / "root"
    old = cc.copy(source, root, "pick", "id1")
    inode = (root / copy_dir("pick", "id1") / "sub" / "weights.bin").stat().st_ino
    new = tmp_path / "new"
    new.mkdir()
    (new / "config.json").write_text('{"b": 1}')
    ready = cc.copy(new, root, "pick", "id2")
    assert sorted(p.name for p in (root / data_dir("pick")).iterdir()) == ["id1", "id2"]
    assert sorted(p.name for p in (root / copy_dir("pick", "id2")).iterdir()) == ["config.json"]
    assert (root / copy_dir("pick", "id1") / "sub" / "weights.bin").stat().st_ino == inode
    assert cc.intact(root, "pick", old) and cc.intact(root, "pick", ready)
    assert json.loads((root / ready_file("pick", "id2")).read_text())["identity"] == "id2" == ready["identity"]
    assert read_disk(root, "pick", "id1").ready["digest"] == old["digest"] != ready["digest"]


def test_a_broken_copy_or_an_empty_subpath_folder_is_replaced_whole(source, tmp_path):
    """The kubelet makes a pod's missing subPath folder (empty) before the copy exists; a copy can lose a file. The
    copy of that identity replaces either whole."""
    root = tmp_path / "root"
    (root / copy_dir("pick", "id1")).mkdir(parents=True)  # as a kubelet makes it
    ready = cc.copy(source, root, "pick", "id1")
    assert cc.intact(root, "pick", ready)
    (root / copy_dir("pick", "id1") / "config.json").unlink()
    (root / copy_dir("pick", "id1") / "stray").write_text("x")
    assert not cc.intact(root, "pick", ready)
    again = cc.copy(source, root, "pick", "id1")
    assert cc.intact(root, "pick", again) and not (root / copy_dir("pick", "id1") / "stray").exists()


def test_main_writes_reason_and_exit_code(source, tmp_path, capsys):
    class A:
        pass
    args = A()
    args.source, args.root, args.cache, args.identity, args.digest = str(tmp_path / "nope"), str(tmp_path), "c", "i", None
    assert cc.main(args) == 1
    assert capsys.readouterr().err.startswith("SourceNotFound: ")
    args.source = str(source)
    assert cc.main(args) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 2


def test_a_copy_that_differs_from_what_was_read_is_not_published(source, tmp_path, monkeypatch):
    """A disk that writes something else than it was given (a flipped byte): the read-back catches it, nothing
    is published and the partial copy is gone."""
    real = cc._copy_file

    def flaky(src, dst):
        sha = real(src, dst)
        if dst.name == "weights.bin":
            data = bytearray(dst.read_bytes())
            data[-1] ^= 0xFF
            dst.write_bytes(bytes(data))
        return sha
    monkeypatch.setattr(cc, "_copy_file", flaky)
    root = tmp_path / "root"
    with pytest.raises(cc.CopyError) as e:
        cc.copy(source, root, "pick", "id1")
    assert e.value.reason == "VerifyFailed" and "sub/weights.bin" in str(e.value)
    assert not (root / ready_file("pick", "id1")).exists() and not (root / partial_dir("pick")).exists()
    assert list((root / data_dir("pick")).iterdir()) == []
    assert read_disk(root, "pick", "id1").ready is None
