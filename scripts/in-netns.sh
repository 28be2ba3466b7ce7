#!/usr/bin/env bash
# Runs a command in a network namespace that has only loopback, so tests and benchmarks cannot send traffic
# anywhere but 127.0.0.0/8 (Ray and Mooncake would otherwise pick this machine's external address), and the
# dev cluster's real node (its bridge, veths, iptables rules) lives there too.
# `nsenter --net` (not `ip netns exec`): the command keeps the host's mount namespace, so the kubelet's and
# containerd's mounts are shared and /sys/fs/cgroup is visible.
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
name="${REWARDPOOL_NETNS:-rewardpool-test}"
ip netns list | grep -qw "^$name" || ip netns add "$name"
ip netns exec "$name" ip link set lo up
exec nsenter --net="/run/netns/$name" "$@"
