#!/usr/bin/env bash
# Counts the public API of the five library modules (ConveyorPipeline, ConveyorBehaviors,
# Conveyor, ConveyorTesting, ConveyorTransportConformance) from their symbol graphs, with the toolchain's own tools only
# (swift build, swift-symbolgraph-extract; the extraction is the one Scripts/docs.sh does for
# its coverage check) and Python 3's standard library.
#
# What counts: every symbol whose access level is public or open: types, protocols, associated
# types, typealiases, methods, properties, initializers, subscripts, operators, enum cases,
# protocol requirements, and members of extensions (also extensions of other modules' types:
# `String.queryParameterValues` counts in the module that declares it).
# What does not:
# - extension blocks (`swift.extension`): an extension is counted by its members, not itself;
# - synthesized copies (`...::SYNTHESIZED::...`): a protocol extension's default implementation
#   or an inherited member repeated on every conforming type. The declaration itself counts
#   once, in the module that declares it; copies of the standard library's (Equatable's `!=`,
#   ...) count nowhere;
# - re-exported symbols: `Conveyor` re-exports ConveyorPipeline and ConveyorBehaviors
#   (`@_exported import`), but each module's graph is extracted without
#   -experimental-allowed-reexported-modules, so it holds the module's own declarations only; a
#   symbol that would still appear in two graphs is counted once, in the first module listed.
# Counted although no source declares them: implicit members the compiler emits into the graph
# (e.g. a String-backed enum's `init(rawValue:)`); `--list` marks them `implicit`. A protocol
# requirement and its default implementation in an extension are two declarations: both count.
#
# Usage: bash Scripts/public-symbols.sh [PACKAGE_DIR] [--server] [--list] [--kinds]
#                                       [--scratch-path DIR] [--no-build]
#   PACKAGE_DIR     the package to measure (default: the repository this script is in)
#   --server        measure the server half instead: the six modules of the Integrations package
#                   (ConveyorAsyncHTTPClient, ConveyorLogging, ConveyorMetrics, ConveyorTracing,
#                   ConveyorOpenAPI, ConveyorPostgres; PACKAGE_DIR defaults to Integrations/).
#                   Extracted with the module maps of the C modules their dependencies
#                   (SwiftNIO, ...) import; the counting is the same
#   --list          also print every counted symbol, one per line, tab-separated:
#                   module, kind, path (an extension member of another module's type is
#                   prefixed with that module: `Swift.String/queryParameterValues`), precise
#                   identifier, and `implicit` or `-`
#   --kinds         also print each module's count per symbol kind
#   --scratch-path  SwiftPM's build directory (default: PACKAGE_DIR/.build); use a scratch path
#                   outside the package to measure another checkout without touching its .build
#   --no-build      do not run `swift build`: extract from the modules already built there
set -euo pipefail

modules=(ConveyorPipeline ConveyorBehaviors Conveyor ConveyorTesting ConveyorTransportConformance)
server_modules=(ConveyorAsyncHTTPClient ConveyorLogging ConveyorMetrics ConveyorTracing ConveyorOpenAPI ConveyorPostgres)
server=0
script_dir=$(cd "$(dirname "$0")" && pwd)

