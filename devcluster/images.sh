#!/usr/bin/env bash
# Builds the project's two images (Dockerfile targets `operator` and `worker`) with buildah, no daemon and no
# registry, for the dev cluster's real node. Prints one line on stdout: "<operator-ref> <worker-ref> <pause-ref>
# <buildah-storage-dir>".
#
#   base    Debian bookworm (python3 + venv, CA certificates) made with mmdebstrap from the Debian mirror,
#           cached by the hash of its package list; imported into buildah as localhost/rewardpool-base:<hash>.
#   images  `buildah bud --isolation chroot --layers --build-arg BASE=<base>`: each tag is the hash of what goes
#           into the image (Dockerfile, pyproject.toml, the operator/worker sources, the base), so an unchanged
#           tree rebuilds nothing. The heavy dependencies sit in a layer keyed by pyproject.toml alone, and the
#           host pip cache (~/.cache/pip) is mounted into the build, so a code change rebuilds in seconds.
#   pause   the sandbox image: k8s' own build/pause/linux/pause.c from the Go module zip, gcc -static.
#   import  nothing is exported here: the node streams `buildah push <ref> docker-archive:<fifo>` into
#           `ctr images import` (the worker image is ~6 GB; a tar on disk would be a third copy of it).
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION="${K8S_VERSION:-v1.36.3}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
IMG="$CACHE/images"
B=(buildah --root "$IMG/buildah/root" --runroot "$IMG/buildah/runroot" --storage-driver overlay)
log() { echo "[devcluster/images] $(date +%H:%M:%S) $*" >&2; }
need() { command -v "$1" >/dev/null || { log "missing $1: run devcluster/node-deps.sh (apt packages)"; exit 1; }; }
need buildah; need mmdebstrap; need gcc
rm -rf "$IMG/archives"  # an older layout exported tars here
mkdir -p "$IMG/buildah/root" "$IMG/buildah/runroot" "${PIP_CACHE_HOST:=${PIP_CACHE_DIR:-$HOME/.cache/pip}}"

# ---- base ------------------------------------------------------------------------------------------------------
BASE_PKGS="python3,python3-venv,python3-pip,ca-certificates,libibverbs1,ibverbs-providers"
base_key=$(echo "bookworm $BASE_PKGS $(dpkg-query -W -f '${Version}' mmdebstrap)" | sha256sum | cut -c1-12)
BASE="localhost/rewardpool-base:$base_key"
if ! "${B[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  tar="$IMG/bookworm-$base_key.tar"
  if [ ! -f "$tar" ]; then
    log "mmdebstrap bookworm base [$BASE_PKGS] (cold: ~1.5 min)"
    mmdebstrap --variant=minbase --include="$BASE_PKGS" --format=tar bookworm "$tar.tmp" \
      http://deb.debian.org/debian >"$IMG/mmdebstrap.log" 2>&1 \
      || { log "mmdebstrap failed; last lines of $IMG/mmdebstrap.log:"; tail -20 "$IMG/mmdebstrap.log" >&2; exit 1; }
    mv "$tar.tmp" "$tar"
  fi
  log "importing the base into buildah as $BASE"
  c=$("${B[@]}" from scratch)
  "${B[@]}" add "$c" "$tar" / >/dev/null
  "${B[@]}" config --cmd '["/usr/bin/python3"]' --env LANG=C.UTF-8 \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  "${B[@]}" commit --rm "$c" "$BASE" >/dev/null
fi

