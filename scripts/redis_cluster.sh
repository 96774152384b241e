#!/usr/bin/env bash
# A local Redis Cluster for the tests and benches: six nodes on 127.0.0.1
# (three masters, three replicas), no persistence, each in its own
# directory under $AGENTCTX_REDIS_CLUSTER_DIR (default /tmp/agentctx-redis-cluster).
#
#   scripts/redis_cluster.sh start   # idempotent: does nothing when it is up
#   scripts/redis_cluster.sh stop
#   scripts/redis_cluster.sh url     # redis+cluster://127.0.0.1:7000,...
#
# Ports: $AGENTCTX_REDIS_CLUSTER_PORT (default 7000) and the five after it.
set -euo pipefail

BASE=${AGENTCTX_REDIS_CLUSTER_PORT:-7000}
DIR=${AGENTCTX_REDIS_CLUSTER_DIR:-/tmp/agentctx-redis-cluster}
PORTS=$(seq "$BASE" $((BASE + 5)))

url() {
  local nodes=""
  for p in $PORTS; do nodes="${nodes:+$nodes,}127.0.0.1:$p"; done
  echo "redis+cluster://$nodes"
}

state_ok() {
  redis-cli -h 127.0.0.1 -p "$BASE" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

all_up() {
  for p in $PORTS; do
    redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 || return 1
  done
}

start() {
  if state_ok && all_up; then
    echo "redis cluster already up on $BASE-$((BASE + 5))"
    return
  fi
  # A node that is down starts again with its nodes.conf, so it rejoins the
  # cluster (as a replica, if its replica took over meanwhile).
  for p in $PORTS; do
    if redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
      continue
    fi
    mkdir -p "$DIR/$p"
    redis-server --cluster-enabled yes --cluster-config-file "$DIR/$p/nodes.conf" \
      --cluster-node-timeout 2000 --port "$p" --bind 127.0.0.1 --daemonize yes --save '' --appendonly no \
      --dir "$DIR/$p" --logfile "$DIR/$p/redis.log" --pidfile "$DIR/$p/redis.pid"
  done
  for p in $PORTS; do
    for _ in $(seq 100); do
      redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
  # Nodes up but not yet a cluster (a fresh start): create it.
  if ! redis-cli -h 127.0.0.1 -p "$BASE" cluster info | grep -q '^cluster_slots_assigned:16384'; then
    local nodes=""
    for p in $PORTS; do nodes="$nodes 127.0.0.1:$p"; done
    # shellcheck disable=SC2086
    redis-cli --cluster create $nodes --cluster-replicas 1 --cluster-yes >"$DIR/create.log"
  fi
  for _ in $(seq 300); do
    state_ok && break
    sleep 0.1
  done
  state_ok || { echo "redis cluster did not reach cluster_state:ok" >&2; exit 1; }
  # Every replica attached and in sync, so a failover test finds one per master.
  for _ in $(seq 300); do
    local synced=0
    for p in $PORTS; do
      redis-cli -h 127.0.0.1 -p "$p" info replication 2>/dev/null | grep -q '^master_link_status:up' &&
        synced=$((synced + 1))
    done
    [ "$synced" -ge 3 ] && break
    sleep 0.1
  done
  echo "redis cluster up on $BASE-$((BASE + 5))"
}

stop() {
  for p in $PORTS; do
    redis-cli -h 127.0.0.1 -p "$p" shutdown nosave >/dev/null 2>&1 || true
  done
  rm -rf "$DIR"
  echo "redis cluster stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
