#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for tests and benchmarks (Debian's postgresql
# package; nothing else is touched):
#   postgres.sh start DIR   creates a cluster in DIR (which must not exist), starts it on a free
#                           port and prints its URL: postgres://conveyor:PASSWORD@127.0.0.1:PORT/conveyor
#   postgres.sh stop DIR    stops it (immediately) and deletes DIR
#   postgres.sh kill DIR    kills the server with SIGKILL, as a crash would (DIR stays)
# As root, the server runs as the `postgres` user (PostgreSQL refuses to run as root).
set -euo pipefail
command="${1:?usage: postgres.sh start|stop|kill DIR}"
dir="${2:?usage: postgres.sh start|stop|kill DIR}"
bin="${CONVEYOR_POSTGRES_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
[ -x "$bin/initdb" ] || { echo "postgres.sh: PostgreSQL's server is not installed (apt-get install postgresql)" >&2; exit 69; }
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# The server keeps nothing open of the process that ran this script but /dev/null and its log:
# a descriptor that process opened at that moment without close-on-exec (the write end of a pipe
# another of its threads reads, seen in the tests: TestPostgres spawned this script while
# LocalServer's probe had a pipe open) would stay open for as long as the server runs, and the
# pipe's reader would never see its end.
close_inherited() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        case "$fd" in 0 | 1 | 2 | 255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
    done
}
# The test password: the secrets check of .ci/run greps the tests' output for it.
password="pg-SECRET-7c1d"

case "$command" in
start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    printf '%s\n' "$password" >"$dir.pw"
    [ "$(id -u)" = 0 ] && chown postgres "$dir.pw"
    as_owner "$bin/initdb" -D "$dir/data" -U conveyor --pwfile="$dir.pw" --auth=scram-sha-256 \
        -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir.pw"
    (
        close_inherited
        exec </dev/null
        as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    ) || { cat "$dir/server.log" >&2; exit 1; }
    PGPASSWORD="$password" "$bin/psql" -h 127.0.0.1 -p "$port" -U conveyor -d postgres -q \
        -c "CREATE DATABASE conveyor" >/dev/null
    echo "postgres://conveyor:$password@127.0.0.1:$port/conveyor"
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
kill)
    # The postmaster and every backend at once, as an out-of-memory kill of the whole server would.
    pid=$(head -1 "$dir/data/postmaster.pid")
    pkill -KILL -P "$pid" || true
    kill -KILL "$pid"
    ;;
*) echo "usage: postgres.sh start|stop|kill DIR" >&2; exit 64 ;;
esac
