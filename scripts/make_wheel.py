#!/usr/bin/env python3
"""Makes ddprun's wheel from a staged tarball tree (scripts/release.sh calls it).

    make_wheel.py --version 0.1.0 --arch x86_64 --glibc 2.28 STAGE OUT_DIR

STAGE holds bin/ddprun, bin/ddprun-master and share/ (the man page, the completions).
`pip install` of the wheel puts both programs in the venv's bin/ (the wheel's .data/scripts,
copied as they are: they are programs, not Python) and share/ under the venv. It installs no
`torchrun`, which would shadow torch's own. Its tag is manylinux_<glibc>_<arch>: the programs
need nothing but a glibc of that version or later (docs/packaging.md).
"""

import argparse
import base64
import hashlib
import os
import sys
import zipfile

SUMMARY = "Fast, torchrun-compatible launcher for distributed PyTorch training"


def metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        "Name: ddprun\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "Requires-Python: >=3.8\n"
        "Description-Content-Type: text/plain\n"
        "\n"
        "ddprun starts one worker per GPU with torchrun's options and environment, restarts\n"
        "the whole job on every node when a worker fails, and meets other nodes at a gRPC\n"
        "rendezvous master. `pip install` puts `ddprun` and `ddprun-master` on the venv's\n"
        "PATH; Python workers run with the venv's python.\n"
    )


def wheel_file(tag):
    return (
        "Wheel-Version: 1.0\n"
        "Generator: ddprun scripts/make_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    )


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def staged_files(stage):
    """(path in the wheel, path on disk, mode) of each program and data file."""
    files = []
    data = "ddprun-{version}.data"
    for program in ("ddprun", "ddprun-master"):
        path = os.path.join(stage, "bin", program)
        if not os.path.isfile(path):
            sys.exit(f"make_wheel: {path} is missing")
        files.append((f"{data}/scripts/{program}", path, 0o755))
    share = os.path.join(stage, "share")
    for root, _, names in os.walk(share):
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, stage)
            files.append((f"{data}/data/{relative}", path, 0o644))
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--arch", required=True, choices=["x86_64", "aarch64"])
    parser.add_argument("--glibc", required=True, help="the floor, as 2.28")
    parser.add_argument("stage")
    parser.add_argument("out_dir")
    args = parser.parse_args()

    tag = f"py3-none-manylinux_{args.glibc.replace('.', '_')}_{args.arch}"
    wheel = os.path.join(args.out_dir, f"ddprun-{args.version}-{tag}.whl")
    info = f"ddprun-{args.version}.dist-info"
    records = []
    os.makedirs(args.out_dir, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as whl:

        def add(name, data, mode):
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
            records.append(record_line(name, data))

        for name, path, mode in staged_files(args.stage):
            with open(path, "rb") as f:
                add(name.format(version=args.version), f.read(), mode)
        add(f"{info}/METADATA", metadata(args.version).encode(), 0o644)
        add(f"{info}/WHEEL", wheel_file(tag).encode(), 0o644)
        records.append(f"{info}/RECORD,,")
        entry = zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        entry.external_attr = (0o100644) << 16
        whl.writestr(entry, "\n".join(records) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    print(wheel)


if __name__ == "__main__":
    main()
