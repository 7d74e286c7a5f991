#!/usr/bin/env bash
# The client's instructions and mallocs per loopback request, counted by valgrind's callgrind:
# raw AsyncHTTPClient and raw URLSession beside NetworkClient on each (see
# Sources/LoopbackInstructionCount). Each scenario runs with N and 2N requests; the difference
# over N leaves start-up out. The test server is a child process callgrind does not follow.
#
#   bash Benchmarks/loopback-instructions.sh [N] [scenario ...]   (from the repository root; N = 300)
#   BIN=openapi-bench bash Benchmarks/loopback-instructions.sh [N] oapi-conveyor-urlsession …
#       (the generated client's scenarios: Sources/OpenAPIBench)
#
# valgrind 3.19 gives up on the binary's debug information ("Possibly corrupted debuginfo file")
# once SwiftNIO is linked in, so callgrind runs a copy without it (symbols are kept).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(raw-ahc raw-ahc-delegate ahc-plain ahc-timeout ahc raw-urlsession urlsession-plain urlsession)

bin=${BIN:-loopback-instruction-count}
swift build --package-path Benchmarks -c release --product "$bin" >&2
out=$(mktemp -d)
trap 'rm -rf "$out"; kill "$SERVER_PID" 2>/dev/null || true' EXIT
cp "$(swift build --package-path Benchmarks -c release --show-bin-path)/$bin" "$out/bin"
strip --strip-debug "$out/bin"

# The server, outside valgrind (Process cannot spawn it there); it exits when its stdin closes.
coproc SERVER { python3 Tests/Server/server.py; }
read -r _ port <&"${SERVER[0]}"
export LOOPBACK_PORT=$port

count() {  # scenario requests -> "instructions mallocs"
    valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$out/cg" "$out/bin" "$1" "$2" >"$out/log" 2>&1
    if grep -q '^failed' "$out/log"; then cat "$out/log" >&2; exit 1; fi
    python3 Benchmarks/callgrind_counts.py "$out/cg"
}

echo "| scenario | instructions per request | mallocs per request |"
echo "|---|---:|---:|"
for scenario in "${scenarios[@]}"; do
    read -r a ma <<<"$(count "$scenario" "$n")"
    read -r b mb <<<"$(count "$scenario" $((2 * n)))"
    echo "| $scenario | $(((b - a) / n)) | $(python3 -c "print(f'{round(($mb - $ma) / $n, 1):g}')") |"
done
