#!/usr/bin/env python3
"""Writes Sources/Behaviors/Cookies/PublicSuffixes+Data.swift from the Public Suffix List, and
checks that the shipped list is recent enough for a release.

    python3 Scripts/update-public-suffixes.py SOURCE [what the list is]
    python3 Scripts/update-public-suffixes.py --check RELEASE-DATE [--max-age-days 180]

SOURCE is where the list is read from:
  - a `public_suffix_list.dat` file;
  - a wheel of PyPI's `publicsuffixlist` package, which ships the list
    (`pip download --no-deps -d /tmp/psl publicsuffixlist`, then the `.whl` it saved);
  - `pypi`: the `publicsuffixlist` package installed in this Python (`pip install publicsuffixlist`);
  - `debian`: Debian's copy (`apt-get install publicsuffix`), which may be years old.

The list comes from https://publicsuffix.org/list/public_suffix_list.dat (Mozilla Public License
2.0). Its `// VERSION:` line gives the date recorded in the generated file (`listDate`, which
`CookieRulesTests` and `--check` read); a list without one needs the date as the second argument
(`2026-10-22`). Rules are grouped by their last label, which the Swift file stores once per group,
and internationalized labels are written as A-labels (punycode), the form a URL's host has; both
ICANN and private sections are kept (a cookie for github.io is as wrong as one for co.uk). A label
that cannot be converted stops the script: no rule is dropped silently.

`--check RELEASE-DATE` exits 1 when the shipped list is more than `--max-age-days` (180) days older
than RELEASE-DATE (YYYY-MM-DD): a step of every release (Docs/Stability.md, "Releasing").
"""
import collections, datetime, importlib.util, io, os, re, sys, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "Sources/Behaviors/Cookies/PublicSuffixes+Data.swift")
MAX_AGE_DAYS = 180


def fail(message):
    print(f"update-public-suffixes: {message}", file=sys.stderr)
    sys.exit(1)


def read_source(source):
    """The list's text and a description of where it came from."""
    if source == "debian":
        path = "/usr/share/publicsuffix/public_suffix_list.dat"
        return open(path, encoding="utf-8").read(), "Debian's package publicsuffix"
    if source == "pypi":
        spec = importlib.util.find_spec("publicsuffixlist")
        if spec is None or not spec.submodule_search_locations:
            fail("the publicsuffixlist package is not installed (pip install publicsuffixlist)")
        path = os.path.join(list(spec.submodule_search_locations)[0], "public_suffix_list.dat")
        return open(path, encoding="utf-8").read(), "PyPI's package publicsuffixlist"
    if source.endswith(".whl"):
        with zipfile.ZipFile(source) as wheel:
            names = [n for n in wheel.namelist() if n.endswith("/public_suffix_list.dat")]
            if len(names) != 1:
                fail(f"{source} holds no public_suffix_list.dat")
            text = io.TextIOWrapper(wheel.open(names[0]), encoding="utf-8").read()
        match = re.match(r"publicsuffixlist-([^-]+)-", os.path.basename(source))
        return text, "PyPI's package publicsuffixlist" + (f" {match.group(1)}" if match else "")
    return open(source, encoding="utf-8").read(), os.path.basename(source)


def a_label(label):
    """A label as a URL's host has it: lowercased ASCII, or `xn--` and punycode."""
    if label == "*" or label.isascii():
        return label.lower()
    try:
        return label.encode("idna").decode("ascii")
    except UnicodeError:
        # IDNA 2003 refuses some labels IDNA 2008 allows; punycode of the lowercased label is
        # what a host carries for them.
        return "xn--" + label.lower().encode("punycode").decode("ascii")


def generate(source, stated_date):
    text, origin = read_source(source)
    version = ""
    groups = collections.OrderedDict()
    for raw in text.splitlines():
        line = raw.strip()
        match = re.match(r"// VERSION: (.*)", line)
        if match and not version:
            version = match.group(1).strip()
        if not line or line.startswith("//"):
            continue
        rule = line.split()[0]
        exception = rule.startswith("!")
        labels = [a_label(label) for label in rule.lstrip("!").split(".")]
        if any(not re.fullmatch(r"[a-z0-9*_-]+", label) for label in labels):
            fail(f"a rule the generated file cannot hold as it is: {rule!r}")
        tld, rest = labels[-1], ".".join(labels[:-1])
        groups.setdefault(tld, []).append(("!" if exception else "") + rest)

    date = stated_date or (version[:10] if re.match(r"\d{4}-\d{2}-\d{2}", version) else "")
    if not date:
        fail("the list states no `// VERSION:` date: give it as the second argument (YYYY-MM-DD)")
    datetime.date.fromisoformat(date)  # a real date, or an error
    described = f"the list of {date}" + (f", version {version}" if version else "") + f", from {origin}"
    lines = [tld + ":" + " ".join(r for r in rules if r) for tld, rules in groups.items()]
    body = "\n".join(lines)
    rules = sum(len(v) for v in groups.values())
    out = f'''// Generated by Scripts/update-public-suffixes.py from the Public Suffix List
// ({described}; https://publicsuffix.org, Mozilla Public License 2.0).
// Do not edit: run the script with a newer list instead.

extension PublicSuffixes {{
    /// The date of the list this file was generated from (its `VERSION`), `YYYY-MM-DD`: a release
    /// ships a list at most 180 days older than itself (`CookieRulesTests`, Docs/Stability.md).
    package static let listDate = "{date}"

    /// How many rules the list has.
    package static let ruleCount = {rules}

    /// One line per last label: `tld:` and the rest of each rule under it (`co` for `co.uk`, `*`
    /// for `*.ck`, `!www` for `!www.ck`); a bare `tld:` is the rule for the label alone.
    static let data = """
{body}
"""
}}
'''
    with open(OUTPUT, "w", encoding="utf-8") as file:
        file.write(out)
    print(f"{date}: {len(groups)} last labels, {rules} rules, {len(out)} bytes")


def shipped_date():
    text = open(OUTPUT, encoding="utf-8").read()
    match = re.search(r'static let listDate = "(\d{4}-\d{2}-\d{2})"', text)
    if not match:
        fail(f"{OUTPUT} records no listDate: generate it again with this script")
    return datetime.date.fromisoformat(match.group(1))


def check(release, max_age_days):
    try:
        release_date = datetime.date.fromisoformat(release)
    except ValueError:
        fail(f"not a date (YYYY-MM-DD): {release!r}")
    listed = shipped_date()
    age = (release_date - listed).days
    if age > max_age_days:
        fail(f"the shipped Public Suffix List is of {listed}, {age} days before the release of {release_date} "
             f"(at most {max_age_days}): refresh it (Docs/Stability.md, \"Releasing\")")
    print(f"the shipped Public Suffix List is of {listed}, {age} days before {release_date} (at most {max_age_days})")


def main(arguments):
    if arguments[:1] == ["--check"]:
        if len(arguments) not in (2, 4) or (len(arguments) == 4 and arguments[2] != "--max-age-days"):
            fail("usage: update-public-suffixes.py --check RELEASE-DATE [--max-age-days N]")
        check(arguments[1], int(arguments[3]) if len(arguments) == 4 else MAX_AGE_DAYS)
    elif 1 <= len(arguments) <= 2 and not arguments[0].startswith("-"):
        generate(arguments[0], arguments[1] if len(arguments) == 2 else "")
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
