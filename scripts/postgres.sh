#!/usr/bin/env bash
# A private PostgreSQL server for the test suite and benchmarks, on its own port on 127.0.0.1.
#
#   scripts/postgres.sh start   installs Debian's postgresql when its binaries are missing,
#                               creates an instance in a fresh temporary directory (initdb,
#                               run as the `postgres` user when we are root, since initdb
#                               refuses root), starts it, waits until it accepts connections
#                               and prints shell exports:
#                                 TRELLIS_TEST_POSTGRES_URL  postgres://… with a random password
#                                 TRELLIS_PG_DIR             the instance directory
#                               Use it as:  eval "$(scripts/postgres.sh start)"
#   scripts/postgres.sh url     prints the URL of the instance in $TRELLIS_PG_DIR
#   scripts/postgres.sh stop    stops the instance in $TRELLIS_PG_DIR and deletes the directory
#
# TRELLIS_PG_FAST=1 turns off fsync and synchronous commit (test suites: nothing to keep if
# the machine crashes). Benchmarks leave it unset so commits are as durable as the SQLite ledger's.
# TRELLIS_PG_SETTINGS adds server settings ("-c name=value …"), e.g. pg_stat_statements to profile.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

# The newest installed server binaries (Debian keeps them outside PATH).
find_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" && -x "$dir/postgres" ]]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

install_server() {
  if ! command -v apt-get >/dev/null; then
    log "PostgreSQL is not installed and apt-get is unavailable"
    exit 1
  fi
  log "installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q postgresql >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q postgresql >/dev/null
  fi
}

# Runs a server binary as the instance owner.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local bindir
  bindir="$(find_bindir)" || { install_server; bindir="$(find_bindir)"; }
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    log "the postgres user is missing (is the postgresql package installed?)"
    exit 1
  fi
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/trellis-pg.XXXXXX")"
  chmod 0700 "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
  local password
  password="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  local pwfile="$dir/pwfile"
  (umask 077 && printf '%s\n' "$password" >"$pwfile")
  [[ $(id -u) -eq 0 ]] && chown postgres: "$pwfile"
  as_owner "$bindir/initdb" -D "$dir/data" -U trellis --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 --no-sync \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  rm -f "$pwfile"
  local settings=(-c listen_addresses=127.0.0.1 -c "unix_socket_directories=$dir"
    -c max_connections=200 -c shared_buffers=128MB)
  if [[ -n "${TRELLIS_PG_FAST:-}" ]]; then
    settings+=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
  fi
  # Extra server settings for measuring, e.g. "-c shared_preload_libraries=pg_stat_statements".
  if [[ -n "${TRELLIS_PG_SETTINGS:-}" ]]; then
    read -r -a extra <<<"$TRELLIS_PG_SETTINGS"
    settings+=("${extra[@]}")
  fi
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port ${settings[*]}" start >/dev/null; then
      break
    fi
    port=""
    log "start on a free port failed (attempt $attempt); retrying"
  done
  if [[ -z "$port" ]]; then
    tail -n 20 "$dir/server.log" >&2 || true
    exit 1
  fi
  local ready=""
  for _ in $(seq 1 100); do
    if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then
      ready=1
      break
    fi
    sleep 0.1
  done
  [[ -n "$ready" ]] || { log "the server did not accept connections"; exit 1; }
  as_owner "$bindir/createdb" -h "$dir" -p "$port" -U trellis trellis
  local url="postgres://trellis:$password@127.0.0.1:$port/trellis"
  (umask 077 && printf '%s\n' "$url" >"$dir/url")
  echo "export TRELLIS_TEST_POSTGRES_URL='$url'"
  echo "export TRELLIS_PG_DIR='$dir'"
  log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)"
}

stop() {
  local dir="${TRELLIS_PG_DIR:-}"
  if [[ -z "$dir" || ! -d "$dir/data" ]]; then
    log "no instance to stop (TRELLIS_PG_DIR is unset or not an instance)"
    return 0
  fi
  local bindir
  bindir="$(find_bindir)"
  as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
  rm -rf "$dir"
}

url() {
  local dir="${TRELLIS_PG_DIR:-}"
  [[ -n "$dir" && -f "$dir/url" ]] || { log "no instance (TRELLIS_PG_DIR)"; exit 1; }
  cat "$dir/url"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *)
    echo "usage: scripts/postgres.sh start|stop|url" >&2
    exit 2
    ;;
esac
