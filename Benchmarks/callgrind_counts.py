"""Reads a callgrind output file: prints the instructions it collected, the calls to malloc and its
kin, and the calls to each function whose (mangled) name contains one of the given substrings. A
substring ending in `$` must end the name (callgrind's `'N` suffix aside): `…FTW$` is a witness
thunk's entry, not its async continuations (`…FTWTY0_`); `*` stands for any characters.

    python3 Benchmarks/callgrind_counts.py callgrind.out [substring ...]

Output: one line, "instructions mallocs calls(substring1) calls(substring2) ...". Used by
Benchmarks/instructions.sh and Benchmarks/budget.sh.
"""
import re
import sys

ALLOCATORS = {"malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign"}


def counts(path, substrings):
    names = {}
    target = None
    instructions = 0
    mallocs = 0
    calls = [0] * len(substrings)
    def pattern(sub):
        body = re.escape(sub[:-1] if sub.endswith("$") else sub).replace(r"\*", ".*")
        return re.compile(body + (r"('\d+)?$" if sub.endswith("$") else ""))

    patterns = [pattern(sub) for sub in substrings]
    with open(path, errors="replace") as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                instructions = max(instructions, int(line.split()[1]))
            elif line.startswith(("fn=", "cfn=")):
                # Names are compressed to "(id)" after their first use.
                match = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if match and match.group(2):
                    names[match.group(1)] = match.group(2)
                if line.startswith("cfn="):
                    target = names.get(match.group(1), "") if match else line.strip()[4:]
            elif line.startswith("calls=") and target is not None:
                count = int(line.split("=")[1].split()[0])
                if target.split(" ")[0] in ALLOCATORS:
                    mallocs += count
                name = target.split(" ")[0]
                for index, pattern in enumerate(patterns):
                    if pattern.search(name):
                        calls[index] += count
                target = None
    return instructions, mallocs, calls


if __name__ == "__main__":
    instructions, mallocs, calls = counts(sys.argv[1], sys.argv[2:])
    print(" ".join(str(value) for value in [instructions, mallocs] + calls))
