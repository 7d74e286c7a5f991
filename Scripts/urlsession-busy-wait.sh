#!/usr/bin/env bash
# The experiment behind Docs/Reliability.md, "A waiting data task spins a core": on Linux,
# FoundationNetworking keeps a write source on a new connection's socket after libcurl has sent
# the request and only wants to read, so while the response (or the rest of its body) is on its
# way, the always-writable socket wakes libcurl thousands of times a second and the process burns
# a core. This script shows whether the toolchain in use still does: a raw URLSession data task
# and a request through Conveyor's URLSessionTransport (conveyor-demo) each wait for a slow
# response from Tests/Server/server.py, and the CPU time they used is printed beside the wait.
#
#   bash Scripts/urlsession-busy-wait.sh      (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
swift build --product conveyor-demo >/dev/null
demo=$(swift build --show-bin-path)/conveyor-demo

cat >"$work/main.swift" <<'SWIFT'
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
// One data task on a new connection to `url`; exits when it ends.
let done = DispatchSemaphore(value: 0)
URLSession(configuration: .ephemeral).dataTask(with: URL(string: CommandLine.arguments[1])!) { _, response, error in
    print("  status \((response as? HTTPURLResponse)?.statusCode ?? -1)\(error.map { ", \($0)" } ?? "")")
    done.signal()
}.resume()
done.wait()
SWIFT
swiftc -O "$work/main.swift" -o "$work/raw-urlsession" 2>&1 | grep -v warning || true

coproc SERVER { python3 Tests/Server/server.py; }
read -r _ port <&"${SERVER[0]}"
trap 'kill $SERVER_PID 2>/dev/null; rm -rf "$work"' EXIT

measure() {  # label command...
    local label=$1
    shift
    /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" >/dev/null 2>&1 || true
    read -r wall user sys <"$work/time"
    python3 -c "print(f'$label: waited {$wall:.2f} s, used {$user + $sys:.2f} s of CPU ({($user + $sys) / $wall:.0%} of a core)')"
}
measure "raw URLSession, a 3 s response" "$work/raw-urlsession" "http://127.0.0.1:$port/slow?seconds=3"
measure "raw URLSession, a body trickled over 3 s" "$work/raw-urlsession" "http://127.0.0.1:$port/trickle?bytes=30&interval=0.1&head=0"
measure "NetworkClient on URLSessionTransport (conveyor-demo), a 1 s response" "$demo" --url "http://127.0.0.1:$port/slow"
