#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the checkpoint tests.
#
#   eval "$(bash .ci/postgres.sh)"     # sets SOOTHE_TEST_POSTGRES_DSN
#
# stdout carries only the `export ...` line; every message goes to stderr. Idempotent: a server
# this script already started (same state dir) is reused and its DSN printed again. If no server
# can be started (no packages, no permission), it says why and exits 0 with nothing on stdout, so
# the postgres-marked tests skip with their own message instead of failing the run.
#
# Environment: SOOTHE_PG_DIR (state dir, default: $TMPDIR/soothe-pg), SOOTHE_PG_STOP=1 (stop it).
set -uo pipefail

say() { echo "postgres.sh: $*" >&2; }
give_up() { say "$*; the postgres tests will be skipped"; exit 0; }

state="${SOOTHE_PG_DIR:-${TMPDIR:-/tmp}/soothe-pg}"
data="$state/data"
user="$(id -un)"

find_bin() {
    local b
    b="$(command -v pg_ctl 2>/dev/null || true)"
    if [ -n "$b" ]; then dirname "$(readlink -f "$b")"; return 0; fi
    for b in /usr/lib/postgresql/*/bin; do
        if [ -x "$b/pg_ctl" ]; then echo "$b"; fi
    done | sort -V | tail -n 1
}

bin="$(find_bin)"
if [ -z "$bin" ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "PostgreSQL not found; installing Debian's postgresql package"
        export DEBIAN_FRONTEND=noninteractive
        (apt-get install -y -q postgresql >&2 || { apt-get update -q >&2 && apt-get install -y -q postgresql >&2; }) \
            || give_up "apt-get install postgresql failed"
        bin="$(find_bin)"
    fi
    [ -n "$bin" ] || give_up "no PostgreSQL binaries (pg_ctl/initdb) and no way to install them"
fi

# PostgreSQL refuses to run as root: run it as the 'postgres' system user (created by the package).
run_as=()
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres >&2 2>&1 \
        || give_up "running as root and there is no 'postgres' user to run the server as"
    user=postgres
    if command -v runuser >/dev/null 2>&1; then run_as=(runuser -u postgres --); else run_as=(su postgres -s /bin/sh -c); fi
fi
pg() {  # run a PostgreSQL binary as the server's user
    if [ "${#run_as[@]}" -eq 0 ]; then "$@";
    elif [ "${run_as[0]}" = su ]; then "${run_as[@]}" "$(printf '%q ' "$@")";
    else "${run_as[@]}" "$@"; fi
}

mkdir -p "$state" || give_up "cannot create $state"
[ "$(id -u)" -eq 0 ] && chown "$user" "$state"
chmod 700 "$state"

if [ "${SOOTHE_PG_STOP:-0}" = 1 ]; then
    pg "$bin/pg_ctl" -D "$data" -m fast stop >&2 || true
    exit 0
fi

dsn_for() { echo "postgresql://$user@127.0.0.1:$1/postgres?sslmode=disable"; }

# Reuse a server this script started before.
if [ -f "$state/port" ] && pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    port="$(cat "$state/port")"
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
        say "reusing the server on 127.0.0.1:$port"
        echo "export SOOTHE_TEST_POSTGRES_DSN='$(dsn_for "$port")'"
        exit 0
    fi
fi

if [ ! -f "$data/PG_VERSION" ]; then
    rm -rf "$data"
    pg "$bin/initdb" -D "$data" -U "$user" --auth=trust -E UTF8 --no-locale >"$state/initdb.log" 2>&1 \
        || give_up "initdb failed (see $state/initdb.log)"
fi

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')" \
    || give_up "could not find a free port"
pg "$bin/pg_ctl" -D "$data" -l "$state/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $state -c fsync=off" start >&2 \
    || give_up "the server did not start (see $state/server.log)"
echo "$port" >"$state/port"
say "started PostgreSQL on 127.0.0.1:$port (data in $data; stop with SOOTHE_PG_STOP=1 bash .ci/postgres.sh)"
echo "export SOOTHE_TEST_POSTGRES_DSN='$(dsn_for "$port")'"
