#!/usr/bin/env bash
# Instructions and mallocs per request for the in-memory scenarios, counted by valgrind's callgrind
# (it counts instructions and calls, not time, so the figures repeat whatever else the machine is
# doing). Each scenario runs twice, with N and 2N requests; (count(2N) - count(N)) / N leaves
# start-up out. Mallocs are the calls to malloc, calloc, realloc and posix_memalign that
# callgrind recorded.
#
#   bash Benchmarks/instructions.sh [N] [scenario ...]      (from the repository root; N = 2000)
#
# Needs valgrind (apt-get install valgrind) and python3. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(floor noop0 noop10 noop50 hooks1 hooks5 hooks10 request1 request5 split
    opt-out unique-path timeout guarded intercept1 intercept10 every-hook10 chain50 chain100 chain200 plain-json
    realistic realistic-uninterrupted retried realistic-1 realistic-2 realistic-3 realistic-4 realistic-5 realistic-6
    peer0 peer1 peer10)

swift build --package-path Benchmarks -c release --product instruction-count >&2
binary=$(swift build --package-path Benchmarks -c release --show-bin-path)/instruction-count
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() {  # scenario requests -> "instructions mallocs"
    valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$out/cg" "$binary" "$1" "$2" >"$out/log" 2>&1
    python3 Benchmarks/callgrind_counts.py "$out/cg"
}

echo "| scenario | instructions per request | mallocs per request |"
echo "|---|---:|---:|"
for scenario in "${scenarios[@]}"; do
    read -r a ma <<<"$(count "$scenario" "$n")"
    read -r b mb <<<"$(count "$scenario" $((2 * n)))"
    echo "| $scenario | $(((b - a) / n)) | $(python3 -c "print(f'{round(($mb - $ma) / $n, 1):g}')") |"
done
