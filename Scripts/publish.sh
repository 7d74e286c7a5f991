#!/usr/bin/env bash
# What publishing a release does, into repositories a resolver can fetch (Docs/Stability.md,
# "Releases"): the two halves of Conveyor, each tagged with the release's version.
#
#   bash Scripts/publish.sh VERSION CORE_URL OUT
#
# - OUT/Conveyor: this repository, with the release in API/baseline.txt tagged at its commit and
#   VERSION tagged at HEAD. Its root package has no dependencies: an app that depends on
#   `Conveyor` fetches nothing else.
# - OUT/ConveyorIntegrations: the `Integrations/` folder of HEAD as a repository of its own (the
#   server half: ConveyorAsyncHTTPClient, ConveyorLogging, ConveyorMetrics, ConveyorTracing,
#   ConveyorOpenAPI, ConveyorPostgres), tagged VERSION. In this repository it depends on the core
#   by path (`..`); in its own, on the core by CORE_URL and `from: VERSION`: the one line this
#   script rewrites. Its symbolic links into this repository's Tests/ (the loopback server, the
#   test support) become the files they point at, so its tests run there too.
#
# A real release pushes OUT/Conveyor's tags to the core's repository and OUT/ConveyorIntegrations
# to the integrations' (https://github.com/<owner>/Conveyor and …/ConveyorIntegrations);
# Scripts/release-rehearsal.sh runs this script with file URLs and resolves both by version.
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 VERSION CORE_URL OUT" >&2
    exit 64
fi
version=$1
core_url=$2
out=$3
repo=$(cd "$(dirname "$0")/.." && pwd)

if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "publish: VERSION must be MAJOR.MINOR.PATCH, got '$version'" >&2
    exit 64
fi
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    # A release is a commit: what is published is HEAD as committed, whatever the work tree holds.
    echo "publish: note: the work tree has uncommitted changes; they are not part of the release" >&2
fi
mkdir -p "$out"

# The core: a clone, with the previous release's tag (API/baseline.txt) and this one's.
git clone -q --no-hardlinks "$repo" "$out/Conveyor"
read -r baseline_version baseline_commit < <(grep -v '^#' "$repo/API/baseline.txt")
git -C "$out/Conveyor" tag -f "$baseline_version" "$baseline_commit" >/dev/null
if [ "$baseline_version" != "$version" ]; then
    git -C "$out/Conveyor" tag "$version" HEAD
fi

# The server half: Integrations/ as its own repository.
integrations="$out/ConveyorIntegrations"
mkdir -p "$integrations"
cp -RL "$out/Conveyor/Integrations/." "$integrations/"
cp "$out/Conveyor/LICENSE" "$out/Conveyor/NOTICE" "$integrations/"
manifest="$integrations/Package.swift"
core_line='        .package(name: "Conveyor", path: ".."),'
if ! grep -qxF "$core_line" "$manifest"; then
    echo "publish: Integrations/Package.swift no longer has the line this script rewrites:" >&2
    echo "$core_line" >&2
    exit 1
fi
python3 - "$manifest" "$core_line" "$core_url" "$version" <<'EOF'
import sys
path, line, url, version = sys.argv[1:]
text = open(path).read()
text = text.replace(line, f'        .package(url: "{url}", from: "{version}"),', 1)
open(path, "w").write(text)
EOF
cat >"$integrations/.gitignore" <<'EOF'
.build/
.build-*/
Package.resolved
.swiftpm/
EOF
git -C "$integrations" init -q
git -C "$integrations" add -A
git -C "$integrations" -c user.name=publish -c user.email=publish@localhost commit -qm \
    "ConveyorIntegrations $version (Integrations/ of Conveyor $(git -C "$repo" rev-parse --short HEAD))"
git -C "$integrations" tag "$version"
echo "published $version: $out/Conveyor (tags $(git -C "$out/Conveyor" tag | tr '\n' ' ')), $integrations (tag $version)"
