#!/usr/bin/env bash
# Builds the real node's containerd (2.x: CRI image volumes, which Debian's 1.6 lacks) from the Go module proxy,
# cached by version: containerd, its runc shim and ctr, pure Go (no btrfs/devmapper/zfs snapshotters; overlayfs
# is what the node uses). Runs Debian's runc. A second run returns at once. Prints the folder.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.2.9}"
CACHE="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}"
BIN="$CACHE/bin/containerd-$CONTAINERD_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
want=(containerd containerd-shim-runc-v2 ctr)
missing=()
for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
echo "[devcluster/build-containerd] $(date +%H:%M:%S) go install containerd $CONTAINERD_VERSION ${missing[*]} (cold: ~2 min)" >&2
tmp="$BIN.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
pkgs=()
for b in "${missing[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b@$CONTAINERD_VERSION"); done
# `go install m@v` works for this module (no replace directives); the version is stamped as containerd's own
GOBIN="$tmp" nice go install -trimpath -tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" "${pkgs[@]}" >&2
mkdir -p "$BIN"
for b in "${missing[@]}"; do mv "$tmp/$b" "$BIN/$b"; done
rm -rf "$tmp"
echo "[devcluster/build-containerd] $(date +%H:%M:%S) built into $BIN" >&2
echo "$BIN"
