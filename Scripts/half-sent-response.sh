#!/usr/bin/env bash
# The experiment behind Docs/Decisions.md, "A server that sends half a response": a local server
# answers every request with only a status line (`HTTP/1.1 200 OK\r\n`) and closes the connection.
# Through URLSessionTransport on Linux, FoundationNetworking then traps
# ("Transfer completed, but there's no response", swift-corelibs-foundation#5285): this script
# shows whether the toolchain in use still does: conveyor-demo --url sends one GET through
# URLSessionTransport and the demo's behaviors.
#
#   bash Scripts/half-sent-response.sh      (from the repository root; prints one line per try)
set -uo pipefail
cd "$(dirname "$0")/.."
swift build --product conveyor-demo >/dev/null 2>&1 || { echo "build failed"; exit 2; }
demo=$(swift build --show-bin-path)/conveyor-demo

port_file=$(mktemp)
python3 - "$port_file" <<'PY' &
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(16)
open(sys.argv[1], "w").write(str(server.getsockname()[1]))
server.settimeout(120)
try:
    while True:
        connection, _ = server.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\n")  # the status line, and nothing else
        connection.close()
except socket.timeout:
    pass
PY
server=$!
trap 'kill $server 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
port=$(cat "$port_file")

try() {  # label
    local label=$1
    "$demo" --url "http://127.0.0.1:$port/half" >/tmp/half-sent.log 2>&1
    local status=$?
    if [ $status -ge 128 ]; then
        echo "$label: the process ended with signal $((status - 128)): $(grep -a -m1 -o 'Fatal error.*' /tmp/half-sent.log)"
    else
        echo "$label: exit $status (the request ended; the process lived)"
    fi
}
try "GET through URLSessionTransport, Swift $(swift --version 2>/dev/null | grep -o 'version [0-9.]*' | head -1)"
