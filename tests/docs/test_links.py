"""The docs' links and the source map tell the truth about the tree.

Every relative link in README.md and docs/*.md ([text](path), [text]:
path, <a href="path">) must name a file or directory that exists, and its
#anchor, if any, a heading (or an explicit id) of the Markdown file it
points into, as GitHub makes anchors of headings.  Every path the source
map of docs/architecture.md names ("Source map" up to "`common/` holds")
must exist: a folder's bullet names its files relative to the folder.
Links inside code (fenced blocks, `spans`) are not links.

Run from anywhere: KVD_SOURCE_DIR (set by ctest) or this file's tree.
Exit 0, or 1 listing every broken link and missing path.
"""
import os
import re
import sys

SRC = os.environ.get("KVD_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(
    r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)")
HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"", re.I)
EXPLICIT_ID = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def strip_code(text):
    """The lines outside fenced blocks, with `code spans` blanked."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return out


def anchor_of(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    """Every anchor of a Markdown file: its headings' (with GitHub's -1,
    -2 for repeats) and explicit ids."""
    if path in _anchors:
        return _anchors[path]
    seen, found = {}, set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in EXPLICIT_ID.finditer(line):
            found.add(m.group(1))
        m = HEADING.match(line)
        if not m:
            continue
        a = anchor_of(m.group(2))
        n = seen.get(a, 0)
        seen[a] = n + 1
        found.add(a if n == 0 else "%s-%d" % (a, n))
    _anchors[path] = found
    return found


def targets(lines):
    """(line number, target) of every link in lines."""
    for no, line in enumerate(lines, 1):
        for rx in (INLINE_LINK, IMAGE_LINK, HREF):
            for m in rx.finditer(line):
                yield no, m.group(1)
        # a reference definition cannot interrupt a paragraph
        m = REF_DEF.match(line)
        if m and (no == 1 or not lines[no - 2].strip() or REF_DEF.match(lines[no - 2])):
            yield no, m.group(1)


def check_links(md):
    """The broken links of one Markdown file, as messages."""
    bad = []
    with open(md, encoding="utf-8") as f:
        lines = strip_code(f.read())
    rel = os.path.relpath(md, SRC)
    for no, t in targets(lines):
        if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
            continue  # http:, https:, mailto:
        path, _, frag = t.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(dest):
            bad.append("%s:%d: %s: no such file" % (rel, no, t))
            continue
        if frag and dest.endswith(".md") and frag not in anchors(dest):
            bad.append("%s:%d: %s: no heading #%s in %s" %
                       (rel, no, t, frag, os.path.relpath(dest, SRC)))
    return bad


def source_map_paths(text):
    """(line number, path from the tree's root) of every file and folder
    docs/architecture.md's source map names."""
    lines = text.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("Source map"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("`common/` holds"))
    folder = None
    for i in range(start + 1, end):
        line = lines[i]
        if line.startswith("- "):
            m = re.match(r"- `([^`]+/)`", line)
            folder = m.group(1) if m else None
        elif not line.strip() or not line.startswith(" "):
            folder = None  # a paragraph after the bullets
        for m in re.finditer(r"`([^`\s]+)`", line):
            name = m.group(1)
            if "/" in name and (name.startswith(("kvd/", "common/", "libkvclient/",
                                                 "tests/", "bench/", "docs/"))):
                yield i + 1, name
            elif re.fullmatch(r"[\w.-]+\.(c|h|md)", name):
                if folder is None:
                    yield i + 1, "?/" + name
                else:
                    yield i + 1, folder + name


def check_source_map():
    md = os.path.join(SRC, "docs", "architecture.md")
    with open(md, encoding="utf-8") as f:
        text = f.read()
    bad, n = [], 0
    for no, p in source_map_paths(text):
        n += 1
        if p.startswith("?/"):
            bad.append("docs/architecture.md:%d: %s: named outside a folder's bullet"
                       % (no, p[2:]))
        elif not os.path.exists(os.path.join(SRC, p)):
            bad.append("docs/architecture.md:%d: source map names %s, which does not exist"
                       % (no, p))
    if n < 50:  # the map was not found or not parsed: a test that cannot fail is none
        bad.append("docs/architecture.md: the source map names only %d paths" % n)
    return bad


def main():
    files = [os.path.join(SRC, "README.md")]
    docs = os.path.join(SRC, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    bad, nlinks = [], 0
    for md in files:
        with open(md, encoding="utf-8") as f:
            nlinks += sum(1 for _ in targets(strip_code(f.read())))
        bad += check_links(md)
    bad += check_source_map()
    for b in bad:
        print(b)
    print("%d files, %d links, %d broken" % (len(files), nlinks, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
