#!/usr/bin/env bash
# `make cold-check`: both README commands from nothing, as on a fresh machine, without touching this user's
# caches. A fresh copy of this tree (tracked and untracked files, no ignored build outputs) runs with a new
# HOME, so the rewardpool cache, the Go module and build caches, pip's and npm's caches, buildah's image store
# and the node's containerd root all start empty. It runs `make demo`, `make down`, then `make test` on what
# the demo built, times each phase, prints a table, and on success writes .ci/cold-verified (date, the install
# inputs' hash, the phase times), the file CI compares with the install inputs. It cleans up after itself: the
# demo stopped, then any process still using its folder or its network namespaces (by PID), mounts under it,
# the namespaces, the folder. Logs are kept in .rewardpool/cold-check/. Debian packages are machine-wide and
# stay as they are (the table says which were installed by this run).
#   COLD_CHECK_DIR   where the fresh folder is made (default /var/tmp: disk, not memory); needs ~25 GB
#   COLD_CHECK_KEEP=1   leave the folder (and its caches) for inspection instead of removing it
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "[cold-check] $(date +%H:%M:%S) $*" >&2; }

[ "$(id -u)" = 0 ] || { log "needs root (network namespaces, the real node)"; exit 2; }
owner="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}/node/owner.json"
if [ -f "$owner" ] && kill -0 "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$owner" \
    2>/dev/null || echo 0)" 2>/dev/null; then
  log "a real node of yours is running ($owner): one real node per machine; stop it first (make down)"
  exit 2
fi

work=$(mktemp -d "${COLD_CHECK_DIR:-/var/tmp}/rewardpool-cold.XXXXXX")
logs="$root/.rewardpool/cold-check"
tag="rpcold$$"
demo_ns="$tag-demo" test_ns="$tag-test"
mkdir -p "$logs" "$work/home" "$work/src"
log "fresh folder $work (HOME, caches, stores), network namespaces $demo_ns and $test_ns, logs in $logs"

