#!/usr/bin/env bash
# Builds the DocC documentation of Conveyor, ConveyorTesting and ConveyorTransportConformance,
# the three modules users import,
# into .build-docs/Conveyor.doccarchive, with the toolchain's own tools only (swift build,
# swift-symbolgraph-extract, docc; no package plugin).
#
# - `Conveyor` re-exports ConveyorPipeline and ConveyorBehaviors, so its page holds their types
#   too (NetworkError, RequestBehavior, HTTPRequest, every behavior), where `import Conveyor`
#   users look for them.
# - The catalog is the modules' own catalogs, where docc and the Swift Package Index find them
#   (Sources/Client/Conveyor.docc and Sources/Testing/ConveyorTesting.docc: the module pages and
#   their topic groups), plus the guides Docs/*.md, copied in as articles at build time
#   (Scripts/docs_helper.py, `articles`).
# - Fails on any docc warning, and when a public type of any of the five library modules has no
#   page, is not curated in a topic group (top-level types), or is not listed on its parent's
#   page (nested types), and when a public declaration has no doc comment of its own (one
#   inherited from a protocol, or written above another declaration, does not count).
# - One `docc convert` reads both modules' symbol graphs, so links cross modules. In doc
#   comments, link a pipeline or behavior symbol without a module (``NetworkError``: it is a
#   `Conveyor` symbol here, and ``ConveyorPipeline/NetworkError`` does not resolve); from
#   ConveyorTesting, write ``Conveyor/NetworkError``.
#
# Usage: bash Scripts/docs.sh   (to browse the archive, serve it: README, "Documentation")
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

# The modules users import, each with the modules it re-exports (@_exported import) that have
# no pages of their own: their symbols are documented as the importing module's, where users
# look for them. A symbol that a later module repeats is documented in the earlier one only.
doc_modules=(
    "Conveyor=ConveyorPipeline,ConveyorBehaviors"
    "ConveyorTesting="
    "ConveyorTransportConformance="
)
# Every library module: each of its public types must be curated.
all_modules=(ConveyorPipeline ConveyorBehaviors Conveyor ConveyorTesting ConveyorTransportConformance)

out=.build-docs
archive=$out/Conveyor.doccarchive
work=$out/work
helper=Scripts/docs_helper.py

swift_dir=$(dirname "$(command -v swift)")
tool() {  # a toolchain tool: on PATH, beside `swift`, or (macOS) through xcrun
    if command -v "$1" >/dev/null 2>&1; then command -v "$1"
    elif [ -x "$swift_dir/$1" ]; then echo "$swift_dir/$1"
    elif command -v xcrun >/dev/null 2>&1; then xcrun --find "$1"
    else echo "docs: $1 not found in the Swift toolchain" >&2; exit 1; fi
}
docc=$(tool docc)
extract=$(tool swift-symbolgraph-extract)

printf 'docs: building %s\n' "${doc_modules[*]%%=*}"
for spec in "${doc_modules[@]}"; do
    swift build --target "${spec%%=*}"
done
bin=$(swift build --show-bin-path)
modules_dir=$bin/Modules
[ -d "$modules_dir" ] || modules_dir=$bin   # SwiftPM before 6.0 kept .swiftmodule files there
triple=$(swift -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')
sdk=()
if command -v xcrun >/dev/null 2>&1; then sdk=(-sdk "$(xcrun --show-sdk-path)"); fi

rm -rf "$work" "$archive"
mkdir -p "$work/own" "$work/exported" "$work/graphs" "$work/Conveyor.docc"

extract_graph() {  # module, output dir, extra options
    local module=$1 dir=$2
    shift 2
    "$extract" -module-name "$module" -target "$triple" "${sdk[@]}" -I "$modules_dir" \
        -output-dir "$dir" -minimum-access-level public -emit-extension-block-symbols "$@"
}
printf 'docs: extracting symbol graphs\n'
for module in "${all_modules[@]}"; do
    extract_graph "$module" "$work/own"   # the module's own symbols: what coverage checks
done
for spec in "${doc_modules[@]}"; do
    folded=${spec#*=}
    extract_graph "${spec%%=*}" "$work/exported" ${folded:+-experimental-allowed-reexported-modules="$folded"}
done
python3 "$helper" graphs "$work/exported" "$work/graphs" "${doc_modules[@]}"

printf 'docs: assembling the catalog (the module catalogs and the guides Docs/*.md)\n'
cp -R Sources/Client/Conveyor.docc/. Sources/Testing/ConveyorTesting.docc/. \
    Sources/TransportConformance/ConveyorTransportConformance.docc/. "$work/Conveyor.docc/"
python3 "$helper" articles Docs "$work/Conveyor.docc"

printf 'docs: docc convert\n'
status=0
"$docc" convert "$work/Conveyor.docc" \
    --additional-symbol-graph-dir "$work/graphs" \
    --output-path "$archive" \
    --fallback-display-name Conveyor \
    --fallback-bundle-identifier Conveyor \
    --warnings-as-errors \
    >"$work/docc.log" 2>&1 || status=$?
if [ "$status" -ne 0 ] || grep -q -E '(warning|error):' "$work/docc.log"; then
    cat "$work/docc.log"
    echo "docs: docc reported the problems above (exit status $status); the catalog it read," \
        "$work/Conveyor.docc, is Sources/Client/Conveyor.docc, Sources/Testing/ConveyorTesting.docc," \
        "Sources/TransportConformance/ConveyorTransportConformance.docc" \
        "and copies of Docs/*.md: edit those" >&2
    exit 1
fi

python3 "$helper" coverage "$work/own" "$archive" "${all_modules[@]}"
python3 "$helper" comments "$work/own" "${all_modules[@]}"
printf 'docs: %s written in %d s\n' "$archive" "$((SECONDS - start))"
