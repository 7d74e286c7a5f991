#!/usr/bin/env bash
# Proves that the API guard (Scripts/api-check.sh) catches a changed signature that keeps the
# public-symbol count, in the modules `import Conveyor` re-exports: on a copy of HEAD it renames
# an argument label of `CacheBehavior.init` (ConveyorBehaviors) and changes the type of
# `SensitiveHeaders.names` (ConveyorPipeline), then expects api-check to fail naming both.
# Run by CI after api-check itself. Exits 1 when the guard misses either.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/conveyor-api-proof-XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q --no-hardlinks "$repo" "$work/tree"
cd "$work/tree"
edit() {  # file, line as it is, line as it becomes
    grep -qxF "$2" "$1" || { echo "api-check-proof: '$2' is no longer in $1: update the proof" >&2; exit 1; }
    python3 - "$@" <<'PYTHON'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
open(path, "w").write(text.replace(old + "\n", new + "\n", 1))
PYTHON
}
edit Sources/Behaviors/Cache/CacheBehavior.swift \
    '        storage: any CacheStorage = MemoryCacheStorage(), now: @escaping @Sendable () -> Date = { Date() },' \
    '        store storage: any CacheStorage = MemoryCacheStorage(), now: @escaping @Sendable () -> Date = { Date() },'
edit Sources/Pipeline/SensitiveHeaders.swift \
    '    public var names: [String] { Self.builtIn + added }' \
    '    public var names: Set<String> { Set(Self.builtIn + added) }'
git -c user.name=proof -c user.email=proof@localhost commit -qam "two breaking changes that keep the symbol count"
status=0
bash Scripts/api-check.sh >"$work/check.log" 2>&1 || status=$?
grep -E "API breakage|api-check:" "$work/check.log" || true
if [ "$status" -eq 0 ]; then
    echo "api-check-proof: FAILED: api-check passed two breaking changes"
    exit 1
fi
missed=0
grep -q "API breakage: .*CacheBehavior\.init" "$work/check.log" || { echo "api-check-proof: the renamed label of CacheBehavior.init was not reported"; missed=1; }
grep -q "API breakage: .*SensitiveHeaders\.names" "$work/check.log" || { echo "api-check-proof: the changed type of SensitiveHeaders.names was not reported"; missed=1; }
[ "$missed" -eq 0 ] || exit 1
echo "api-check-proof: the guard caught both (CacheBehavior.init's label, SensitiveHeaders.names's type)"
