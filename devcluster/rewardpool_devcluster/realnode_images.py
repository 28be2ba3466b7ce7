"""The real node's images: built by devcluster/images.sh into buildah's storage (cached by input hash), then
imported into the node's containerd (node_images: streamed through a fifo, no registry), so pods run them with
`imagePullPolicy: IfNotPresent`. The install step imports them ahead with a containerd of its own; the node
imports at start only what is still missing."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cluster import REPO
from .node_images import import_missing
from .realnode_host import RealNodeError, run_script

BUILD_IMAGES = REPO / "devcluster" / "images.sh"


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
