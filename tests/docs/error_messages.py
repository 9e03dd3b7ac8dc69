#!/usr/bin/env python3
"""Every message ddprun can print when something is wrong, taken from the sources, must be
in docs/troubleshooting.md: errors (absl::*Error, ErrnoStatus) and log lines at error and
warning level in the agent, launcher, rendezvous master and worker SDK.

A message is known by its first string literal (up to the first {} of a log format); the
check is that this text appears in the document. Messages shorter than 12 characters say
too little to look up and are skipped.

  error_messages.py ROOT            exit 1 and list the messages the document lacks
  error_messages.py ROOT --list     every message with its place, for writing the document
"""
import os
import re
import sys

DIRS = ["agent", "launcher", "rendezvous", "worker_sdk/src"]
CALL = re.compile(r"(absl::\w+Error|ErrnoStatus|spdlog::(?:error|warn|critical))\s*\(")
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
MIN_LEN = 12


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
                    # The first literal of the call: within its first 400 characters.
                    window = text[call.end():call.end() + 400]
                    literal = LITERAL.search(window)
                    if not literal or window[:literal.start()].count(";"):
                        continue
                    message = literal.group(1).split("{}")[0]
                    message = message.replace('\\"', '"').replace("\\n", "").strip()
                    if len(message) < MIN_LEN:
                        continue
                    line = text[:call.start()].count("\n") + 1
                    found.append((os.path.relpath(path, root), line, message))
    return found


def main():
    root = sys.argv[1]
    found = messages(root)
    if "--list" in sys.argv:
        for path, line, message in found:
            print(f"{path}:{line}: {message}")
        return
    doc = open(os.path.join(root, "docs", "troubleshooting.md")).read()
    missing = [(p, l, m) for p, l, m in found if m not in doc]
    for path, line, message in missing:
        print(f"{path}:{line}: not in docs/troubleshooting.md: {message}")
    print(f"{len(found) - len(missing)} of {len(found)} messages documented")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
