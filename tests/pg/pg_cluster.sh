#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (Debian's server binaries).
#
#   pg_cluster.sh start DIR   initdb + pg_ctl start in DIR (created, must be
#                             empty or absent); prints the store URL on stdout
#   pg_cluster.sh stop DIR    stops it (fast) and removes DIR
#   pg_cluster.sh run CMD...  start in a temp dir, run CMD with STORE_URL set,
#                             stop; when the server cannot be started, prints
#                             a TAP "1..0 # SKIP" line and exits 0
#
# The server listens on a unix socket in DIR only (no TCP port to collide
# with). PostgreSQL refuses to run as root, so as root the cluster belongs
# to the "postgres" account (created by Debian's postgresql package) and
# DIR is handed to it. Trust authentication: the socket is in a private
# directory, and the data is test data.
set -euo pipefail

PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local dir=$1
  [ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || { echo "pg_cluster: no PostgreSQL server binaries (apt-get install postgresql)" >&2; return 1; }
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "pg_cluster: running as root and no 'postgres' account to run the server as" >&2
    return 1
  fi
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 0700 "$dir"
  # C locale: text sorts bytewise, as in SQLite; UTF8 as a production server.
  as_owner "$PGBIN/initdb" -D "$dir/data" -U sandboxd --auth=trust -E UTF8 --locale=C -N >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off -c max_connections=200" start >/dev/null ||
    { cat "$dir/server.log" >&2; return 1; }
  as_owner "$PGBIN/createdb" -h "$dir" -U sandboxd sandboxd >/dev/null 2>&1 || { cat "$dir/server.log" >&2; return 1; }
  echo "postgresql:///sandboxd?host=$dir&user=sandboxd"
}

stop() {
  local dir=$1
  [ -d "$dir/data" ] && as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start "$2" ;;
  stop) stop "$2" ;;
  run)
    shift
    dir=$(mktemp -d "${TMPDIR:-/tmp}/sbx-pg-XXXXXX")
    trap 'stop "$dir"' EXIT
    if ! url=$(start "$dir" 2>"$dir.err"); then
      echo "1..0 # SKIP PostgreSQL cannot be started: $(head -c 300 "$dir.err" | tr '\n' ' ')"
      rm -f "$dir.err"
      exit 0
    fi
    rm -f "$dir.err"
    STORE_URL=$url "$@"
    ;;
  *) echo "usage: $0 start DIR | stop DIR | run CMD..." >&2; exit 2 ;;
esac