# ---- pause -----------------------------------------------------------------------------------------------------
PAUSE="localhost/pause:$K8S_VERSION-rewardpool"
if ! "${B[@]}" inspect --type image "$PAUSE" >/dev/null 2>&1; then
  src="$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/build/pause/linux/pause.c"
  [ -f "$src" ] || (cd "$IMG" && GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@$K8S_VERSION" >&2)
  log "pause image from k8s.io/kubernetes@$K8S_VERSION build/pause"
  mkdir -p "$IMG/pause"
  gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION-rewardpool" -o "$IMG/pause/pause" "$src"
  c=$("${B[@]}" from scratch)
  "${B[@]}" copy "$c" "$IMG/pause/pause" /pause
  "${B[@]}" config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  "${B[@]}" commit --rm "$c" "$PAUSE" >/dev/null
fi

# ---- the project's images --------------------------------------------------------------------------------------
hash_files() {  # what goes into the build context the Dockerfile uses (.dockerignore keeps the rest out)
  (cd "$root" && LC_ALL=C sort <(printf '%s\n' "$@") | xargs sha256sum) | sha256sum | cut -c1-12
}
mapfile -t src_files < <(cd "$root" && { git ls-files -co --exclude-standard -- Dockerfile .dockerignore pyproject.toml \
  operator worker 2>/dev/null || find Dockerfile pyproject.toml operator worker -type f; } | grep -v -e '__pycache__' -e '\.egg-info')
key=$( (hash_files "${src_files[@]}"; echo "$BASE") | sha256sum | cut -c1-12)
bud() {  # target, tag
  "${B[@]}" bud --isolation chroot --layers --pull-never --target "$1" -t "$2" \
    --build-arg BASE="$BASE" --build-arg PIP_CERT=/run/host-ca.crt --build-arg PIP_CACHE_DIR=/root/.cache/pip \
    -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro -v "$PIP_CACHE_HOST:/root/.cache/pip" \
    -f "$root/Dockerfile" "$root" >"$IMG/build-$1.log" 2>&1 \
    || { log "image build of $1 failed; last lines of $IMG/build-$1.log:"; tail -25 "$IMG/build-$1.log" >&2; exit 1; }
}
refs=()
for target in operator worker; do
  ref="localhost/rewardpool-$target:dev-$key"
  if ! "${B[@]}" inspect --type image "$ref" >/dev/null 2>&1; then
    t0=$(date +%s)
    log "buildah bud --target $target (cold: operator ~1 min, worker ~7 min: torch and its CUDA libraries from PyPI; a code change: seconds)"
    bud "$target" "$ref"
    # sed reads to the end (head would close the pipe early: buildah's SIGPIPE failed the line under pipefail)
    log "built $ref in $(( $(date +%s) - t0 ))s ($("${B[@]}" images --format '{{.Size}}' "$ref" | sed -n 1p))"
    if [ "$target" = worker ]; then  # every built-in's libraries load in the image (the host's venv has
      # system libraries a slim image lacks: OpenCV's libGL was one)
      c=$("${B[@]}" from --pull-never "$ref")
      "${B[@]}" run --isolation chroot "$c" -- python3 -c 'import torch, transformers, open_clip, cv2, paddle, paddleocr, Levenshtein, mooncake.store, ray' \
        >"$IMG/smoke-worker.log" 2>&1 \
        || { log "the worker image cannot import a built-in's libraries:"; tail -15 "$IMG/smoke-worker.log" >&2;
             "${B[@]}" rm "$c" >/dev/null; "${B[@]}" rmi "$ref" >/dev/null; exit 1; }
      "${B[@]}" rm "$c" >/dev/null
      log "the worker image imports every built-in's libraries"
    fi
    # the previous tree's image of this target goes; the layer cache (buildah's intermediate images) stays:
    # it is what makes the next code change cheap. It grows only when the dependencies change (then
    # `rm -rf ~/.cache/rewardpool/images` starts afresh).
    # (awk, not grep: grep's "no match" would be a failing step when there is no older image)
    for old in $("${B[@]}" images --format '{{.Name}}:{{.Tag}}' \
                 | awk -v p="localhost/rewardpool-$target:dev-" -v r="$ref" 'index($0, p) == 1 && $0 != r'); do
      "${B[@]}" rmi "$old" >/dev/null 2>&1 || true
    done
  fi
  refs+=("$ref")
done
echo "${refs[0]} ${refs[1]} $PAUSE $IMG/buildah"
