#!/usr/bin/env bash
# The guarded API (Docs/Stability.md), run by CI:
#
# 1. No source-breaking change against the release in API/baseline.txt: SwiftPM's
#    `diagnose-api-breaking-changes` compares every library product's modules with that commit's
#    (it builds the commit in a worktree of its own). An intended break (a major release) updates
#    API/baseline.txt and CHANGELOG.md in the same commit.
# 2. Each product's public-symbol count is the one in API/public-symbols.txt (a ratchet: growth is
#    always a decision, recorded in the commit that makes it).
# 3. The same two for the server half (the Integrations package's six products), against the
#    API recorded in API/server-baseline.txt: its digests in API/digests/<commit>/, compared by
#    SwiftPM in the Integrations package (built in .build-server, as CI's Integrations step does).
#
#   bash Scripts/api-check.sh                  check all of it
#   bash Scripts/api-check.sh --update         write today's counts into API/public-symbols.txt
#   bash Scripts/api-check.sh --record-server  record the server half's API as HEAD has it: its
#                                              digests and API/server-baseline.txt (a release of
#                                              the server half that changes its API, reviewed)
set -euo pipefail
cd "$(dirname "$0")/.."
update=false
record_server=false
[ "${1:-}" = "--update" ] && update=true
[ "${1:-}" = "--record-server" ] && record_server=true
# The server half builds where CI's Integrations step built it (or where CONVEYOR_SERVER_SCRATCH says).
server_scratch="${CONVEYOR_SERVER_SCRATCH:-$PWD/.build-server}"
server_products=(ConveyorAsyncHTTPClient ConveyorLogging ConveyorMetrics ConveyorTracing ConveyorOpenAPI ConveyorPostgres)