package=
scratch=
list=0
kinds=0
build=1
while [ $# -gt 0 ]; do
    case $1 in
        --list) list=1 ;;
        --server) server=1 ;;
        --kinds) kinds=1 ;;
        --no-build) build=0 ;;
        --scratch-path) [ $# -ge 2 ] || { echo "public-symbols: --scratch-path needs a directory" >&2; exit 2; }
            scratch=$2; shift ;;
        --scratch-path=*) scratch=${1#*=} ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "public-symbols: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) [ -z "$package" ] || { echo "public-symbols: one package directory only" >&2; exit 2; }
            package=$1 ;;
    esac
    shift
done
if [ "$server" -eq 1 ]; then
    modules=("${server_modules[@]}")
    [ -n "$package" ] || package=$(dirname "$0")/../Integrations
fi
[ -n "$package" ] || package=$(dirname "$0")/..
package=$(cd "$package" && pwd)
[ -f "$package/Package.swift" ] || { echo "public-symbols: no Package.swift in $package" >&2; exit 2; }
scratch_args=()
if [ -n "$scratch" ]; then
    mkdir -p "$scratch"
    scratch_args=(--scratch-path "$(cd "$scratch" && pwd)")
fi
cd "$package"

swift_dir=$(dirname "$(command -v swift)")
tool() {  # a toolchain tool: on PATH, beside `swift`, or (macOS) through xcrun
    if command -v "$1" >/dev/null 2>&1; then command -v "$1"
    elif [ -x "$swift_dir/$1" ]; then echo "$swift_dir/$1"
    elif command -v xcrun >/dev/null 2>&1; then xcrun --find "$1"
    else echo "public-symbols: $1 not found in the Swift toolchain" >&2; exit 1; fi
}
extract=$(tool swift-symbolgraph-extract)

work=$(mktemp -d "${TMPDIR:-/tmp}/public-symbols.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$build" -eq 1 ]; then
    # `swift build` honors only the last --target: build each module (the later ones are
    # already up to date when the first one's dependencies cover them). Only the modules: for the
    # server half, not the package's executables and tests.
    for module in "${modules[@]}"; do
        printf 'public-symbols: swift build --target %s\n' "$module" >&2
        if ! swift build "${scratch_args[@]}" --target "$module" >"$work/build.log" 2>&1; then
            tail -n 40 "$work/build.log" >&2
            echo "public-symbols: swift build --target $module failed in $package" >&2
            exit 1
        fi
    done
fi
bin=$(swift build "${scratch_args[@]}" --show-bin-path)
modules_dir=$bin/Modules
[ -d "$modules_dir" ] || modules_dir=$bin   # SwiftPM before 6.0 kept .swiftmodule files there
triple=$(swift -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')
flags=()
if command -v xcrun >/dev/null 2>&1; then flags=(-sdk "$(xcrun --show-sdk-path)"); fi
if [ "$server" -eq 1 ]; then
    # What SwiftPM passes for dependencies that have C modules (SwiftNIO's): every C target's
    # module map and include folder.
    checkouts=$(dirname "$(dirname "$bin")")/checkouts
    [ -d "$checkouts" ] || checkouts=$(dirname "$bin")/checkouts
    mapfile -t -O "${#flags[@]}" flags < <(bash "$script_dir/c-module-flags.sh" "$bin" "$checkouts")
fi

mkdir -p "$work/graphs"
for module in "${modules[@]}"; do
    [ -f "$modules_dir/$module.swiftmodule" ] || [ -d "$modules_dir/$module.swiftmodule" ] ||
        { echo "public-symbols: $module is not built in $modules_dir" >&2; exit 1; }
    "$extract" -module-name "$module" -target "$triple" "${flags[@]}" -I "$modules_dir" \
        -output-dir "$work/graphs" -minimum-access-level public -emit-extension-block-symbols
done

python3 - "$work/graphs" "$list" "$kinds" "${modules[@]}" <<'PYTHON'
import glob
import json
import os
import sys
from collections import Counter

graphs, show_list, show_kinds, modules = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4:]
ACCESS = {"public", "open"}

owner = {}  # precise identifier -> module that counted it
counted = {m: [] for m in modules}  # module -> [(kind, path, precise, flag)]
skipped = Counter()
default_impls = Counter()
for module in modules:
    main = os.path.join(graphs, module + ".symbols.json")
    if not os.path.exists(main):
        sys.exit(f"public-symbols: no symbol graph for {module}")
    # Module.symbols.json, then Module@Other.symbols.json: its extensions of Other's types.
    for path in [main] + sorted(glob.glob(os.path.join(graphs, module + "@*.symbols.json"))):
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
        mine = set()
        for s in graph["symbols"]:
            precise = s["identifier"]["precise"]
            kind = s["kind"]["identifier"]
            if s.get("accessLevel") not in ACCESS:
                skipped["not public"] += 1
            elif kind == "swift.extension":
                skipped["extension blocks"] += 1
            elif "::SYNTHESIZED::" in precise:
                skipped["synthesized copies"] += 1
            elif precise in owner:
                if owner[precise] != module:
                    skipped[f"also in {owner[precise]}'s graph"] += 1
            else:
                owner[precise] = module
                mine.add(precise)
                name = "/".join(s["pathComponents"])
                extended = s.get("swiftExtension", {}).get("extendedModule")
                if extended and extended != module:
                    name = f"{extended}.{name}"
                flag = "implicit" if "location" not in s else "-"
                counted[module].append((kind.removeprefix("swift."), name, precise, flag))
        for r in graph["relationships"]:
            if r["kind"] == "defaultImplementationOf" and r["source"] in mine:
                default_impls[module] += 1

width = max(len(m) for m in modules + ["total"])
total = 0
for module in modules:
    print(f"{module:<{width}}  {len(counted[module]):>5}")
    total += len(counted[module])
print(f"{'total':<{width}}  {total:>5}")

implicit = sum(1 for m in modules for c in counted[m] if c[3] == "implicit")
notes = [f"{n} {what}" for what, n in sorted(skipped.items())]
print(f"public-symbols: not counted: {', '.join(notes) or 'nothing'}; counted: {implicit} implicit"
      f" (no source declaration), {sum(default_impls.values())} default implementations"
      f" (their requirements count too)", file=sys.stderr)

if show_kinds:
    every = sorted({c[0] for m in modules for c in counted[m]})
    print()
    print(f"{'kind':<16}" + "".join(f"{m:>{len(m) + 2}}" for m in modules))
    for kind in every:
        row = [sum(1 for c in counted[m] if c[0] == kind) for m in modules]
        print(f"{kind:<16}" + "".join(f"{n:>{len(m) + 2}}" for n, m in zip(row, modules)))

if show_list:
    print()
    for module in modules:
        for kind, name, precise, flag in sorted(counted[module], key=lambda c: (c[1], c[2])):
            print(f"{module}\t{kind}\t{name}\t{precise}\t{flag}")
PYTHON
