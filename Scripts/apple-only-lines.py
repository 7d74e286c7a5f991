#!/usr/bin/env python3
"""Counts the lines of Sources/ that a Linux build never compiles: the branches of `#if`,
`#elseif` and `#else` whose condition is false on Linux (Glibc and FoundationNetworking exist;
Darwin, UIKit, AppKit and Musl do not; `os(Linux)` holds, every other `os(…)` does not). No CI of
this project builds for an Apple platform, so these lines are compiled by nobody: Docs/Stability.md
lists them, and `--check` fails when the list there differs from the code.

    python3 Scripts/apple-only-lines.py            # the table, as Stability.md shows it
    python3 Scripts/apple-only-lines.py --check    # exit 1 when Stability.md's table is stale
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ON_LINUX = {"Glibc": True, "FoundationNetworking": True, "Foundation": True, "Dispatch": True}


def holds(condition):
    """Whether a compilation condition is true on Linux (the forms the sources use)."""
    expression = condition
    expression = re.sub(r"canImport\((\w+)\)", lambda m: str(ON_LINUX.get(m.group(1), False)), expression)
    expression = re.sub(r"os\((\w+)\)", lambda m: str(m.group(1) == "Linux"), expression)
    expression = re.sub(r"arch\((\w+)\)", "True", expression)
    expression = re.sub(r"(swift|compiler)\([^)]*\)", "True", expression)
    expression = expression.replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    if not re.fullmatch(r"[\sA-Za-z()]*", expression) or re.search(r"\b(?!True|False|and|or|not)\w+", expression):
        raise SystemExit(f"unknown condition: {condition}")
    return eval(expression)  # only True, False, and, or, not and parentheses remain


def dead_lines(path):
    """The numbers of the lines Linux does not compile in `path`."""
    dead = []
    stack = []  # per #if: (this branch is live, some earlier branch was taken)
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        live = all(frame[0] for frame in stack)
        if stripped.startswith("#if "):
            taken = holds(stripped[4:])
            stack.append([taken, taken])
        elif stripped.startswith("#elseif "):
            taken = not stack[-1][1] and holds(stripped[8:])
            stack[-1] = [taken, stack[-1][1] or taken]
        elif stripped == "#else":
            stack[-1] = [not stack[-1][1], True]
        elif stripped == "#endif":
            stack.pop()
        elif not live and stripped and not stripped.startswith("//"):
            dead.append(number)
    return dead


def table():
    rows = []
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        dead = dead_lines(path)
        if dead:
            rows.append((str(path.relative_to(ROOT)), len(dead)))
    lines = ["| file | lines Linux never compiles |", "|---|---:|"]
    lines += [f"| `{name}` | {count} |" for name, count in rows]
    lines.append(f"| all of Sources/ | {sum(count for _, count in rows)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    text = table()
    if "--check" in sys.argv:
        stability = (ROOT / "Docs" / "Stability.md").read_text()
        if text not in stability:
            print("Docs/Stability.md's table of lines Linux never compiles is stale; today:\n" + text)
            sys.exit(1)
        print("Docs/Stability.md lists every line Linux never compiles")
    else:
        print(text)