if $record_server; then
    # The digests must describe a commit: Integrations/ as HEAD has it.
    if [ -n "$(git status --porcelain -- Integrations/Package.swift Integrations/Sources)" ]; then
        echo "api-check: commit Integrations/ first (the record names HEAD's commit)"; exit 1
    fi
    read -r server_version _ < <(grep -v '^#' API/server-baseline.txt)
    commit=$(git rev-parse HEAD)
    swift build --package-path Integrations --scratch-path "$server_scratch"
    bin=$(swift build --package-path Integrations --scratch-path "$server_scratch" --show-bin-path)
    triple=$(swift -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')
    # What SwiftPM passes swift-api-digester for a package whose dependencies have C modules
    # (SwiftNIO's): every C target's module map and include folder.
    mapfile -t clang < <(bash Scripts/c-module-flags.sh "$bin" "$server_scratch/checkouts")
    mkdir -p "API/digests/$commit"
    for module in "${server_products[@]}"; do
        swift-api-digester -dump-sdk -module "$module" -I "$bin/Modules" -target "$triple" "${clang[@]}" \
            -o "API/digests/$commit/$module.json"
    done
    { grep '^#' API/server-baseline.txt; echo "$server_version $commit"; } >API/server-baseline.txt.new
    mv API/server-baseline.txt.new API/server-baseline.txt
    echo "recorded the server half's API at $commit in API/digests/$commit/ and API/server-baseline.txt"
    exit 0
fi

log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$log" "$work"' EXIT
products=(Conveyor ConveyorTesting ConveyorTransportConformance)
# The modules of each product (Conveyor re-exports the pipeline and the behaviors).
declare -A modules_of=(
    [Conveyor]="ConveyorPipeline ConveyorBehaviors Conveyor"
    [ConveyorTesting]="ConveyorTesting"
    [ConveyorTransportConformance]="ConveyorTransportConformance"
)

counts=$(bash Scripts/public-symbols.sh 2>"$log") || { cat "$log"; exit 1; }
server_counts=$(bash Scripts/public-symbols.sh --server --scratch-path "$server_scratch" 2>"$log") || { cat "$log"; exit 1; }
declare -A module_count=()
while read -r module count; do module_count[$module]=$count; done <<<"$counts"$'\n'"$server_counts"
for product in "${server_products[@]}"; do modules_of[$product]=$product; done

failed=0
lines=()
printf '%-30s %8s %8s\n' product symbols recorded
for product in "${products[@]}" "${server_products[@]}"; do
    total=0
    for module in ${modules_of[$product]}; do total=$((total + ${module_count[$module]:?no count for $module})); done
    recorded=$(awk -v p="$product" '$1 == p { print $2 }' API/public-symbols.txt)
    note=""
    if [ "$total" != "$recorded" ]; then
        note="  <- differs: record it with --update in the commit that changes the API"
        $update || failed=1
    fi
    printf '%-30s %8s %8s%s\n' "$product" "$total" "${recorded:-none}" "$note"
    lines+=("$product $total")
done
if $update; then
    { grep '^#' API/public-symbols.txt; printf '%s\n' "${lines[@]}"; } >API/public-symbols.txt.new
    mv API/public-symbols.txt.new API/public-symbols.txt
    echo "wrote API/public-symbols.txt"
    exit 0
fi

read -r version baseline < <(grep -v '^#' API/baseline.txt)
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
    # A shallow clone may lack the release commit: fetch it.
    git fetch -q --depth=1 origin "$baseline" 2>/dev/null || true
fi
git cat-file -e "$baseline^{commit}" 2>/dev/null ||
    { echo "api-check: the baseline commit $baseline ($version) is not in this clone"; exit 1; }
echo "api-check: comparing with $version ($baseline)"
# The working tree against the release (also when HEAD is the release: uncommitted edits count).
# API/digests/<commit>/ holds the release's API digests (the JSON swift-api-digester wrote when
# the release was built, committed once), so CI does not build the release again (90 s on a fresh
# clone); SwiftPM builds it only when they are missing. Regenerate them after a new release with
# `swift package diagnose-api-breaking-changes <commit> --baseline-dir API/digests --regenerate-baseline`.
swift package diagnose-api-breaking-changes "$baseline" --products "${products[@]}" --baseline-dir API/digests \
    >"$log" 2>&1 || true
# The modules a product re-exports. SwiftPM compares the modules a product lists (`Conveyor`'s own
# target), not the ones it re-exports, and `import Conveyor` also makes ConveyorPipeline's and
# ConveyorBehaviors' declarations visible (CacheBehavior, RetryBehavior, HTTPRequest, ...): without
# them a changed signature there passed this check (Scripts/api-check-proof.sh shows it caught
# now). Their release digests (API/digests/<commit>/<module>.json) were dumped from the release's
# build with `swift-api-digester -dump-sdk -module <module> -I <its Modules folder>`; each is
# compared here with the module public-symbols.sh just built, as SwiftPM does for the others.
modules_dir="$(swift build --show-bin-path)/Modules"
triple=$(swift -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')
# compare MODULE DIGEST WHAT [swift-api-digester flags...]: today's module (built in the Modules
# folder the flags name), dumped as the recorded one was; then both without the declarations the
# digester marks `isInternal` (`package` ones: Stability.md promises nothing about them, and a
# changed `package` protocol was reported as a break), compared. Each break becomes a line of $log.
compare() {
    local module=$1 digest=$2 what=$3
    shift 3
    [ -f "$digest" ] || { echo "api-check: no recorded digest $digest for $module ($what)"; exit 1; }
    swift-api-digester -dump-sdk -module "$module" -target "$triple" "$@" -o "$work/$module.now.json" \
        >"$work/dump.log" 2>&1 || { cat "$work/dump.log"; echo "api-check: swift-api-digester could not dump $module"; exit 1; }
    python3 Scripts/api-public-only.py "$digest" "$work/$module.then.json"
    python3 Scripts/api-public-only.py "$work/$module.now.json" "$work/$module.now-public.json"
    local report
    report=$(swift-api-digester -diagnose-sdk -input-paths "$work/$module.then.json" \
        -input-paths "$work/$module.now-public.json" 2>&1) ||
        { echo "$report"; echo "api-check: swift-api-digester failed on $module"; exit 1; }
    # The report is a list of section titles (`/* Removed Decls */`); every other line is a break.
    local breaks
    breaks=$(grep -v -E '^\s*$|^/\*.*\*/$' <<<"$report" || true)
    if [ -n "$breaks" ]; then
        while IFS= read -r line; do echo "💔 API breakage: $line" >>"$log"; done <<<"$breaks"
    else
        echo "No breaking changes detected in $module ($what)" >>"$log"
    fi
}
for product in "${products[@]}"; do
    for module in ${modules_of[$product]}; do
        [ "$module" != "$product" ] || continue
        compare "$module" "API/digests/$baseline/$module.json" "re-exported by $product" -I "$modules_dir"
    done
done

# The server half, against its recorded API (API/server-baseline.txt), the same way: SwiftPM's
# command cannot check out a package that lives in a sub-folder, and it builds every target of
# the package (its executables too) where only the six modules matter. public-symbols.sh --server
# has just built them in $server_scratch.
read -r server_version server_baseline < <(grep -v '^#' API/server-baseline.txt)
echo "api-check: comparing the server half with its recorded API ($server_version, $server_baseline)"
server_bin=$(swift build --package-path Integrations --scratch-path "$server_scratch" --show-bin-path)
mapfile -t server_flags < <(bash Scripts/c-module-flags.sh "$server_bin" "$server_scratch/checkouts")
for module in "${server_products[@]}"; do
    compare "$module" "API/digests/$server_baseline/$module.json" "the server half" -I "$server_bin/Modules" "${server_flags[@]}"
done

grep -v '^\[' "$log" || true
if grep -q "API breakage" "$log" || ! grep -q "No breaking changes detected" "$log"; then
    echo "api-check: FAILED (a breaking change against $version, or against the server half's recorded $server_version: a major release updates API/baseline.txt and CHANGELOG.md; before its first release, the server half re-records with --record-server)"
    exit 1
fi
if [ "$failed" -ne 0 ]; then
    echo "api-check: FAILED (a product's public-symbol count is not the one in API/public-symbols.txt)"
    exit 1
fi
echo "api-check: no breaking change, every product's public API as recorded"
