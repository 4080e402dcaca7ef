#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/**/*.md (tests/run.sh runs it).

Every relative link must name a file or directory of the repository, and a `#fragment` on a
Markdown file must name one of its headings (GitHub's anchors). Links to other sites are left
alone. Exit 1 with one line per broken link: `FILE:LINE: LINK: why`.
"""

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# [text](target) and [text](target "title"); images too.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")


def markdown_files():
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").rglob("*.md"))


def lines_outside_code(path):
    """(line number, text) of the lines outside fenced code, inline code removed."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, CODE_SPAN.sub("", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path):
    for number, line in lines_outside_code(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # https:, mailto:, ...
            file_part, _, fragment = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(REPO)}:{number}: {target}"
            if REPO not in dest.parents and dest != REPO:
                yield f"{where}: points outside the repository"
            elif not dest.exists():
                yield f"{where}: no such file"
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                yield f"{where}: no heading with this anchor in {dest.relative_to(REPO)}"


def main():
    files = list(markdown_files())
    problems = [p for f in files for p in broken_links(f)]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"tests/doc_links.py: {len(problems)} broken link(s)", file=sys.stderr)
        return 1
    print(f"tests/doc_links.py: the relative links of {len(files)} Markdown files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
