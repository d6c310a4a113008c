#!/usr/bin/env python3
"""Builds the flashjit wheel from a build of the library, with the standard library only (no setuptools,
no network): python/flashjit/*.py, libflashjit.so (its soname file, a real file: wheels hold no links) and
the flashjit tool, METADATA/WHEEL/RECORD/entry_points.txt.

  python3 python/build_wheel.py [BUILD_DIR] [--out DIR] [--plat TAG]

BUILD_DIR (default build/) holds libflashjit.so and flashjit. The version is the library's (its file name,
checked against include/flashjit/flashjit.h). The platform tag is manylinux_2_N_x86_64 for the newest
GLIBC_2.N symbol version the binaries need (they also need libtinfo.so.6, which every glibc distribution
has but manylinux does not list: --plat linux_x86_64 for a strict tag). Prints the wheel's path."""
import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NAME = "flashjit"
NVRTC_REQUIREMENT = "nvidia-cuda-nvrtc>=13,<14"
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # reproducible archives


def header_version():
    text = open(os.path.join(ROOT, "include", "flashjit", "flashjit.h")).read()
    parts = [re.search(rf"#define FLASHJIT_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def library_files(build_dir):
    """(real file, soname, version): libflashjit.so -> libflashjit.so.1 -> libflashjit.so.X.Y.Z."""
    link = os.path.join(build_dir, "libflashjit.so")
    if not os.path.exists(link):
        sys.exit(f"build_wheel: {link} not found: build the library first (cmake --build {build_dir})")
    soname = os.readlink(link) if os.path.islink(link) else "libflashjit.so.1"
    real = os.path.realpath(link)
    match = re.search(r"libflashjit\.so\.(\d+\.\d+\.\d+)$", real)
    if not match:
        sys.exit(f"build_wheel: {real}: expected a file named libflashjit.so.X.Y.Z (the versioned library)")
    return real, soname, match.group(1)


def glibc_tag(paths):
    """manylinux_2_N_x86_64 for the newest GLIBC_2.N the files' symbol versions name."""
    newest = 17
    for path in paths:
        for minor in re.findall(rb"GLIBC_2\.(\d+)", open(path, "rb").read()):
            newest = max(newest, int(minor))
    return f"manylinux_2_{newest}_x86_64"


def metadata(version):
    return "\n".join([
        "Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
        "Summary: FlashAttention-3's Python interface on JIT-compiled (NVRTC) attention kernels for NVIDIA Hopper",
        "License: see the flashjit repository", "Requires-Python: >=3.8", f"Requires-Dist: {NVRTC_REQUIREMENT}",
        "Description-Content-Type: text/markdown", "",
        open(os.path.join(HERE, "README.md")).read()])


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def add(zf, records, arcname, data, executable=False):
    info = zipfile.ZipInfo(arcname, FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
    zf.writestr(info, data)
    records.append(record_line(arcname, data))


def build(build_dir, out_dir, plat):
    lib, soname, version = library_files(build_dir)
    if version != header_version():
        sys.exit(f"build_wheel: {lib} is version {version}, include/flashjit/flashjit.h says {header_version()}: "
                 "a stale build?")
    tool = os.path.join(build_dir, "flashjit")
    if not os.path.isfile(tool):
        sys.exit(f"build_wheel: {tool} not found: build the tool too (cmake --build {build_dir})")
    plat = plat or glibc_tag([lib, tool])
    tag = f"py3-none-{plat}"
    dist_info = f"{NAME}-{version}.dist-info"
    os.makedirs(out_dir, exist_ok=True)
    wheel_path = os.path.join(out_dir, f"{NAME}-{version}-{tag}.whl")
    records = []
    with zipfile.ZipFile(wheel_path, "w") as zf:
        package = os.path.join(HERE, NAME)
        for name in sorted(os.listdir(package)):
            if name.endswith(".py") and name != "_version.py":
                add(zf, records, f"{NAME}/{name}", open(os.path.join(package, name), "rb").read())
        add(zf, records, f"{NAME}/_version.py", f'version = "{version}"\n'.encode())
        add(zf, records, f"{NAME}/_lib/{soname}", open(lib, "rb").read(), executable=True)
        add(zf, records, f"{NAME}/_bin/flashjit", open(tool, "rb").read(), executable=True)
        add(zf, records, f"{dist_info}/METADATA", metadata(version).encode())
        wheel = f"Wheel-Version: 1.0\nGenerator: flashjit build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
        add(zf, records, f"{dist_info}/WHEEL", wheel.encode())
        add(zf, records, f"{dist_info}/entry_points.txt", f"[console_scripts]\nflashjit = {NAME}._cli:main\n".encode())
        records.append(f"{dist_info}/RECORD,,")
        add(zf, [], f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode())
    return wheel_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "dist"), help="folder for the wheel (default dist/)")
    parser.add_argument("--plat", default=None, help="platform tag (default: manylinux_2_N_x86_64 from the binaries)")
    args = parser.parse_args()
    print(build(args.build_dir, args.out, args.plat))


if __name__ == "__main__":
    main()
