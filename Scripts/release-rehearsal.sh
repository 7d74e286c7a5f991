#!/usr/bin/env bash
# A release, rehearsed where a test can see it (run by .ci/run): Scripts/publish.sh publishes the
# next version into repositories in a temporary folder (file URLs instead of the hosting's), then
# two consumer packages written from the docs alone resolve both halves of Conveyor BY VERSION:
#
# 1. an app: its manifest is README's Install block verbatim but for the URL; it builds, and its
#    test (ConveyorTesting's MockTransport) passes; it must resolve to the new version and fetch
#    nothing but Conveyor;
# 2. a server: its manifest is Docs/Integrations.md's Install block verbatim but for the URLs,
#    with ConveyorAsyncHTTPClient and ConveyorPostgres; it builds.
#
#   bash Scripts/release-rehearsal.sh [VERSION]    (the next minor of API/baseline.txt's by default)
#
# CONVEYOR_REHEARSAL_SCRATCH=DIR builds the server in DIR (SwiftPM's --scratch-path): .ci/run
# passes the .build-server its Integrations step built, so SwiftNIO, BoringSSL and the rest are
# compiled once per run, not twice (the server's own build took 578 s alone). The folder is
# left holding the server's packages; the Integrations package re-resolves on its next build.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
read -r baseline_version _ < <(grep -v '^#' "$repo/API/baseline.txt")
IFS=. read -r major minor _ <<<"$baseline_version"
version=${1:-$major.$((minor + 1)).0}
work=$(mktemp -d /tmp/conveyor-release-XXXXXX)
trap 'rm -rf "$work"' EXIT

bash "$repo/Scripts/publish.sh" "$version" "file://$work/published/Conveyor" "$work/published"

# The ```swift block under a heading of a markdown file, without its `// Package.swift` line.
install_block() {
    python3 - "$1" "$2" <<'EOF'
import re, sys
path, heading = sys.argv[1:]
text = open(path).read()
section = text.split(heading, 1)[1]
block = re.search(r"```swift\n(.*?)```", section, re.S).group(1)
print("\n".join(line for line in block.splitlines() if line.strip() != "// Package.swift"))
EOF
}

# A manifest around a docs block, with the hosting's URLs replaced by the published folders.
write_manifest() {
    local name=$1 block=$2
    block=${block//https:\/\/github.com\/<owner>\/ConveyorIntegrations/file://$work/published/ConveyorIntegrations}
    block=${block//https:\/\/github.com\/<owner>\/Conveyor/file://$work/published/Conveyor}
    if grep -q '<owner>' <<<"$block"; then
        echo "release-rehearsal: a URL of the docs block was not replaced:" >&2
        echo "$block" >&2
        exit 1
    fi
    cat <<EOF
// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "$name",
    platforms: [.macOS(.v13), .iOS(.v16)],
$block
)
EOF
}

echo "=== an app, from README's Install block ==="
app="$work/App"
mkdir -p "$app/Sources/App" "$app/Tests/AppTests"
write_manifest App "$(install_block "$repo/README.md" "## Install")" >"$app/Package.swift"
cat "$app/Package.swift"
cat >"$app/Sources/App/Movies.swift" <<'EOF'
import Conveyor
import Foundation

public struct Movie: Codable, Sendable, Equatable {
    public var id: Int
    public var title: String
    public init(id: Int, title: String) {
        self.id = id
        self.title = title
    }
}

public func popularMovies(from client: NetworkClient) async throws(NetworkError) -> [Movie] {
    try await client.get("/movies/popular", query: ["page": 1])
}
EOF
cat >"$app/Tests/AppTests/MoviesTests.swift" <<'EOF'
import App
import Conveyor
import ConveyorTesting
import Foundation
import Testing

@Test func popularMoviesAreDecoded() async throws {
    let mock = MockTransport()
    mock.enqueue(.json([Movie(id: 7, title: "Heat")]))
    let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: mock)
    #expect(try await popularMovies(from: client) == [Movie(id: 7, title: "Heat")])
    #expect(mock.requests.first?.url.absoluteString == "https://api.example.com/movies/popular?page=1")
}
EOF
(cd "$app" && swift package resolve)
resolved=$(cd "$app" && swift package show-dependencies --format json)
python3 - "$version" <<EOF
import json, sys
graph = json.loads('''$resolved''')
deps = graph["dependencies"]
names = [d["identity"] for d in deps]
assert names == ["conveyor"], f"the app resolved {names}, not Conveyor alone"
assert deps[0]["version"] == sys.argv[1], f"the app resolved Conveyor {deps[0]['version']}, not {sys.argv[1]}"
assert not deps[0]["dependencies"], f"Conveyor brought dependencies: {deps[0]['dependencies']}"
print(f"the app resolved Conveyor {deps[0]['version']} by version, and nothing else")
EOF
(cd "$app" && swift test)

echo "=== a server, from Docs/Integrations.md's Install block ==="
server="$work/Server"
mkdir -p "$server/Sources/Server"
write_manifest Server "$(install_block "$repo/Docs/Integrations.md" "## Install")" >"$server/Package.swift"
cat "$server/Package.swift"
cat >"$server/Sources/Server/main.swift" <<'EOF'
import AsyncHTTPClient
import Conveyor
import ConveyorAsyncHTTPClient
import ConveyorPostgres
import Foundation

// Type-checked and linked, not run: the rehearsal proves that the products resolve and build.
func serve() async throws {
    let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: AsyncHTTPClientTransport.configuration())
    let transport = try AsyncHTTPClientTransport(client: http)
    let client = NetworkClient(baseURL: URL(string: "https://api.example.com")!, transport: transport)
    let storage: PostgresCacheStorage? = nil
    print(client.configuration.maxResponseSize ?? 0, storage == nil)
    try await http.shutdown()
}
try await serve()
EOF
scratch=()
[ -z "${CONVEYOR_REHEARSAL_SCRATCH:-}" ] || scratch=(--scratch-path "$CONVEYOR_REHEARSAL_SCRATCH")
(cd "$server" && swift package "${scratch[@]}" resolve)
resolved=$(cd "$server" && swift package "${scratch[@]}" show-dependencies --format json)
python3 - "$version" <<EOF
import json, sys
deps = {d["identity"]: d for d in json.loads('''$resolved''')["dependencies"]}
assert deps.get("conveyorintegrations", {}).get("version") == sys.argv[1], "ConveyorIntegrations not resolved by version"
core = [d for d in deps["conveyorintegrations"]["dependencies"] if d["identity"] == "conveyor"]
assert core and core[0]["version"] == sys.argv[1], f"the integrations' Conveyor is {core}"
print(f"the server resolved ConveyorIntegrations {sys.argv[1]} and, through it, Conveyor {core[0]['version']}")
EOF
(cd "$server" && swift build "${scratch[@]}")
echo "release $version rehearsed: both halves resolved by version and built"
