#!/usr/bin/env python3
"""Every message ddprun can print when something is wrong, taken from the sources, must be
in docs/troubleshooting.md: errors (absl::*Error, ErrnoStatus) and log lines at error and
warning level in every folder of production code.

A message is made of the string literals of its call (absl::StrCat pieces, or a log format
cut at each {}); every piece of at least 4 characters must appear in the document, which
quotes the message with <placeholders> for the parts that vary.

  error_messages.py ROOT            exit 1 and list the messages the document lacks
  error_messages.py ROOT --list     every message with its place, for writing the document
"""
import os
import re
import sys

# Every folder of production code (common/tests/layering_test.cc lists them as layers).
DIRS = ["common", "rendezvous", "node", "store", "observability", "rpc", "master", "net", "agent",
        "launcher", "worker_sdk/src"]
CALL = re.compile(r"(absl::\w+Error|ErrnoStatus|spdlog::(?:error|warn|critical))\s*\(")
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
MIN_PIECE = 4


def call_text(text, start):
    """The text of a call's arguments, from `start` (just after its open parenthesis)."""
    depth, i = 1, start
    while i < len(text) and depth:
        if text[i] == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
        i += 1
    return text[start:i - 1]


def messages(root):
    found = []
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            if "/tests" in dirpath.replace(root, ""):
                continue
            for name in sorted(files):
                if not name.endswith(".cc"):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path).read()
                for call in CALL.finditer(text):
                    pieces = []
                    for literal in LITERAL.findall(call_text(text, call.end())):
                        literal = literal.replace('\\"', '"').replace("\\n", "")
                        pieces += [p.strip() for p in literal.split("{}")]
                    pieces = [p for p in pieces if len(p) >= MIN_PIECE]
                    if pieces:
                        line = text[:call.start()].count("\n") + 1
                        found.append((os.path.relpath(path, root), line, pieces))
    return found


def main():
    root = sys.argv[1]
    found = messages(root)
    if "--list" in sys.argv:
        for path, line, pieces in found:
            print(f"{path}:{line}: {' ... '.join(pieces)}")
        return
    doc = open(os.path.join(root, "docs", "troubleshooting.md")).read()
    missing = [(p, l, [x for x in pieces if x not in doc]) for p, l, pieces in found]
    missing = [m for m in missing if m[2]]
    for path, line, pieces in missing:
        print(f"{path}:{line}: not in docs/troubleshooting.md: {pieces}")
    print(f"{len(found) - len(missing)} of {len(found)} messages documented")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
