#!/usr/bin/env bash
# Runs README's test command (`swift test`) N times on a fresh clone of HEAD and prints, per test,
# how many runs it failed in: a test that fails once in N is a broken test (Docs/Testing.md,
# "Green every time").
#
#   bash Scripts/repeat-tests.sh [N=20] [extra swift test arguments…]
#
# The clone is built once (by the first run); each later run reuses the build. A run that ends
# without Swift Testing's summary line (a trap, a signal, a hang killed by `timeout`) counts as a
# failure of the run, with its last lines shown. Exits 1 when any run failed.
set -uo pipefail
runs=${1:-20}
shift || true
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/conveyor-repeat-XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/clone"
cd "$work/clone"
echo "fresh clone of $(git rev-parse --short HEAD) in $work/clone; $runs runs of swift test"

failures="$work/failures.txt"
: >"$failures"
bad_runs=0
for run in $(seq 1 "$runs"); do
    log="$work/run-$run.log"
    skip=()
    [ "$run" -gt 1 ] && skip=(--skip-build)
    start=$(date +%s)
    timeout 900 swift test "${skip[@]}" "$@" >"$log" 2>&1
    status=$?
    seconds=$(( $(date +%s) - start ))
    summary=$(grep -a -E '^.? ?Test run with [0-9]+ tests?' "$log" | tail -1)
    # Swift Testing's failing tests: "✘ Test name(…) failed after …" (an issue recorded in it).
    grep -a -E '✘ Test [^ ]+.* failed after' "$log" | sed -E 's/.*✘ Test ([^ ]+( with [0-9]+ test cases?)?).*/\1/' |
        sed -E 's/ with [0-9]+ test cases?//' | sort -u >>"$failures"
    if [ "$status" -ne 0 ] || ! grep -a -qE 'Test run with [0-9]+ tests? .*passed' "$log"; then
        bad_runs=$((bad_runs + 1))
        echo "run $run: FAILED (exit $status, ${seconds} s) ${summary}"
        grep -a -E 'Fatal error|signal [0-9]+|error: Exited with' "$log" | head -3 | sed 's/^/    /'
        # A run that ended without a summary (a hang killed by `timeout`): the suites still running.
        if [ -z "$summary" ]; then
            stuck=$(comm -23 <(grep -a -E '^. Suite \S+ started' "$log" | awk '{print $3}' | sort -u) \
                <(grep -a -E '^. Suite \S+ (passed|failed)' "$log" | awk '{print $3}' | sort -u) | tr '\n' ' ')
            echo "    no summary (exit $status): suites still running: ${stuck:-none}"
        fi
    else
        echo "run $run: passed (${seconds} s) ${summary}"
    fi
done

echo
echo "| test | runs failed (of $runs) |"
echo "|---|---:|"
if [ -s "$failures" ]; then
    sort "$failures" | uniq -c | sort -rn | while read -r count name; do echo "| \`$name\` | $count |"; done
else
    echo "| (none) | 0 |"
fi
echo
echo "$((runs - bad_runs)) of $runs runs passed"
[ "$bad_runs" -eq 0 ]
