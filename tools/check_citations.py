#!/usr/bin/env python3
"""Checks that every citation of the contract documents names a heading that exists.

Code comments and documents cite the contract in `docs/` by section:

    semantics §2.4, semantics §1.4 and §2.3   -> docs/semantics.md         (## 2. / ### 2.4 headings)
    extensions §2, extensions §1–§3           -> docs/extensions.md        (## 1. / ### 1.2 headings)
    wire.md §4                                -> docs/wire.md              (## 4. headings)
    hashing (a), hashing-and-conformance (e)  -> docs/hashing-and-conformance.md  (## (a) headings)

A citation may continue with more sections (`, §2.3`, `and §4.4`, `/§4.3`, `–§3`, `+ §9`, also after
`step 4` or `v2`), also across a comment line break. `spec §N` and `ext. §N` are refused: they do not say which document they mean.

Usage: tools/check_citations.py [REPO_ROOT]   (default: the directory above this script)

Prints every citation that names no heading as `path:line: ...` and exits 1; otherwise prints one
`OK:` line with the counts and exits 0. Standard library only.
"""

import os
import re
import sys

# What is scanned, relative to the repository root.
SCAN = ["crates", "python", "docs", "tools", "scripts", "README.md", "ARCHITECTURE.md",
        "STYLE.md", "RELIABILITY.md", "BENCHMARKS.md"]
SKIP_DIRS = {"target", ".git", "node_modules", "__pycache__", ".venv", "venv", ".pytest_cache"}
TEXT_EXTENSIONS = {".rs", ".py", ".md", ".proto", ".toml", ".sh", ".txt", ".html", ".js", ".css",
                   ".yaml", ".yml", ".json", ".pyi"}

DOCS = {
    "semantics": "docs/semantics.md",
    "extensions": "docs/extensions.md",
    "wire": "docs/wire.md",
    "hashing": "docs/hashing-and-conformance.md",
}

# A comment line break inside a citation: newline, indentation, a comment marker.
BREAK = r"(?:[ \t]*\n[ \t]*(?://[/!]?|#|\*)?)?[ \t]*"
NUMBER = r"\d+(?:\.\d+)*"
LETTER = r"[a-z]"
JOIN = r"(?:,|and|or|/|–|-|to|&|\+)"
# What may follow a section before the next one: `§2.3 step 4, §4.1`, `§1.5 v2, §7.2`.
QUALIFIER = r"(?:" + BREAK + r"(?:steps?[ \t]+\d+(?:[–-]\d+)?|v\d+))?"

CITATION = re.compile(
    r"\b(?P<doc>semantics|extensions|wire|hashing(?:-and-conformance)?)(?:\.md)?" + BREAK
    + r"(?:§(?P<num>" + NUMBER + r")" + QUALIFIER
    + r"(?P<more>(?:" + BREAK + JOIN + BREAK + r"§" + NUMBER + QUALIFIER + r")*)"
    + r"|\((?P<letter>" + LETTER + r")\)(?P<more_letters>(?:" + BREAK + JOIN + BREAK
    + r"\(" + LETTER + r"\))*))",
    re.IGNORECASE,
)
MORE_NUMBER = re.compile(r"§(" + NUMBER + r")")
MORE_LETTER = re.compile(r"\((" + LETTER + r")\)")
VAGUE = re.compile(r"\b(?P<name>spec|ext\.)[ \t]*§(?P<num>" + NUMBER + r")", re.IGNORECASE)

NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(" + NUMBER + r")\.?\s")
LETTERED_HEADING = re.compile(r"^#{1,6}\s+\((" + LETTER + r")\)\s")


def headings(path):
    """The section ids a document's headings carry: `2`, `2.4` or `a`."""
    ids = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            m = NUMBERED_HEADING.match(line) or LETTERED_HEADING.match(line)
            if m:
                ids.add(m.group(1).lower())
    return ids


def files(root):
    for entry in SCAN:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            yield path
        elif os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
                for name in sorted(filenames):
                    if os.path.splitext(name)[1] in TEXT_EXTENSIONS:
                        yield os.path.join(dirpath, name)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(os.path.dirname(__file__), ".."))
    sections = {}
    for key, doc in DOCS.items():
        path = os.path.join(root, doc)
        if not os.path.isfile(path):
            print(f"FAIL: {doc} is missing")
            return 1
        sections[key] = headings(path)

    failures = []
    counts = {key: 0 for key in DOCS}
    for path in files(root):
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue

        def line_of(offset):
            return text.count("\n", 0, offset) + 1

        for m in CITATION.finditer(text):
            key = m.group("doc").lower()
            key = "hashing" if key.startswith("hashing") else key
            if m.group("num") is not None:
                cited = [m.group("num")] + MORE_NUMBER.findall(m.group("more") or "")
            else:
                cited = [m.group("letter").lower()]
                cited += [x.lower() for x in MORE_LETTER.findall(m.group("more_letters") or "")]
            for section in cited:
                counts[key] += 1
                if section not in sections[key]:
                    shown = f"({section})" if section.isalpha() else f"§{section}"
                    failures.append(f"{rel}:{line_of(m.start())}: {m.group('doc')} {shown} "
                                    f"names no heading in {DOCS[key]}")
        for m in VAGUE.finditer(text):
            failures.append(f"{rel}:{line_of(m.start())}: '{m.group('name')} §{m.group('num')}' "
                            "names no document (write semantics, extensions, wire.md or hashing)")

    for failure in failures:
        print(failure)
    total = sum(counts.values())
    summary = ", ".join(f"{key} {n}" for key, n in counts.items())
    if failures:
        print(f"FAIL: {len(failures)} of the citations name no heading ({total} checked: {summary})")
        return 1
    print(f"OK: {total} citations name existing headings ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
