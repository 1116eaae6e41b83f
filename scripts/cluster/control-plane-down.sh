#!/bin/bash
# scripts/cluster/control-plane-down.sh DIR [--keep]
# Stops metrics-server, the kube-scheduler, kube-controller-manager, kube-apiserver and etcd started by control-plane-up.sh DIR
# (by the pids recorded in DIR/*.pid, nothing else), then deletes DIR unless --keep is given.
# DIR is only deleted if it carries control-plane-up.sh's marker file.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR [--keep]" >&2; exit 2; }
DIR=$1; KEEP=${2:-}
[ -d "$DIR" ] || { echo "no such dir: $DIR" >&2; exit 1; }
DIR=$(cd "$DIR" && pwd)

stop_pid() { # NAME PIDFILE
  local f=$2 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; echo "$1 ($pid) killed" >&2
    else echo "$1 ($pid) stopped" >&2; fi
  fi
  rm -f "$f"
}
stop_pid metrics-server "$DIR/metrics-server.pid"
stop_pid kube-scheduler "$DIR/scheduler.pid"
stop_pid kube-controller-manager "$DIR/kcm.pid"
stop_pid kube-apiserver "$DIR/apiserver.pid"
stop_pid etcd "$DIR/etcd.pid"

if [ "$KEEP" = --keep ]; then
  echo "kept $DIR" >&2
elif [ -f "$DIR/.podhost-control-plane" ]; then
  rm -rf "$DIR" && echo "removed $DIR" >&2
else
  echo "not removing $DIR: no .podhost-control-plane marker" >&2
fi
