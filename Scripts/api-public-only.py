#!/usr/bin/env python3
"""Copies a swift-api-digester dump without the declarations it marks `isInternal`.

`swift-api-digester -dump-sdk` also records a module's `package` declarations (marked
`"isInternal": true`), which are not public API (Docs/Stability.md): without this, a changed
`package` protocol is reported as a breaking change. Used by Scripts/api-check.sh.

    python3 Scripts/api-public-only.py IN.json OUT.json
"""
import json
import sys


def public_only(node):
    if "ABIRoot" in node:  # the dump's outermost object
        node["ABIRoot"] = public_only(node["ABIRoot"])
    children = node.get("children")
    if children is not None:
        node["children"] = [public_only(c) for c in children if not c.get("isInternal")]
    return node


source, target = sys.argv[1:]
with open(source, encoding="utf-8") as f:
    dump = json.load(f)
with open(target, "w", encoding="utf-8") as f:
    json.dump(public_only(dump), f, indent=1)
