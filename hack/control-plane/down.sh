#!/usr/bin/env bash
# Stop what up.sh STATE_DIR started (the real node, snapshot-controller, kwok, kube-scheduler,
# kube-controller-manager, kube-apiserver, etcd): SIGTERM, then
# SIGKILL after a bounded wait. Idempotent: a missing state dir, missing pid
# files or already-dead processes are fine. Only a pid whose command line
# still names STATE_DIR is signalled (guards against pid reuse).
#
# usage: down.sh STATE_DIR
# Environment: OUTFIT_CP_STOP_TIMEOUT  seconds to wait after SIGTERM (default 10)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

[ $# -eq 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
if [ ! -d "$1" ]; then
  printf '[control-plane] %s does not exist; nothing to stop\n' "$1" >&2
  exit 0
fi
STATE_DIR="$(cd "$1" && pwd)"
STOP_TIMEOUT="${OUTFIT_CP_STOP_TIMEOUT:-10}"

log() { printf '[control-plane] %s\n' "$*" >&2; }

# ours PID: alive (not a zombie waiting for init to reap it) and started for this state dir.
ours() {
  local cmdline
  cp_running "$1" || return 1
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline")" || return 1
  case "$cmdline" in *"$STATE_DIR/"*) return 0 ;; *) return 1 ;; esac
}

# wait_gone PID SECONDS: poll every 0.1 s; 0 when the process is gone.
wait_gone() {
  local _
  for _ in $(seq 1 $(( $2 * 10 ))); do
    ours "$1" || return 0
    sleep 0.1
  done
  ! ours "$1"
}

stop() {   # NAME
  local pidfile="$STATE_DIR/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && ours "$pid"; then
    log "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
      log "$1 (pid $pid) still running after ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || { log "ERROR: $1 (pid $pid) survived SIGKILL"; return 1; }
    fi
  fi
  # The process is gone or a zombie; give init a moment to reap it so that a
  # pgrep right after down.sh is clean (bounded; a zombie holds no ports).
  local _
  for _ in $(seq 1 20); do
    [ -e "/proc/$pid" ] || break
    sleep 0.1
  done
  rm -f "$pidfile"
}

rc=0
# The real node first (real-node.sh), while the API server still answers its pod deletes.
if [ -d "$STATE_DIR/node" ]; then
  "$(dirname "${BASH_SOURCE[0]}")/real-node.sh" down "$STATE_DIR" || rc=1
fi
# Node-mode components first (their pid files exist only in node mode), then
# the apiserver, so nothing spins on a vanished apiserver or etcd.
stop snapshot-controller || rc=1
stop kwok || rc=1
stop kube-scheduler || rc=1
stop kube-controller-manager || rc=1
stop kube-apiserver || rc=1
stop etcd || rc=1
[ "$rc" = 0 ] && log "stopped ($STATE_DIR)"
exit "$rc"
