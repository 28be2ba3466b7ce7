#!/usr/bin/env bash
# Debian packages the dev cluster's real node and image builds need; installs only what is missing.
#   runc, containernetworking-plugins               the node's runtime and pod network (bridge, macvlan, ...);
#                                                    containerd itself is 2.x from Go (devcluster/build-containerd.sh)
#   buildah, mmdebstrap, fuse-overlayfs, uidmap      images from the Dockerfile, no daemon, no registry
#   iptables, conntrack                              kube-proxy (Services) and the kubelet's own chains
#   gcc, libc6-dev                                   the pause image (k8s' pause.c, static)
#   redis-server                                     the Ray head's external GCS store (GCS fault tolerance)
#   (the linter) shellcheck                          the suite's static check of these scripts
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
pkgs=(runc containernetworking-plugins buildah mmdebstrap fuse-overlayfs uidmap iptables conntrack gcc
      libc6-dev redis-server shellcheck)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[devcluster/node-deps] $(date +%H:%M:%S) apt-get install ${missing[*]} (~20 s)" >&2
  apt-get update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
