#!/bin/bash
# What the upstream auto-setup does for DB=postgres12: wait for PostgreSQL,
# create both databases, set up and migrate both schemas (idempotent), start
# the server, then register DEFAULT_NAMESPACE (default "default"). A stop
# (SIGTERM) lets the server shut down and leave its membership ring.
set -euo pipefail
trap 'exit 143' TERM INT # until the server runs, a stop just ends the setup
if [ "${DB:-postgres12}" != postgres12 ]; then
  echo "auto-setup: this stand-in supports DB=postgres12 only (got DB=$DB); use the upstream image for others" >&2
  exit 2
fi
: "${POSTGRES_SEEDS:?set POSTGRES_SEEDS to the PostgreSQL host}" "${POSTGRES_USER:?set POSTGRES_USER}"
export DB_PORT="${DB_PORT:-5432}" DBNAME="${DBNAME:-temporal}" VISIBILITY_DBNAME="${VISIBILITY_DBNAME:-temporal_visibility}"
# The container's first IPv4 address (the server renders host:port, which an IPv6 address would break).
export BIND_ON_IP="${BIND_ON_IP:-$(hostname -i | tr ' ' '\n' | grep -m1 -E '^[0-9]+(\.[0-9]+){3}$')}"
export TEMPORAL_BROADCAST_ADDRESS="${TEMPORAL_BROADCAST_ADDRESS:-$BIND_ON_IP}"
export SQL_PASSWORD="${POSTGRES_PWD:-}"
namespace="${DEFAULT_NAMESPACE:-default}"

for attempt in $(seq 1 120); do
  (exec 3<>"/dev/tcp/$POSTGRES_SEEDS/$DB_PORT") 2>/dev/null && break
  if [ "$attempt" = 120 ]; then
    echo "auto-setup: PostgreSQL at $POSTGRES_SEEDS:$DB_PORT did not answer in 120 s" >&2
    exit 1
  fi
  sleep 1
done

sql() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" --db "$1" "${@:2}"; }
for pair in "$DBNAME:postgresql/v12/temporal" "$VISIBILITY_DBNAME:postgresql/v12/visibility"; do
  db="${pair%%:*}" schema="${pair#*:}"
  if ! out="$(sql "$db" create-database 2>&1)" && ! grep -q 'already exists' <<<"$out"; then
    echo "auto-setup: creating database $db failed: $out" >&2
    exit 1
  fi
  sql "$db" setup-schema -v 0.0
  sql "$db" update-schema --schema-name "$schema"
done

temporal-server --root /etc/temporal --config config --env docker --allow-no-auth start &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true' TERM INT
until temporal operator cluster health --address "$BIND_ON_IP:7233" --command-timeout 3s >/dev/null 2>&1; do
  kill -0 "$server" 2>/dev/null || break
  sleep 1
done
if kill -0 "$server" 2>/dev/null && [ "${SKIP_DEFAULT_NAMESPACE_CREATION:-false}" != true ]; then
  temporal operator namespace describe --address "$BIND_ON_IP:7233" -n "$namespace" >/dev/null 2>&1 ||
    temporal operator namespace create --address "$BIND_ON_IP:7233" -n "$namespace" --retention 24h ||
    true # another start registered it first
  echo "auto-setup: Temporal is serving on $BIND_ON_IP:7233" >&2
fi
# Wait for the server itself, through any stop signal, and end with its status.
set +e
while kill -0 "$server" 2>/dev/null; do wait "$server"; done
wait "$server"
