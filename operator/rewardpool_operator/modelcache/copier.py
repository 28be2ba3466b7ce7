"""`rewardpool cache-copy`: the copy pod's work. Copies a cache's source into ROOT/<cache>/partial with a sha256 of
each file taken as it is read, checks the node has room first, reads the copy back and compares (size and digest),
then renames the whole folder to ROOT/<cache>/data/<identity> (one rename on one filesystem: a worker mounting
that copy sees all of it or none; copies of other identities, which running workers may mount, are not touched)
and writes its manifest ready/<identity>.json last. Its failure is its termination message."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from .layout import COPY_REASONS, copy_dir, partial_dir, progress_file, ready_file

CHUNK = 8 << 20
HEADROOM = 64 << 20  # left free on the node's disk beyond the copy


class CopyError(Exception):
    """reason (a CamelCase word for the status) and message."""

    def __init__(self, reason: str, message: str):
        assert reason in COPY_REASONS, reason
        super().__init__(message)
        self.reason = reason


def source_files(source: Path) -> list[tuple[str, int]]:
    """(relative path, size) of every regular file under source, sorted; symlinks are followed within source."""
    if not source.is_dir():
        raise CopyError("SourceNotFound", f"the source {source} is not a directory")
    out = []
    for dirpath, _, names in os.walk(source, followlinks=False):
        for n in names:
            p = Path(dirpath, n)
            if p.is_file():
                out.append((str(p.relative_to(source)), p.stat().st_size))
    if not out:
        raise CopyError("SourceEmpty", f"the source {source} holds no files")
    return sorted(out)


def manifest_digest(files: list[tuple[str, int, str]]) -> str:
    """The digest of a file set: sha256 over its sorted (path, size, sha256) lines. The same on every node."""
    h = hashlib.sha256()
    for path, size, digest in sorted(files):
        h.update(f"{path}\t{size}\t{digest}\n".encode())
    return "sha256:" + h.hexdigest()


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _copy_file(src: Path, dst: Path) -> str:
    h = hashlib.sha256()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while chunk := fi.read(CHUNK):
            h.update(chunk)
            fo.write(chunk)
        fo.flush()
        os.fsync(fo.fileno())
    return h.hexdigest()


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def copy(source: Path, root: Path, cache: str, identity: str, digest: str | None = None,
         free_bytes=lambda p: shutil.disk_usage(p).free) -> dict:
    """Copy, verify and publish one cache on this node; returns what ready.json says. Raises CopyError."""
    t0 = time.monotonic()
    listing = source_files(source)
    total = sum(s for _, s in listing)
    base = root / cache
    partial, target = root / partial_dir(cache), root / copy_dir(cache, identity)
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Room for the copy beside the copies already there (a copy of another identity goes only once no pod mounts it).
    free = free_bytes(base)
    if free < total + HEADROOM:
        shutil.rmtree(partial, ignore_errors=True)
        raise CopyError("OutOfDisk", f"the node's disk has {free} bytes free; the copy needs {total} "
                        f"(+{HEADROOM} headroom)")
    _write_json(root / progress_file(cache), {"identity": identity, "totalBytes": total, "files": len(listing)})
    copied = []
    try:
        for rel, size in listing:
            sha = _copy_file(source / rel, partial / rel)
            copied.append((rel, size, sha))
    except OSError as e:
        shutil.rmtree(partial, ignore_errors=True)
        reason = "OutOfDisk" if e.errno == 28 else "CopyFailed"
        raise CopyError(reason, f"copying {rel}: {e}") from e
    # Read back what landed: sizes and digests as read from the source.
    for rel, size, sha in copied:
        p = partial / rel
        if p.stat().st_size != size or _hash_file(p) != sha:
            shutil.rmtree(partial, ignore_errors=True)
            raise CopyError("VerifyFailed", f"{rel}: the copy differs from the source (size or sha256)")
    got = manifest_digest(copied)
    if digest is not None and got != digest:
        shutil.rmtree(partial, ignore_errors=True)
        raise CopyError("DigestMismatch", f"the source's digest is {got}, the cache expects {digest}")
    # Publish: this identity's old manifest goes first, then what is at the target (a copy left broken, or the empty
    # folder a kubelet made for a pod's subPath before the copy existed), then one rename, then the new manifest.
    manifest = root / ready_file(cache, identity)
    manifest.unlink(missing_ok=True)
    if target.exists():
        shutil.rmtree(target)
    os.replace(partial, target)
    ready = {"identity": identity, "digest": got, "bytes": total, "files": len(copied),
             "seconds": round(time.monotonic() - t0, 3), "manifest": [[r, s] for r, s, _ in copied]}
    manifest.parent.mkdir(parents=True, exist_ok=True)
    _write_json(manifest, ready)
    (root / progress_file(cache)).unlink(missing_ok=True)
    return ready


def read_ready(root: Path, cache: str, identity: str) -> dict | None:
    """The manifest of the verified copy of `identity`, or None."""
    try:
        return json.loads((root / ready_file(cache, identity)).read_text())
    except (OSError, ValueError):
        return None


def intact(root: Path, cache: str, ready: dict) -> bool:
    """Every file of a verified copy is still there with its size (a cheap check each pass; the digest was
    checked when it was made)."""
    data = root / copy_dir(cache, ready.get("identity") or "")
    try:
        return all((data / rel).stat().st_size == size for rel, size in ready.get("manifest") or [])
    except OSError:
        return False


def main(args) -> int:
    try:
        ready = copy(Path(args.source), Path(args.root), args.cache, args.identity, args.digest)
    except CopyError as e:
        # The termination message is what the agent reports: "<Reason>: <message>"
        msg = f"{e.reason}: {e}"
        print(msg, file=sys.stderr)
        try:
            Path("/dev/termination-log").write_text(msg)
        except OSError:
            pass
        return 1
    print(json.dumps({k: v for k, v in ready.items() if k != "manifest"}))
    return 0
