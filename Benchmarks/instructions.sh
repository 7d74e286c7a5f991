#!/usr/bin/env bash
# Instructions per request for the in-memory scenarios, counted by valgrind's callgrind (it counts
# instructions, not time, so the figures repeat exactly whatever else the machine is doing).
# Each scenario runs twice, with N and 2N requests; (count(2N) - count(N)) / N leaves start-up out.
#
#   bash Benchmarks/instructions.sh [N] [scenario ...]      (from the repository root; N = 2000)
#
# Needs valgrind (apt-get install valgrind). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(floor noop0 noop1 noop10 noop50 split unique-path timeout guarded plain-json realistic realistic-uninterrupted peer0 peer1 peer10)

swift build --package-path Benchmarks -c release --product instruction-count >&2
binary=$(swift build --package-path Benchmarks -c release --show-bin-path)/instruction-count
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() {  # scenario requests -> total instructions
    valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$out/cg" "$binary" "$1" "$2" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "| scenario | instructions per request |"
echo "|---|---:|"
for scenario in "${scenarios[@]}"; do
    a=$(count "$scenario" "$n")
    b=$(count "$scenario" $((2 * n)))
    echo "| $scenario | $(((b - a) / n)) |"
done
