#!/usr/bin/env bash
# Runs forecast-service against upstream.py as a user would (README's "On a server"), asks it for
# a forecast, then stops it with SIGTERM and checks that it shut down gracefully. CI runs it.
set -euo pipefail
cd "$(dirname "$0")"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream_port=$(free_port)
service_port=$(free_port)
python3 upstream.py "$upstream_port" & upstream=$!
trap 'kill $upstream 2>/dev/null || true' EXIT
# CONVEYOR_SCRATCH_PATH: the build folder the tests used (CI shares one with the Integrations package).
scratch=(${CONVEYOR_SCRATCH_PATH:+--scratch-path "$CONVEYOR_SCRATCH_PATH"})
swift build "${scratch[@]}" --product forecast-service
log=$(mktemp)
PORT=$service_port UPSTREAM_URL="http://127.0.0.1:$upstream_port" UPSTREAM_CLIENT_SECRET=dev-secret \
    swift run "${scratch[@]}" --skip-build forecast-service >"$log" 2>&1 & service=$!
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$service_port/health" >/dev/null 2>&1 && break
    kill -0 $service 2>/dev/null || { cat "$log"; echo "forecast-service exited"; exit 1; }
    python3 -c 'import time; time.sleep(0.1)'   # waiting for a process to start, not for time to pass
done
answer=$(curl -fs "http://127.0.0.1:$service_port/forecast/paris")
echo "GET /forecast/paris -> $answer"
echo "$answer" | grep -q '"city":"Paris"' || { echo "unexpected answer"; exit 1; }
kill -TERM $service
wait $service
cat "$log"
grep -q "HTTP client shut down" "$log" || { echo "the HTTP client was not shut down"; exit 1; }
echo "forecast-service answered and shut down gracefully"
