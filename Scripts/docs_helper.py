#!/usr/bin/env python3
"""Helpers for Scripts/docs.sh (Python 3 standard library only).

  graphs SRC DST M=F1,F2...     copy the symbol graphs of each documented module M (extracted
                                with the symbols of F1, F2..., modules that M re-exports and that
                                have no pages of their own) from SRC to DST, each symbol kept in
                                the first module that has it; another module's extension of a
                                type of F1 is written as an extension of M, where that type is
  articles DOCS CATALOG         copy DOCS/*.md into CATALOG as articles; a link to another guide,
                                [text](Name.md), becomes <doc:Name>; any other relative link keeps
                                its text only (it points into the repository, not the archive)
  coverage OWN ARCHIVE MODULE... fail unless every public type of every listed module (from the
                                module's own symbol graph in OWN) has a page in ARCHIVE, every
                                top-level one is curated in a topic group written in the catalog,
                                and every nested one is listed on its parent's page
  comments OWN MODULE...         fail unless every public declaration of every listed module has a
                                doc comment of its own (written at it, not inherited)
"""

import glob
import json
import os
import re
import sys

TYPE_KINDS = {
    "swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias",
    "swift.actor", "swift.associatedtype",
}
# A top-level declaration of one of these kinds must be curated too (a free function, a global).
TOP_LEVEL_KINDS = TYPE_KINDS | {"swift.func", "swift.var", "swift.func.op", "swift.macro"}


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def graphs(src, dst, specs):
    """specs: "Module=Folded1,Folded2": a documented module and the modules it re-exports that
    have no pages of their own (their symbols are in the module's graph, and are its symbols)."""
    os.makedirs(dst, exist_ok=True)
    home = {}  # module name -> the documented module its symbols appear in
    modules = []
    for spec in specs:
        module, _, folded = spec.partition("=")
        modules.append(module)
        home[module] = module
        for name in filter(None, folded.split(",")):
            home[name] = module
    seen = set()
    for module in modules:
        main = os.path.join(src, module + ".symbols.json")
        if not os.path.exists(main):
            sys.exit(f"docs: no symbol graph for module {module} in {src}")
        outputs = {}  # file name -> graph
        added = set()
        for path in [main] + sorted(glob.glob(os.path.join(src, module + "@*.symbols.json"))):
            graph = load(path)
            symbols = [s for s in graph["symbols"] if s["identifier"]["precise"] not in seen]
            if not symbols:
                continue
            kept = {s["identifier"]["precise"] for s in symbols}
            added |= kept
            graph["symbols"] = symbols
            graph["relationships"] = [r for r in graph["relationships"] if r["source"] in kept]
            name = os.path.basename(path)
            extended = name[len(module) + 1:-len(".symbols.json")] if "@" in name else None
            target = home.get(extended)
            if extended and target and target not in (extended, module):
                # An extension of a type that is documented in `target` (HTTPRequest lives in
                # ConveyorPipeline and is documented in Conveyor): say it extends `target`, so
                # docc lists it under "Extended Modules > target" of this module, always there.
                for s in symbols:
                    if s.get("swiftExtension", {}).get("extendedModule") == extended:
                        s["swiftExtension"]["extendedModule"] = target
                for r in graph["relationships"]:
                    fallback = r.get("targetFallback", "")
                    if fallback.startswith(extended + "."):
                        r["targetFallback"] = target + fallback[len(extended):]
                name = f"{module}@{target}.symbols.json"
            if name in outputs:
                outputs[name]["symbols"] += graph["symbols"]
                outputs[name]["relationships"] += graph["relationships"]
            else:
                outputs[name] = graph
        for name, graph in outputs.items():
            with open(os.path.join(dst, name), "w", encoding="utf-8") as f:
                json.dump(graph, f)
        seen |= added


def articles(docs, catalog):
    guides = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(docs, "*.md"))}
    link = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")

    def rewrite(match):
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            return match.group(0)  # an absolute URL or an anchor: DocC keeps it
        name, ext = os.path.splitext(os.path.basename(target.split("#")[0]))
        if ext == ".md" and name in guides:
            return f"<doc:{name}>"
        return text

    for name in sorted(guides):
        with open(os.path.join(docs, name + ".md"), encoding="utf-8") as f:
            text = f.read()
        out, fenced = [], False
        for line in text.splitlines(keepends=True):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            out.append(line if fenced else link.sub(rewrite, line))
        with open(os.path.join(catalog, name + ".md"), "w", encoding="utf-8") as f:
            f.write("".join(out))


