#!/usr/bin/env bash
# Prints, one per line, the flags Swift's tools (swift-symbolgraph-extract, swift-api-digester)
# need to load a module built by SwiftPM whose dependencies have C modules (SwiftNIO's
# CNIOAtomics, ...): every C target's module map and include folder, as SwiftPM passes them.
#
#   bash Scripts/c-module-flags.sh BIN_PATH CHECKOUTS_DIR    (swift build --show-bin-path; SCRATCH/checkouts)
set -euo pipefail
bin=$1
checkouts=$2
{
    find "$bin" -maxdepth 2 -name module.modulemap
    find "$checkouts" -path '*/Sources/*/include/module.modulemap'
} | while IFS= read -r map; do printf -- '-Xcc\n-fmodule-map-file=%s\n' "$map"; done
find "$checkouts" -path '*/Sources/*/include' -type d | while IFS= read -r dir; do printf -- '-Xcc\n-I%s\n' "$dir"; done
