#!/usr/bin/env bash
# Regenerates Generated/ from openapi.yaml with swift-openapi-generator 1.14.3. Run it after
# changing the document, then commit the result: no build runs the generator (its plugin would
# make every user of this package build it). Builds the generator once in a scratch package.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scratch="${TMPDIR:-/tmp}/conveyor-openapi-generator"
mkdir -p "$scratch/Sources/Empty"
touch "$scratch/Sources/Empty/Empty.swift"
cat > "$scratch/Package.swift" <<'PACKAGE'
// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "Generator",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")],
    targets: [.target(name: "Empty")])
PACKAGE
swift build --package-path "$scratch" --product swift-openapi-generator
"$scratch/.build/debug/swift-openapi-generator" generate "$here/openapi.yaml" \
    --config "$here/openapi-generator-config.yaml" --output-directory "$here/Generated"
