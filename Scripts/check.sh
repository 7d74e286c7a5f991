#!/usr/bin/env bash
# The everyday loop: the steps of .ci/run that cover what you changed, in minutes instead of
# CI's whole run. .ci/run stays the gate.
#
#   bash Scripts/check.sh            changes since the last commit (staged, unstaged, untracked)
#   bash Scripts/check.sh main~3     changes since that commit
#
# Always: the library's tests (README's `swift test`), failing on a warning in its own code.
# Then, for the folders the change touched: Integrations/ (its tests), Examples/<name>/ (that
# example's tests), FuzzTesting/ or Tests/FuzzChecks/ (every fuzz target for 10 s), Benchmarks/
# (the budget: instructions and mallocs per request), Sources/ or API/ (the guarded API:
# Scripts/api-check.sh). A change to the library's Sources/ also
# runs the Integrations tests, whose transports and bridges sit on it.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD}
changed=$( (git diff --name-only "$base"; git ls-files --others --exclude-standard) | sort -u)
touches() { echo "$changed" | grep -qE "$1"; }

echo "changed since $base:"; echo "$changed" | sed 's/^/  /'
# As .ci/run: one build, the warnings of the files it compiled read from its output.
check_log=$(mktemp)
trap 'rm -f "$check_log"' EXIT
swift test 2>&1 | tee "$check_log"
if grep -E "^$PWD/(Sources|Tests)/[^:]+:[0-9]+:[0-9]+: (warning|error):" "$check_log"; then
    echo "check.sh: the package's own code has warnings"; exit 1
fi
# The Integrations package builds in .build-server, as in .ci/run (api-check reads it there too).
if touches '^(Sources/|Integrations/|Package.swift)'; then swift test --package-path Integrations --scratch-path "$PWD/.build-server"; fi
for example in Examples/*/; do
    name=$(basename "$example")
    if touches "^Examples/$name/"; then swift test --package-path "Examples/$name"; fi
done
if touches '^(Sources/|Integrations/Sources/|Integrations/Package.swift|API/|Package.swift)'; then bash Scripts/api-check.sh; fi
if touches '^(FuzzTesting/|Tests/FuzzChecks/)'; then bash FuzzTesting/run.sh 10; fi
if touches '^(Benchmarks/|Sources/Pipeline/|Sources/Client/)'; then bash Benchmarks/budget.sh; fi
echo "check.sh: the steps for this change passed (run bash .ci/run before you stop)"
