#!/usr/bin/env bash
# Runs forecast-service against upstream.py as a user would (Docs/Integrations.md), as two
# instances sharing one HTTP cache on PostgreSQL: asks the first for a forecast, then the second
# (answered from what the first fetched: the upstream counts one call, and the random forecast is
# the same), then 32 requests at once over both for a city no one has (one upstream call: one
# fill for the fleet), then stops both with SIGTERM and checks that they shut down gracefully. CI runs it.
# The database: $CONVEYOR_POSTGRES_URL (CI's), else a throwaway one (Tests/Server/postgres.sh).
set -euo pipefail
cd "$(dirname "$0")"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream_port=$(free_port)
python3 upstream.py "$upstream_port" & upstream=$!
database="${CONVEYOR_POSTGRES_URL:-}"
own_database=""
cleanup() {
    kill $upstream 2>/dev/null || true
    if [ -n "$own_database" ]; then bash Tests/Server/postgres.sh stop "$own_database"; fi
}
trap cleanup EXIT
if [ -z "$database" ]; then
    own_database=$(mktemp -u /tmp/forecast-smoke-pg-XXXXXX)
    database=$(bash Tests/Server/postgres.sh start "$own_database")
fi
# CONVEYOR_SCRATCH_PATH: the build folder the tests used (CI shares one with the Integrations package).
scratch=(${CONVEYOR_SCRATCH_PATH:+--scratch-path "$CONVEYOR_SCRATCH_PATH"})
swift build "${scratch[@]}" --product forecast-service
binary="$(swift build "${scratch[@]}" --show-bin-path)/forecast-service"

ports=()
pids=()
logs=()
for instance in 1 2; do
    port=$(free_port)
    log=$(mktemp)
    # 2 s per database call (250 ms by default): the first one also connects and creates the table.
    PORT=$port UPSTREAM_URL="http://127.0.0.1:$upstream_port" UPSTREAM_CLIENT_SECRET=dev-secret \
        CACHE_DATABASE_URL="$database" CACHE_DATABASE_TIMEOUT_MS=2000 CACHE_IDENTITY_KEY=smoke-identity-key-0123 TOKEN_ENCRYPTION_KEY=smoke-token-key-0123456789abcdef "$binary" >"$log" 2>&1 &
    pids+=($!)
    ports+=("$port")
    logs+=("$log")
done
for index in 0 1; do
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:${ports[$index]}/health" >/dev/null 2>&1 && break
        kill -0 "${pids[$index]}" 2>/dev/null || { cat "${logs[$index]}"; echo "forecast-service exited"; exit 1; }
        python3 -c 'import time; time.sleep(0.1)'   # waiting for a process to start, not for time to pass
    done
done
city="smoke$(python3 -c 'import random, string; print("".join(random.choice(string.ascii_lowercase) for _ in range(8)))')"
first=$(curl -fs "http://127.0.0.1:${ports[0]}/forecast/$city")
second=$(curl -fs "http://127.0.0.1:${ports[1]}/forecast/$city")
calls=$(curl -fs "http://127.0.0.1:$upstream_port/calls/$city")
echo "instance 1: GET /forecast/$city -> $first"
echo "instance 2: GET /forecast/$city -> $second"
echo "upstream: $calls"
echo "$first" | grep -q '"city":"Smoke' || { echo "unexpected answer"; exit 1; }
python3 -c 'import json, sys; a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2]); sys.exit(a != b)' "$first" "$second" \
    || { echo "the second instance did not answer from the shared cache"; exit 1; }
[ "$calls" = '{"calls": 1}' ] || { echo "the upstream was called more than once"; exit 1; }
# A cold city asked for by both instances at once, 16 requests each: one fills it for both.
cold="cold$(python3 -c 'import random, string; print("".join(random.choice(string.ascii_lowercase) for _ in range(8)))')"
herd=()
for index in 0 1; do
    for _ in $(seq 16); do
        curl -fs -o /dev/null "http://127.0.0.1:${ports[$index]}/forecast/$cold" & herd+=($!)
    done
done
for pid in "${herd[@]}"; do wait "$pid" || { echo "a request of the herd failed"; exit 1; }; done
cold_calls=$(curl -fs "http://127.0.0.1:$upstream_port/calls/$cold")
echo "upstream, 32 requests at once for a cold city over both instances: $cold_calls"
[ "$cold_calls" = '{"calls": 1}' ] || { echo "the cold city was fetched more than once"; exit 1; }
for index in 0 1; do
    kill -TERM "${pids[$index]}"
    wait "${pids[$index]}"
    cat "${logs[$index]}"
    grep -q "HTTP client shut down" "${logs[$index]}" || { echo "the HTTP client was not shut down"; exit 1; }
    if grep -q "pg-SECRET\|dev-secret\|smoke-identity-key\|smoke-token-key" "${logs[$index]}"; then echo "a secret reached the log"; exit 1; fi
done
echo "two forecast-service instances shared one cache (the upstream answered once, for a cold city asked by both at once too) and shut down gracefully"
