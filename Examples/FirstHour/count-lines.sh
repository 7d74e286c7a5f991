#!/usr/bin/env bash
# Lines of code per part of the first-hour walkthrough, blank lines and comments aside (a line
# that starts with `//`, doc comments included), for Conveyor (Sources/, Tests/) and the same
# walkthrough written with Alamofire, Moya and Get (Peers/). README.md's comparison comes from
# this script; CI checks that it still does.
set -euo pipefail
cd "$(dirname "$0")"

count() { [ -f "$1" ] && grep -cvE '^[[:space:]]*(//.*)?$' "$1" || echo "-"; }

printf '| part | Conveyor | Alamofire 5.10 | Moya 15 | Get 2.2 |\n|---|---:|---:|---:|---:|\n'
total() { local sum=0; for f in "$@"; do sum=$((sum + $(count "$f"))); done; echo "$sum"; }
for part in MovieAPI:endpoints SessionStore:"token store and refresh" SigningBehavior:"signing, timing, error banner" MovieClient:"client and its calls" MovieKitTests:tests; do
    file=${part%%:*} name=${part#*:}
    if [ "$file" = MovieKitTests ]; then ours=Tests/MovieKitTests/$file.swift; else ours=Sources/MovieKit/$file.swift; fi
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$(count "$ours")" "$(count "Peers/Alamofire/$file.swift")" \
        "$(count "Peers/Moya/$file.swift")" "$(count "Peers/Get/$file.swift")"
done
printf '| **all** | **%s** | **%s** | **%s** | **%s** |\n' \
    "$(total Sources/MovieKit/*.swift Tests/MovieKitTests/*.swift)" "$(total Peers/Alamofire/*.swift)" \
    "$(total Peers/Moya/*.swift)" "$(total Peers/Get/*.swift)"
