#!/usr/bin/env bash
# Builds every libFuzzer target and runs each for a fixed time; fails on any finding.
#
#   bash FuzzTesting/run.sh            # 20 s per target (what CI runs)
#   bash FuzzTesting/run.sh 600        # 10 minutes per target
#   bash FuzzTesting/run.sh 60 vary    # one target
#
# Each target starts from its committed corpus (Corpus/<target>/, replayed by `swift test`) and
# works in a scratch copy, so a run changes nothing in the repository. A finding is a trap, a
# sanitizer report, a failed oracle or an input slower than 10 s: the input is written to
# FuzzTesting/findings/<target>/ and the script exits 1. Commit a finding to Corpus/<target>/
# once fixed, so that the test suite replays it forever.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-20}
only=${2:-}

# -parse-as-library: each target's entry point is an @main type that starts libFuzzer's driver.
# lld: gold crashes on the sanitizer runtime's debug information (an internal error in
# dwarf_reader.cc) instead of linking. -enable-testing: the checks use @testable imports.
flags=(-c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing
    -Xswiftc -use-ld=lld)
bin=$(swift build "${flags[@]}" --show-bin-path)

product_of() {  # http-date -> FuzzHTTPDate, cache-entry -> FuzzCacheEntry
    local name
    name="Fuzz$(echo "$1" | awk -F- '{for (i = 1; i <= NF; i++) printf "%s", toupper(substr($i, 1, 1)) substr($i, 2)}')"
    [ "$name" = FuzzHttpDate ] && name=FuzzHTTPDate
    echo "$name"
}

targets=()
for folder in Corpus/*/; do
    target=$(basename "$folder")
    [ -n "$only" ] && [ "$target" != "$only" ] && continue
    targets+=("$target")
done
# Product by product: a plain `swift build` would also build the root package's demo, whose
# top-level code -parse-as-library refuses.
for target in "${targets[@]}"; do swift build "${flags[@]}" --product "$(product_of "$target")"; done

# The targets run side by side, one per core (CONVEYOR_FUZZ_JOBS to change it): each libFuzzer
# process is single-threaded, so each still gets its whole `seconds` of one core.
jobs=${CONVEYOR_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
results=$(mktemp -d)
fuzz() {  # target: runs it; its report goes to $results/<target>.out, a finding to $results/<target>.failed
    local target=$1 product work
    product=$(product_of "$target")
    work=$(mktemp -d)
    mkdir -p "findings/$target"
    {
        echo "=== $target ($product, $seconds s) ==="
        if "$bin/$product" -max_total_time="$seconds" -timeout=10 -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="findings/$target/" "$work" "Corpus/$target" >"$work.log" 2>&1; then
            grep -E '^stat::number_of_executed_units|^Done' "$work.log" || true
        else
            touch "$results/$target.failed"
            echo "FINDING in $target:"
            grep -v -E '^(#[0-9]+|INFO:|MS:)' "$work.log" | tail -40
            ls -l "findings/$target"
        fi
    } >"$results/$target.out"
    rm -rf "$work" "$work.log"
    rmdir "findings/$target" 2>/dev/null || true
}
running=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
    fuzz "$target" &
    running=$((running + 1))
done
wait
status=0
for target in "${targets[@]}"; do
    cat "$results/$target.out"
    [ -e "$results/$target.failed" ] && status=1
done
rm -rf "$results"
rmdir findings 2>/dev/null || true
exit $status
