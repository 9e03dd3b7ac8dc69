#!/usr/bin/env python3
"""Lists the functions of ddprun's production C++ (not tests, bench or fuzz) that are longer
than N lines (default 60), longest first. A heuristic: comments and string literals are
blanked, and a brace block whose head holds '(' and is not a control statement or a type
counts as a function, from the line of its head to its closing brace.

  scripts/function-lengths.py [N]
"""
import re
import subprocess
import sys

CONTROL = re.compile(r"\b(if|for|while|switch|else|do|catch)\s*\(")
TYPE = re.compile(r"^(namespace|class|struct|enum|union)\b")


def blank(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'R"\((.*?)\)"', lambda m: '""' + "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'"([^"\\\n]|\\.)*"', '""', text)
    return re.sub(r"'([^'\\\n]|\\.)*'", "''", text)


def functions(path):
    stack, head, line, head_line = [], "", 1, 1
    for ch in blank(open(path).read()):
        if ch == "\n":
            line += 1
        if ch == "{":
            h = head.strip()
            last = h.split("\n")[-1] if h else ""
            is_function = ("(" in h and not TYPE.match(h) and not h.endswith("=")
                           and not CONTROL.search(last) and not any(s[0] for s in stack))
            stack.append((is_function, head_line, " ".join(h.split())))
            head, head_line = "", line
        elif ch == "}":
            if stack:
                is_function, start, name = stack.pop()
                if is_function:
                    yield start, line - start + 1, name
            head, head_line = "", line
        elif ch == ";":
            head, head_line = "", line
        else:
            if not head.strip() and not ch.isspace():
                head_line = line
            head += ch


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    files = subprocess.run(["git", "ls-files", "*.cc", "*.h"], capture_output=True, text=True,
                           check=True).stdout.split()
    long = []
    for path in files:
        if "/tests/" in path or path.startswith(("tests/", "fuzz/", "bench/")):
            continue
        long += [(n, path, start, name) for start, n, name in functions(path) if n > limit]
    for n, path, start, name in sorted(long, reverse=True):
        print(f"{path}:{start}: {n} lines: {name[-90:]}")


if __name__ == "__main__":
    main()
