# Sourced by every install script (never run on its own): strict mode, and a failure that names the script,
# its line and the command that failed, so no step stops silently under `set -e`.
# shellcheck shell=bash
set -Eeuo pipefail
_rp_fail() {  # exit status, line, command, script
  echo "[$(basename "$4")] FAILED: '$3' exited $1 at $(basename "$4"):$2" >&2
}
trap '_rp_fail $? $LINENO "$BASH_COMMAND" "${BASH_SOURCE[0]}"' ERR

# One install at a time per cache (two `make` targets at once would rebuild the same caches and containerd store
# under each other). The first makes the lock directory (atomic) and writes who it is; a second says whom it waits
# for and waits (REWARDPOOL_INSTALL_WAIT seconds, default an hour; 0: fail at once). A lock whose process is gone
# is taken over. Not flock(1): daemons an install starts would inherit its descriptor and hold the lock on.
# Scripts the holder runs inherit the lock (REWARDPOOL_INSTALL_LOCKED).
rp_install_lock() {
  if [ -n "${REWARDPOOL_INSTALL_LOCKED:-}" ]; then return 0; fi
  local cache="${REWARDPOOL_CACHE:-$HOME/.cache/rewardpool}" wait="${REWARDPOOL_INSTALL_WAIT:-3600}" said=""
  local lock="$cache/install.lock.d" start=$SECONDS pid
  mkdir -p "$cache"
  until mkdir "$lock" 2>/dev/null; do
    pid=$(cat "$lock/pid" 2>/dev/null || true)
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then  # its holder died without cleaning up
      rm -rf "$lock"
      continue
    fi
    if [ -z "$said" ]; then
      echo "[install] $(date +%H:%M:%S) another install holds $lock: $(cat "$lock/owner" 2>/dev/null || echo 'starting')" >&2
      said=1
      if [ "$wait" != 0 ]; then echo "[install] waiting for it (up to ${wait}s)" >&2; fi
    fi
    if [ $((SECONDS - start)) -ge "$wait" ]; then
      echo "[install] not waiting longer: run one make target at a time on a machine (they share $cache)" >&2
      return 1
    fi
    sleep 2
  done
  echo $$ > "$lock/pid"
  echo "pid $$: $(basename "$0") $* (under: $(ps -o args= -p "$PPID" 2>/dev/null | cut -c1-100)) in $PWD," \
    "since $(date +%H:%M:%S)" > "$lock/owner"
  # shellcheck disable=SC2064  # the path now, not at exit
  trap "rm -rf '$lock'" EXIT
  export REWARDPOOL_INSTALL_LOCKED=1
  if [ -n "$said" ]; then echo "[install] $(date +%H:%M:%S) the other install is done; going on" >&2; fi
}
