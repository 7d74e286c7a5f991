#!/usr/bin/env bash
# Runs forecast-service against upstream.py as a user would (Docs/Integrations.md), as two
# instances sharing one HTTP cache on PostgreSQL: asks the first for a forecast, then the second
# (answered from what the first fetched: the upstream counts one call, and the random forecast is
# the same), then 32 requests at once over both for a city no one has (one upstream call: one
# fill for the fleet), then two users' own saved cities on both (one upstream call per user: a
# private answer kept per user in the shared table), then ten more cities over both until their
# quota (10 upstream requests an hour, shared through the database) is used up: at most 10 answers
# in all, the rest answered 503 with Retry-After; then stops both with SIGTERM and checks that they shut down gracefully. CI runs it.
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

scratch_headers=$(mktemp)
ports=()
pids=()
logs=()
for instance in 1 2; do
    port=$(free_port)
    log=$(mktemp)
    # 2 s per database call (250 ms by default): the first one also connects and creates the table.
    PORT=$port UPSTREAM_URL="http://127.0.0.1:$upstream_port" UPSTREAM_CLIENT_SECRET=dev-secret \
        CACHE_DATABASE_URL="$database" CACHE_DATABASE_TIMEOUT_MS=2000 CACHE_IDENTITY_KEY=smoke-identity-key-0123 TOKEN_ENCRYPTION_KEY=smoke-token-key-0123456789abcdef UPSTREAM_QUOTA=10/3600 "$binary" >"$log" 2>&1 &
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
# Each user's own answer, kept for that user alone in the shared table: alice, then bob, on the
# first instance, then both on the second; the upstream answers each user once, and each gets
# their own cities.
for user in alice bob; do
    for index in 0 1; do
        saved=$(curl -fs -H "Authorization: Bearer user-$user$cold-SECRET" "http://127.0.0.1:${ports[$index]}/me/saved")
        echo "$saved" | grep -q "\"user\":\"$user$cold\"" || { echo "instance $((index + 1)) answered $user with $saved"; exit 1; }
    done
done
saved_calls="$(curl -fs "http://127.0.0.1:$upstream_port/calls/saved-alice$cold") $(curl -fs "http://127.0.0.1:$upstream_port/calls/saved-bob$cold")"
echo "upstream, each user's saved cities asked on both instances: $saved_calls"
[ "$saved_calls" = '{"calls": 1} {"calls": 1}' ] || { echo "a user's private answer was not kept for the fleet"; exit 1; }
# One quota for both: ten more cities, alternately on each instance; every answer the upstream
# gave (the first city, the cold one, the users' cities, these) counts against the 10 the fleet
# may ask for (so do its 401s and 503s, which it does not count here).
answered=0
refused=0
asked=("$city" "$cold" "saved-alice$cold" "saved-bob$cold")
for number in $(seq 10); do
    other="quota$(python3 -c 'import random, string; print("".join(random.choice(string.ascii_lowercase) for _ in range(6)))')"
    asked+=("$other")
    status=$(curl -s -o /dev/null -D "$scratch_headers" -w '%{http_code}' "http://127.0.0.1:${ports[$((number % 2))]}/forecast/$other")
    case "$status" in
    200) answered=$((answered + 1)) ;;
    503) refused=$((refused + 1)); grep -qi '^retry-after: [0-9]' "$scratch_headers" || { echo "a 503 without Retry-After"; exit 1; } ;;
    *) echo "GET /forecast/$other -> $status"; exit 1 ;;
    esac
done
total=0
for asked_city in "${asked[@]}"; do
    total=$((total + $(curl -fs "http://127.0.0.1:$upstream_port/calls/$asked_city" | python3 -c 'import json, sys; print(json.load(sys.stdin)["calls"])')))
done
echo "one quota of 10 an hour over both instances: $answered more cities answered, $refused refused with 503; the upstream gave $total answers in all"
[ "$total" -le 10 ] && [ "$refused" -gt 0 ] || { echo "the fleet's quota was not held"; exit 1; }
for index in 0 1; do
    kill -TERM "${pids[$index]}"
    wait "${pids[$index]}"
    cat "${logs[$index]}"
    grep -q "HTTP client shut down" "${logs[$index]}" || { echo "the HTTP client was not shut down"; exit 1; }
    if grep -q "SECRET\|dev-secret\|smoke-identity-key\|smoke-token-key" "${logs[$index]}"; then echo "a secret reached the log"; exit 1; fi
done
echo "two forecast-service instances shared one cache (the upstream answered once, for a cold city asked by both at once too) and one quota, and shut down gracefully"
