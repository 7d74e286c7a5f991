#!/usr/bin/env bash
# CI: README's test commands (swift test, failing on a warning in our code, and the Integrations
# and example packages', against a PostgreSQL server it starts), the whole suite again under the
# thread sanitizer, the demo as a smoke test, a chaos soak, every fuzz target, the guarded API, the
# docs, the benchmark package and the performance budget. Prints every step's wall time at the end.
# Runs on a fresh clone on a Debian machine with the Swift toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every step's wall time, printed as a table when the run ends (passed or not): where the time goes.
timings=$(mktemp)
step_name=""
step_start=0
end_step() {
    if [ -n "$step_name" ] && [ -n "$timings" ]; then
        printf '%s\t%s\n' "$(( $(date +%s) - step_start ))" "$step_name" >>"$timings"
    fi
    step_name=""
}
step() {
    end_step
    step_name="$*"
    step_start=$(date +%s)
    printf '\n=== %s ===\n' "$*"
}
run_start=$(date +%s)
print_timings() {
    if [ -z "$timings" ]; then return 0; fi
    end_step
    printf '\n=== step timings (wall clock) ===\n| seconds | step |\n|---:|---|\n'
    while IFS=$'\t' read -r seconds name; do printf '| %s | %s |\n' "$seconds" "${name%%(*}"; done <"$timings"
    printf '| %s | the whole run |\n' "$(( $(date +%s) - run_start ))"
    rm -f "$timings"
    timings=""
}

# The integration tests start Tests/Server/server.py (Python 3 standard library only); transfer-bench
# compares with curl and reads curl's peak memory with /usr/bin/time (Debian's package "time").
missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /usr/bin/time ] || missing+=(time)
# The performance budget (Benchmarks/budget.sh) counts instructions with valgrind's callgrind.
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
# The shared cache's tests, the example service and shared-cache-bench use a real PostgreSQL server
# (Debian's package; Tests/Server/postgres.sh runs a throwaway cluster of it, never the system's).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
    step "installing ${missing[*]}"
    if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
fi

log=$(mktemp)
postgres_dir=""
trap 'rm -f "$log"; [ -z "$postgres_dir" ] || bash Tests/Server/postgres.sh stop "$postgres_dir"; print_timings' EXIT

# One PostgreSQL cluster for the whole run, in a temporary directory, on a free port of
# 127.0.0.1, stopped (and deleted) when the run ends: the Integrations package's shared-cache
# tests, the example service's two instances and shared-cache-bench use it (a test that kills a
# database starts one of its own).
step "PostgreSQL for the shared-cache tests (Tests/Server/postgres.sh start)"
postgres_dir=$(mktemp -u /tmp/conveyor-ci-postgres-XXXXXX)
CONVEYOR_POSTGRES_URL=$(bash Tests/Server/postgres.sh start "$postgres_dir")
export CONVEYOR_POSTGRES_URL
echo "running in $postgres_dir"

# One debug build serves both checks: `swift build -Xswiftc -warnings-as-errors` before
# `swift test` built everything twice (SwiftPM rebuilds when the flags change: 58 s here). On a
# fresh clone every file is compiled by `swift test`, so every warning is in its output, and a
step "documentation (Scripts/docs.sh: every public type curated, no docc warning; Stability.md's list of the lines only an Apple build compiles)"
bash Scripts/docs.sh
python3 Scripts/apple-only-lines.py --check

step "no known test secret appears in anything the tests or the demo printed"
if grep -a -E 'tok-3f9a-SECRET|cookie-77-SECRET|pa55-SECRET|apikey-SECRET|real-SECRET|cookie-SECRET|pw-SECRET|pg-SECRET' "$log"; then
    echo "a secret leaked into the output above"
    exit 1
fi
echo "clean"

step "benchmark package builds; its executables run a few requests (see BENCHMARKS.md for real runs), and transfer-bench moves 1 GiB each way"
swift build --package-path Benchmarks -c release
bench_bin=$(swift build --package-path Benchmarks -c release --show-bin-path)
for scenario in floor noop10 split unique-path hooks10 request5 opt-out retried every-hook10 realistic peer10; do
    "$bench_bin/instruction-count" "$scenario" 200
done
swift run --package-path Benchmarks -c release loopback-bench 1 20
bash Benchmarks/loopback-instructions.sh 10 raw-ahc ahc-plain urlsession-plain
swift run --package-path Benchmarks -c release cache-bench 1 20
# A PostgreSQL hit beside a memory hit and an upstream miss (it exits 1 when a cached path was not
# answered from its cache, or the uncached one not by the server), against CI's PostgreSQL.
"$bench_bin/shared-cache-bench" 1 64
swift run --package-path Benchmarks -c release concurrency-bench 1 200
swift run --package-path Benchmarks -c release hostile-bench 1
# The generated OpenAPI client through ConveyorTransport and through the runtime's own transports
# (a few requests each, and their instructions), then 1 GiB each way through ConveyorTransport:
# it exits 1 when the peak RSS growth reaches 50 MB, 2 when a transfer fails or is wrong.
"$bench_bin/openapi-bench" 1 20
BIN=openapi-bench bash Benchmarks/loopback-instructions.sh 10 oapi-conveyor-ahc oapi-peer-ahc
"$bench_bin/openapi-bench" transfer
# Event streams: the parser beside mattt/EventSource's on a 2 MB recording and 2,000 events over
# loopback (it exits 1 when the parsers disagree or a read misses an event), and the instructions
# and mallocs per event.
"$bench_bin/events-bench" 2 2000 1
BIN=events-bench bash Benchmarks/loopback-instructions.sh 200 events raw-events

step "performance budget (Benchmarks/budget.sh: instructions and mallocs per request of the main scenarios against Benchmarks/budget.txt, and the hooks each row names seen to run), beside transfer-bench (1 GiB each way)"
# Side by side, since valgrind runs the budget's scenarios on one core and transfer-bench mostly
# waits on the loopback and the disk: instruction counts do not depend on what else runs, and
# transfer-bench's bounds are of its own memory and bytes, not of time.
# transfer-bench is a real measurement, about 45 s: 1 GiB down and up with NetworkClient and with
# curl (BENCHMARKS.md, "Large transfers"). It exits 1 when Conveyor's peak memory grew by 50 MB or
# more in either direction, 2 when a transfer failed or delivered a wrong byte: either fails CI.
transfer_log=$(mktemp)
"$bench_bin/transfer-bench" >"$transfer_log" 2>&1 &
transfer_pid=$!
bash Benchmarks/budget.sh
transfer_status=0
wait "$transfer_pid" || transfer_status=$?
echo "--- transfer-bench ---"
cat "$transfer_log"
rm -f "$transfer_log"
if [ "$transfer_status" -ne 0 ]; then echo "transfer-bench failed (exit $transfer_status)"; exit 1; fi

# The table before the summary, so that the test counts stay the run's last lines.
print_timings

step "summary"
grep -a -E 'Test run with [0-9]+ tests? .*passed' "$log" | sed -E 's/.*Test run with ([0-9]+) tests? in ([0-9]+) suites? passed.*/\1 tests passed (\2 suites)/'
echo "0 failed"
