#!/usr/bin/env bash
# Proves that the API guard (Scripts/api-check.sh) catches a changed signature that keeps the
# public-symbol count, in the modules `import Conveyor` re-exports: on a copy of HEAD it renames
# an argument label of `CacheBehavior.init` (ConveyorBehaviors) and changes the type of
# `SensitiveHeaders.names` (ConveyorPipeline), and in the server half renames the `table:` label
# of `PostgresCacheStorage.init` and changes the type of `SwiftLogSink.includesLine`, then expects
# api-check to fail naming all four. Run by CI after api-check itself (the server half builds in
# the repository's .build-server, where CI's Integrations step built it). Exits 1 when the guard
# misses any.
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
edit Integrations/Sources/ConveyorPostgres/PostgresCacheStorage.swift \
    '        client: PostgresClient, table: String = "conveyor_http_cache", maxBytes: Int = 256 * 1024 * 1024,' \
    '        client: PostgresClient, tableName table: String = "conveyor_http_cache", maxBytes: Int = 256 * 1024 * 1024,'
edit Integrations/Sources/ConveyorLogging/SwiftLogSink.swift \
    '    public let includesLine: Bool' \
    '    public let includesLine: Bool?'
edit Integrations/Sources/ConveyorLogging/SwiftLogSink.swift \
    '        if includesLine { all["conveyor.line"] = .string(entry.message) }' \
    '        if includesLine == true { all["conveyor.line"] = .string(entry.message) }'
git -c user.name=proof -c user.email=proof@localhost commit -qam "four breaking changes that keep the symbol count"
status=0
CONVEYOR_SERVER_SCRATCH="$repo/.build-server" bash Scripts/api-check.sh >"$work/check.log" 2>&1 || status=$?
grep -E "API breakage|api-check:" "$work/check.log" || true
if [ "$status" -eq 0 ]; then
    echo "api-check-proof: FAILED: api-check passed four breaking changes"
    exit 1
fi
missed=0
grep -q "API breakage: .*CacheBehavior\.init" "$work/check.log" || { echo "api-check-proof: the renamed label of CacheBehavior.init was not reported"; missed=1; }
grep -q "API breakage: .*SensitiveHeaders\.names" "$work/check.log" || { echo "api-check-proof: the changed type of SensitiveHeaders.names was not reported"; missed=1; }
grep -q "API breakage: .*PostgresCacheStorage\.init" "$work/check.log" || { echo "api-check-proof: the renamed label of PostgresCacheStorage.init was not reported"; missed=1; }
grep -q "API breakage: .*SwiftLogSink\.includesLine" "$work/check.log" || { echo "api-check-proof: the changed type of SwiftLogSink.includesLine was not reported"; missed=1; }
[ "$missed" -eq 0 ] || { cat "$work/check.log"; exit 1; }
echo "api-check-proof: the guard caught all four (CacheBehavior.init's label, SensitiveHeaders.names's type; PostgresCacheStorage.init's label, SwiftLogSink.includesLine's type)"
