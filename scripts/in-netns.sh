#!/usr/bin/env bash
# Runs a command in a network namespace that has only loopback, so tests and benchmarks cannot send traffic
# anywhere but 127.0.0.0/8 (Ray and Mooncake would otherwise pick this machine's external address).
set -euo pipefail
name="${REWARDPOOL_NETNS:-rewardpool-test}"
ip netns list | grep -qw "^$name" || ip netns add "$name"
ip netns exec "$name" ip link set lo up
exec ip netns exec "$name" "$@"
