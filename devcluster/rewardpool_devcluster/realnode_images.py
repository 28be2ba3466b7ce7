"""The real node's images: built by devcluster/images.sh into buildah's storage (cached by input hash), then
imported into the node's containerd (node_images: streamed through a fifo, no registry), so pods run them with
`imagePullPolicy: IfNotPresent`. The install step imports them ahead with a containerd of its own; the node
imports at start only what is still missing. Models packaged as OCI images (`scorer.model.image`) are imported
the same way, when a demo or test asks for one."""
from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cluster import REPO
from .node_images import import_missing
from .realnode_host import RealNodeError, run_script

BUILD_IMAGES = REPO / "devcluster" / "images.sh"
log = logging.getLogger("rewardpool.devcluster")


@dataclass
class Images:
    operator: str
    worker: str
    pause: str
    storage: Path  # buildah's storage (root/ and runroot/), where devcluster/images.sh built them

    def buildah(self) -> list[str]:
        return ["buildah", "--root", str(self.storage / "root"), "--runroot", str(self.storage / "runroot"),
                "--storage-driver", "overlay"]


def build_images() -> Images:
    op, worker, pause, storage = run_script(BUILD_IMAGES, "building the images").split()
    return Images(op, worker, pause, Path(storage))


def import_images(ctr: Callable[..., object], images: Images, fifo: Path) -> dict[str, float]:
    """Imports what containerd lacks (earlier builds of the project's images are removed first); returns
    seconds per import, keyed `import <image name>` (the node's timings)."""
    try:
        took = import_missing(ctr, images.buildah(), [images.pause, images.operator, images.worker],
                              {images.operator, images.worker}, fifo)
    except RuntimeError as e:
        raise RealNodeError(str(e)) from None
    return {f"import {ref.split('/')[-1].split(':')[0]}": secs for ref, secs in took.items()}


MODEL_IMAGE = "localhost/rewardpool-model-"


def model_ref(model: Path, name: str) -> str:
    """The image a model directory becomes, tagged by what is in it (each file's path, size, mode and change
    time): a rebuilt model is a new image, the same one is imported once."""
    h = hashlib.sha256()
    for f in sorted(p for p in model.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(model)}\0{st.st_size}\0{st.st_mode:o}\0{st.st_mtime_ns}\n".encode())
    return f"{MODEL_IMAGE}{name}:{h.hexdigest()[:12]}"


def import_model(ctr: Callable[..., object], images: Images, model: Path, name: str, fifo: Path) -> str:
    """A model directory packaged as an OCI image with buildah (no base image: the weights' files at its root, the
    layout a scorer reads where the `image` volume is mounted) and imported into the node's containerd, as the
    worker image is. Returns the reference (present already: nothing is built)."""
    # readable by any user: a pool at the restricted level reads its model as non-root (safetensors writes its
    # files 0600, which buildah copies as they are)
    for p in model.rglob("*"):
        p.chmod(p.stat().st_mode | (0o555 if p.is_dir() else 0o444))
    ref = model_ref(model, name)
    have = ctr("images", "ls", "-q").stdout.split()
    if ref in have:
        return ref
    b = images.buildah()
    for old in have:  # earlier builds of this model go first (a judge's weights are tens of GB)
        if old.startswith(f"{MODEL_IMAGE}{name}:"):
            ctr("images", "rm", "--sync", old, check=False)
            subprocess.run([*b, "rmi", "-f", old], capture_output=True)

    def run(*args: str) -> str:
        res = subprocess.run([*b, *args], capture_output=True, text=True)
        if res.returncode != 0:
            raise RealNodeError(f"buildah {args[0]} for the model image {ref} failed: {res.stderr.strip()[-1000:]}")
        return res.stdout.strip()
    if subprocess.run([*b, "inspect", "--type", "image", ref], capture_output=True).returncode != 0:
        box = run("from", "scratch")
        try:
            run("copy", box, f"{model}/.", "/")
            run("config", "--label", f"io.rewardpool.model={name}", box)
            run("commit", "--quiet", box, ref)
        finally:
            subprocess.run([*b, "rm", box], capture_output=True)
    try:
        import_missing(ctr, b, [ref], {images.operator, images.worker, ref}, fifo)
    except RuntimeError as e:
        raise RealNodeError(str(e)) from None
    return ref


def share_image_files(src_root: Path, dst_root: Path) -> int:
    """After a peer's import: its image blobs and unpacked layers made hard links of the first node's identical
    ones (~15 GB for the worker image otherwise written twice on one disk). Safe because neither containerd
    writes them again: blobs are content-addressed, committed layers are overlay lower dirs (a container's
    writes go to its own upper dir; copy-up makes a new file). A blob is the same when its digest (name) and
    size are; a layer when every file's path, size, mode and time are. Returns the bytes now shared."""
    shared = 0
    blobs = Path("io.containerd.content.v1.content/blobs/sha256")
    src_blobs = {b.name: b for b in (src_root / blobs).iterdir()} if (src_root / blobs).is_dir() else {}
    for b in (dst_root / blobs).iterdir() if (dst_root / blobs).is_dir() else []:
        if b.name in src_blobs:
            shared += _link_over(src_blobs[b.name], b)
    snaps = Path("io.containerd.snapshotter.v1.overlayfs/snapshots")
    src_layers = {_layer_files(d): d for d in _dirs(src_root / snaps)}
    for d in _dirs(dst_root / snaps):
        files = _layer_files(d)
        src = src_layers.get(files) if files else None  # once: a tuple's hash is not cached
        for rel in files if src else ():
            shared += _link_over(src / "fs" / rel[0], d / "fs" / rel[0])
    return shared


def _dirs(p: Path) -> list[Path]:
    return [d for d in p.iterdir() if d.is_dir()] if p.is_dir() else []


def _layer_files(snapshot: Path) -> tuple:
    """A snapshot's regular files as (path, size, mode, mtime) sorted: its identity across two containerds."""
    fs = snapshot / "fs"
    out = []
    for root, _, names in os.walk(fs):
        for n in names:
            st = os.lstat(os.path.join(root, n))
            if st.st_mode & 0o170000 == 0o100000:
                out.append((os.path.relpath(os.path.join(root, n), fs), st.st_size, st.st_mode, st.st_mtime_ns))
    return tuple(sorted(out))


def _link_over(src: Path, dst: Path) -> int:
    """`dst` replaced by a hard link of `src` (same content, checked by the caller); the bytes freed."""
    try:
        a, b = src.stat(), dst.stat()
        if a.st_ino == b.st_ino or a.st_size != b.st_size:
            return 0
        tmp = dst.with_name(dst.name + ".rewardpool-link")
        tmp.unlink(missing_ok=True)
        os.link(src, tmp)
        os.replace(tmp, dst)
        return b.st_size
    except OSError as e:  # another filesystem, or gone meanwhile: the copy stays
        log.info("could not share %s: %s", dst, e)
        return 0
