#!/bin/bash
# The upstream image's contract, in brief: on an empty data folder, initdb with
# POSTGRES_USER / POSTGRES_PASSWORD (UTF8), create POSTGRES_DB, accept password
# logins from any address; then run the server in the foreground as postgres.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown -R postgres:postgres "$PGDATA" /run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
# Present only while a first start initializes: data left with it is half-made, and made again.
unfinished="$PGDATA/../.dossier-initializing"
if [ -e "$unfinished" ]; then
  echo "postgres: an earlier first start stopped half-way; initializing again" >&2
  find "$PGDATA" -mindepth 1 -delete
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  touch "$unfinished"
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres: POSTGRES_PASSWORD is not set; set it (the upstream image refuses to start without it too)" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" -E UTF8 --locale=C.UTF-8 --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    createdb -U "$user" -h /run/postgresql "$db"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  rm -f "$unfinished"
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
