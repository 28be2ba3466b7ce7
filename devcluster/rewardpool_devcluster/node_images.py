"""The project's images in the real node's containerd: streamed from buildah's storage through a fifo (no tar on
disk), so `imagePullPolicy: IfNotPresent` finds them and nothing is pulled from a registry.

Used twice: by the node when it starts (whatever is still missing), and by the install step
(`python -m rewardpool_devcluster.node_images`, the last step of the images chain in scripts/install.sh), which
imports into the same containerd root (under the cache) with a containerd of its own while the Go builds still
run, so a cold `make demo` does not wait for the ~6 GB worker image at node start."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("rewardpool.devcluster")
PROJECT_IMAGES = ("localhost/rewardpool-operator:", "localhost/rewardpool-worker:")

# ctr(*args, check=True, popen=False): a CompletedProcess, or with popen=True the running Popen (stderr piped)
Ctr = Callable[..., object]


def import_missing(ctr: Ctr, buildah: list[str], refs: list[str], current: set[str], fifo: Path) -> dict[str, float]:
    """Imports the refs containerd lacks; earlier builds of the project's images (not in `current`) go first
    (synchronous GC), so their unique layers are not on disk next to the new ones. Returns seconds per import."""
    have = set(ctr("images", "ls", "-q").stdout.split())
    for old in sorted(have):
        if old.startswith(PROJECT_IMAGES) and old not in current:
            ctr("images", "rm", "--sync", old, check=False)
    took = {}
    for ref in dict.fromkeys(refs):
        if ref in have:
            continue
        t = time.monotonic()
        log.info("importing %s into the node's containerd (the worker image, ~6 GB: about 3 min)", ref)
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
        push = subprocess.Popen([*buildah, "push", ref, f"docker-archive:{fifo}:{ref}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        pull = ctr("images", "import", str(fifo), popen=True)
        _, push_err = push.communicate()
        try:
            # a push that failed may never have opened the fifo: the import would wait on it for ever
            _, pull_err = pull.communicate(timeout=None if push.returncode == 0 else 5)
        except subprocess.TimeoutExpired:
            pull.kill()
            _, pull_err = pull.communicate()
            pull_err = (pull_err or "") + "(stopped: nothing was streamed to it)"
        fifo.unlink(missing_ok=True)
        if pull.returncode != 0 or push.returncode != 0:
            raise RuntimeError(f"importing {ref} into containerd failed: buildah push exited {push.returncode} "
                               f"({push_err.strip()[-1000:]}); ctr import exited {pull.returncode} "
                               f"({pull_err.strip()[-1000:]})")
        took[ref] = time.monotonic() - t
    return took


def _node_running(cache: Path) -> bool:
    owner = cache / "node" / "owner.json"
    try:
        pid = json.loads(owner.read_text())["pid"]
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, KeyError):
        return False


def preimport(images_line: str, cache: Path, ctrd: Path) -> int:
    """The install step: `images_line` is what devcluster/images.sh prints; its last line names the operator,
    worker and pause images and buildah's storage (the lines before it are buildah's own)."""
    operator, worker, pause, storage = images_line.strip().splitlines()[-1].split()
    if _node_running(cache):  # a running node owns the root (and imports for itself when it starts)
        log.info("a real node is running: its containerd imports the images itself")
        return 0
    root = cache / "node" / "containerd"
    root.mkdir(parents=True, exist_ok=True)
    buildah = ["buildah", "--root", f"{storage}/root", "--runroot", f"{storage}/runroot", "--storage-driver", "overlay"]
    with tempfile.TemporaryDirectory(prefix="rewardpool-import-") as tmp:
        sock = Path(tmp) / "containerd.sock"
        # the node's own containerd build, no CRI: this one only receives images (the node's config is realnode.py's)
        (Path(tmp) / "config.toml").write_text(
            f'version = 3\nroot = "{root}"\nstate = "{tmp}/state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"]\n'
            f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n')
        logf = open(Path(tmp) / "containerd.log", "wb")
        proc = subprocess.Popen([str(ctrd / "containerd"), "--config", f"{tmp}/config.toml"], stdout=logf,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

        def ctr(*args: str, check: bool = True, timeout: float = 900, popen: bool = False):
            argv = [str(ctrd / "ctr"), "-a", str(sock), "-n", "k8s.io", *args]
            if popen:
                return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)
        try:
            deadline = time.monotonic() + 30
            while ctr("version", check=False).returncode != 0:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("containerd for the image import did not start: "
                                       + (Path(tmp) / "containerd.log").read_text()[-2000:])
                time.sleep(0.2)
            took = import_missing(ctr, buildah, [pause, operator, worker], {operator, worker}, Path(tmp) / "fifo")
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            logf.close()
    for ref, secs in took.items():
        log.info("imported %s in %.0fs", ref, secs)
    return 0


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="[devcluster/node-images] %(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    cache = Path(os.environ.get("REWARDPOOL_CACHE", Path.home() / ".cache" / "rewardpool"))
    try:
        return preimport(sys.argv[1], cache, Path(sys.argv[2]))
    except RuntimeError as e:
        log.error("%s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