cleanup() {
  local rc=$? pids p
  trap - ERR
  set +e  # every step below is best effort: one that fails must not leave the rest undone
  log "cleaning up"
  (cd "$work/src" && run_env make down DEMO_NETNS="$demo_ns") >"$logs/down-cleanup.log" 2>&1 || true
  for _ in 1 2; do  # what still runs from the folder or inside the namespaces, by PID: TERM, then KILL
    pids=$( { for p in /proc/[0-9]*; do
                if readlink "$p/cwd" "$p/exe" 2>/dev/null | grep -q "^$work/" \
                   || tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "$work/"; then echo "${p#/proc/}"; fi
              done
              for ns in "$demo_ns" "$test_ns"; do ip netns pids "$ns" 2>/dev/null || true; done; } \
            | grep -vx -e "$$" -e "$BASHPID" | sort -u)
    [ -n "$pids" ] || break
    log "stopping leftover processes: $(echo "$pids" | tr '\n' ' ')"
    echo "$pids" | xargs -r kill -TERM 2>/dev/null || true
    sleep 5
    echo "$pids" | xargs -r kill -KILL 2>/dev/null || true
  done
  findmnt -rn -o TARGET | grep "^$work/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  for ns in "$demo_ns" "$test_ns"; do
    if [ -e "/run/netns/$ns" ]; then ip netns del "$ns" || true; fi
    # the real node's cgroups, named for its namespace (make down removes them; a killed node leaves them)
    find /sys/fs/cgroup -depth -type d -name "rewardpool-$ns*" 2>/dev/null \
      | while read -r d; do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
  done
  if [ "${COLD_CHECK_KEEP:-0}" = 1 ]; then
    log "kept $work (COLD_CHECK_KEEP=1)"
  else
    chmod -R u+w "$work" 2>/dev/null || true  # the Go module cache is read-only
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT

# the environment of a machine that has never run the project: nothing of this user's carries over
run_env() {
  env -u KUBECONFIG -u GOPATH -u GOMODCACHE -u GOCACHE -u PIP_CACHE_DIR -u REWARDPOOL_CACHE \
    HOME="$work/home" GOPATH="$work/home/go" GOMODCACHE="$work/home/go/pkg/mod" GOCACHE="$work/home/.cache/go-build" \
    PIP_CACHE_DIR="$work/home/.cache/pip" npm_config_cache="$work/home/.npm" \
    REWARDPOOL_CACHE="$work/home/.cache/rewardpool" REWARDPOOL_NETNS="$test_ns" "$@"
}

# the tree as a fresh clone of it would have it (git-tracked and untracked files, nothing ignored)
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$work/src" -xf -
(cd "$work/src" && git init -q && git add -A)
hash=$(bash "$work/src/scripts/install-hash.sh")
apt_before=$(dpkg-query -W -f '${Package}\n' | sort)

declare -A took
timed() {  # name, log file, command...: runs it with the output to the log and its last lines on failure
  local name=$1 out=$2 t0=$SECONDS; shift 2
  log "$name (log: $out)"
  if ! (cd "$work/src" && run_env "$@") >"$out" 2>&1; then
    log "$name FAILED after $((SECONDS - t0)) s; last lines of $out:"
    tail -40 "$out" >&2
    exit 1
  fi
  took[$name]=$((SECONDS - t0))
  log "$name passed in $((SECONDS - t0)) s"
}
timed demo "$logs/demo.log" env REWARDPOOL_INSTALL_TIMES="$work/demo-times" make demo DEMO_NETNS="$demo_ns"
timed down "$logs/down.log" make down DEMO_NETNS="$demo_ns"
timed test "$logs/test.log" env REWARDPOOL_INSTALL_TIMES="$work/test-times" make test PYTEST_ARGS="-q -rfE"
# a step that printed a failure and went on is a latent bug (a failing command whose status was ignored)
if grep -h "\] FAILED: '" "$logs/demo.log" "$logs/test.log" >&2; then
  log "the install printed failures (above) although it went on: fix them"
  exit 1
fi
apt_new=$(comm -13 <(echo "$apt_before") <(dpkg-query -W -f '${Package}\n' | sort) | wc -l)

# ---- the table ------------------------------------------------------------------------------------------------
t_demo=${took[demo]} t_test=${took[test]}
wall() { awk '$1 == "install-wall" {print $2}' "$1"; }  # the two chains overlap: their wall, not their sum
install_demo=$(wall "$work/demo-times")
install_test_extra=$(wall "$work/test-times")
suite=$((t_test - install_test_extra))
node_up=$(sed -n 's/.*real node Ready (\(.*\))$/\1/p' "$logs/demo.log" | tail -1)
pool_ready=$(sed -n 's/.*pool Ready \([0-9.]*\)s after apply.*/\1/p' "$logs/demo.log" | tail -1)
result=$(grep -E '^[0-9]+ passed' "$logs/test.log" | tail -1 || true)
phases() { awk '$1 != "install-wall" {printf "%s %d s, ", $1, $2}' "$1" | sed 's/, $//'; }
table=$(cat <<TABLE
| cold, $(date -u +%F), $(nproc) cores | wall | what it was |
|---|---|---|
| \`make demo\` from nothing | **$((t_demo / 60)) min $((t_demo % 60)) s** | install $((install_demo / 60)) min ($(phases "$work/demo-times"); the Go chain and the venv+images chain side by side), then the demo $(((t_demo - install_demo) / 60)) min $(((t_demo - install_demo) % 60)) s: real node up (${node_up:-?}), pool Ready ${pool_ready:-?} s after apply |
| \`make test\` after it (the demo's builds present) | **$((t_test / 60)) min $((t_test % 60)) s** | the suite's own builds $((install_test_extra / 60)) min ($(phases "$work/test-times")), the suite $((suite / 60)) min: ${result:-?} |
| \`make test\` from nothing (the two rows' install phases + the suite) | **$(((install_demo + install_test_extra + suite) / 60)) min** | derived from this run: what CI's first run on a new machine takes |
TABLE
)
echo
echo "$table"
echo "Debian packages installed by this run: $apt_new (machine-wide; they were not removed)"
{
  echo "# Written by \`make cold-check\` (scripts/cold-check.sh) after both README commands passed from nothing."
  echo "# CI (.ci/run) compares the hash with scripts/install-hash.sh; edit this file by running the cold check."
  echo "date: $(date -u +%FT%TZ)"
  echo "hash: $hash"
  echo "demo_s: $t_demo"
  echo "test_after_demo_s: $t_test"
  echo "suite_s: $suite"
  echo "phases_demo: $(phases "$work/demo-times")"
  echo "phases_test: $(phases "$work/test-times")"
  echo "result: ${result:-?}"
  echo
  echo "$table"
} > "$root/.ci/cold-verified.tmp"
if [ "$(bash "$root/scripts/install-hash.sh")" != "$hash" ]; then
  log "the install inputs of $root changed while the check ran: not writing .ci/cold-verified (run it again)"
  exit 1
fi
mv "$root/.ci/cold-verified.tmp" "$root/.ci/cold-verified"
log "wrote .ci/cold-verified (install inputs $hash)"