def public_types(own, module):
    path = os.path.join(own, module + ".symbols.json")
    if not os.path.exists(path):
        sys.exit(f"docs: no symbol graph for module {module} in {own}")
    graph = load(path)
    parent = {r["source"]: r["target"] for r in graph["relationships"] if r["kind"] == "memberOf"}
    result = []
    for s in graph["symbols"]:
        kind = s["kind"]["identifier"]
        top = len(s["pathComponents"]) == 1
        if kind in TYPE_KINDS or (top and kind in TOP_LEVEL_KINDS):
            if kind == "swift.associatedtype":
                continue  # listed on its protocol's page
            precise = s["identifier"]["precise"]
            result.append((module, "/".join(s["pathComponents"]), precise, parent.get(precise), top))
    return result


def coverage(own, archive, modules):
    pages = {}  # precise identifier -> page URL path
    topics = {}  # page URL path -> (explicit children, all children)
    data = os.path.join(archive, "data", "documentation")
    for path in glob.glob(os.path.join(data, "**", "*.json"), recursive=True):
        page = load(path)
        url = page.get("identifier", {}).get("url", "")
        key = url.split("/documentation/", 1)[-1].lower()
        precise = page.get("metadata", {}).get("externalID")
        if precise:
            pages[precise] = key
        explicit, every = set(), set()
        for section in page.get("topicSections", []):
            for ident in section.get("identifiers", []):
                child = ident.split("/documentation/", 1)[-1].lower()
                every.add(child)
                if not section.get("generated"):
                    explicit.add(child)
        topics[key] = (explicit, every)
    curated = set().union(*(e for e, _ in topics.values())) if topics else set()

    problems, count = [], 0
    for module in modules:
        for module_name, name, precise, parent, top in public_types(own, module):
            count += 1
            page = pages.get(precise)
            if page is None:
                problems.append(f"{module_name}.{name}: no page in the archive")
            elif top and page not in curated:
                problems.append(f"{module_name}.{name}: not curated in any topic group of the catalog "
                                f"(add it to a ### group under ## Topics in Sources/Client/Conveyor.docc/Conveyor.md, or Sources/Testing/ConveyorTesting.docc/ConveyorTesting.md)")
            elif not top:
                parent_page = pages.get(parent)
                if parent_page is None or page not in topics.get(parent_page, (set(), set()))[1]:
                    problems.append(f"{module_name}.{name}: not listed on its parent's page")
    for line in problems:
        print("docs: " + line, file=sys.stderr)
    if problems:
        sys.exit(f"docs: {len(problems)} of {count} public types are not curated")
    print(f"docs: all {count} public types of {', '.join(modules)} are curated")


def comments(own, modules):
    """Every public declaration of the modules has a doc comment of its own: written at the
    declaration, not inherited from a protocol requirement or attached to the declaration above."""
    problems, count = [], 0
    for module in modules:
        path = os.path.join(own, module + ".symbols.json")
        if not os.path.exists(path):
            sys.exit(f"docs: no symbol graph for module {module} in {own}")
        for s in load(path)["symbols"]:
            if s["kind"]["identifier"] == "swift.extension" or "::SYNTHESIZED::" in s["identifier"]["precise"]:
                continue  # an extension block is not a declaration; synthesized members have no source
            count += 1
            doc = s.get("docComment")
            location = s.get("location", {})
            if not doc or not doc.get("lines") or doc.get("uri", location.get("uri")) != location.get("uri"):
                where = location.get("uri", "?").split("/Sources/", 1)[-1]
                line = location.get("position", {}).get("line", 0) + 1
                problems.append(f"{module}.{'.'.join(s['pathComponents'])} (Sources/{where}:{line}): no doc comment of its own")
    for line in problems:
        print("docs: " + line, file=sys.stderr)
    if problems:
        sys.exit(f"docs: {len(problems)} of {count} public declarations have no doc comment of their own")
    print(f"docs: all {count} public declarations of {', '.join(modules)} have a doc comment")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    if command == "graphs" and len(args) >= 3:
        graphs(args[0], args[1], args[2:])
    elif command == "articles" and len(args) == 2:
        articles(args[0], args[1])
    elif command == "coverage" and len(args) >= 3:
        coverage(args[0], args[1], args[2:])
    elif command == "comments" and len(args) >= 2:
        comments(args[0], args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
