"""kvproto.py - the native protocol's opcodes, statuses and flags, read from
the C headers that define them (common/kv_proto.h, common/kv_status_list.h).

The tests used to copy these numbers by hand, so a renumbered or added
operation could leave a test checking the old table.  Parsing the X-macro
tables at import time keeps one copy: the headers.  The source tree is
$KVD_SOURCE_DIR (set by tests/CMakeLists.txt), else the tree this file is in.

Exports every opcode by its name (GET, PUT, ...), every wire status by its
name (OK, BAD_ARGS, ...; the status EXISTS is EXISTS_ST, since EXISTS is an
opcode), the PUT_*, SCAN_*, RENAME_*, COPY_*, GETEX_*, BIT_* and BITOP_*
defines (flags, SCAN_MAX_LIMIT), and the tables themselves:
OPS {name: (number, kind)} with kind "R" (read), "W" (write), "A"
(answered on the spot) or "T" (a transaction), STATUSES {name: number}, STATUS_NAMES {number:
name}.
"""

import os
import re

SOURCE_DIR = os.environ.get("KVD_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PROTO_H = os.path.join(SOURCE_DIR, "common", "kv_proto.h")
STATUS_H = os.path.join(SOURCE_DIR, "common", "kv_status_list.h")

# Statuses from this number on exist only inside libkvclient (protocol.md).
FIRST_LIBRARY_STATUS = 64


def _macro_body(text, name):
    """The body of the multi-line #define name(X), continuation lines joined."""
    m = re.search(r"#define\s+%s\(X\)((?:[^\n]*\\\n)*[^\n]*)" % name, text)
    if not m:
        raise ImportError("kvproto: no %s in the headers" % name)
    return m.group(1).replace("\\\n", " ")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _parse():
    proto, status = _read(PROTO_H), _read(STATUS_H)
    ops = {name: (int(num), kind) for name, num, kind in re.findall(
        r"X\(\s*(\w+)\s*,\s*(\d+)\s*,\s*([RWAT])\s*\)",
        _macro_body(proto, "KV_OP_LIST"))}
    sts = {name: int(num) for name, num in re.findall(
        r"X\(\s*(\w+)\s*,\s*(\d+)\s*,", _macro_body(status, "KV_STATUS_LIST"))}
    flags = {name: int(num) for name, num in re.findall(
        r"#define\s+KV_((?:PUT|SCAN|RENAME|COPY|GETEX|BIT|BITOP|DOC)_\w+)\s+(\d+)u?\b", proto)}
    if not ops or not sts or not flags:
        raise ImportError("kvproto: could not parse %s / %s" % (PROTO_H, STATUS_H))
    return ops, sts, flags


OPS, STATUSES, FLAGS = _parse()
STATUS_NAMES = {num: name for name, num in STATUSES.items()}
OP_NAMES = {num: name for name, (num, _) in OPS.items()}
MAX_OP = max(OP_NAMES)

__all__ = ["OPS", "STATUSES", "STATUS_NAMES", "OP_NAMES", "FLAGS", "MAX_OP",
           "FIRST_LIBRARY_STATUS"]


def _export(name, value):
    globals()[name] = value
    __all__.append(name)


for _name, (_num, _kind) in OPS.items():
    _export(_name, _num)
for _name, _num in STATUSES.items():
    if _num < FIRST_LIBRARY_STATUS:
        _export(_name + "_ST" if _name in OPS else _name, _num)
for _name, _num in FLAGS.items():
    _export(_name, _num)
