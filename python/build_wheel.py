#!/usr/bin/env python3
"""Builds the flashjit wheel from a build of the library, with the standard library only (no setuptools,
no network): python/flashjit/*.py, libflashjit.so (its soname file, a real file: wheels hold no links) and
the flashjit tool, both stripped, LICENSE, METADATA/WHEEL/RECORD/entry_points.txt.

  python3 python/build_wheel.py [BUILD_DIR] [--out DIR] [--plat TAG] [--no-strip]

BUILD_DIR (default build/) holds libflashjit.so and flashjit; when it is a CMake build folder that lacks
them, they are built there first (cmake --build BUILD_DIR --target flashjit_shared flashjit). The version
is the library's (its file name, checked against include/flashjit/flashjit.h). The platform tag is
manylinux_2_N_x86_64 for the newest GLIBC_2.N symbol version the binaries need: manylinux_2_34 from a
build on any glibc (the static C++ runtime's newer glibc functions are in src/link;
python/tests/wheel_manylinux_check.sh checks the tag with auditwheel). Prints the wheel's path."""
import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NAME = "flashjit"
# NOTES: the NVRTC every figure was measured with and the tests ran on; NVRTC's version is part of the
# kernel cache's key, so a newer 13.x would also miss every kernel a 13.0 toolkit prewarmed.
NVRTC_REQUIREMENT = "nvidia-cuda-nvrtc==13.0.*"
LICENSE = os.path.join(ROOT, "LICENSE")
TARGETS = ("flashjit_shared", "flashjit")  # libflashjit.so and the tool
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # reproducible archives


def header_version():
    text = open(os.path.join(ROOT, "include", "flashjit", "flashjit.h")).read()
    parts = [re.search(rf"#define FLASHJIT_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def library_files(build_dir):
    """(real file, soname, version): libflashjit.so -> libflashjit.so.1 -> libflashjit.so.X.Y.Z."""
    link = os.path.join(build_dir, "libflashjit.so")
    if not os.path.exists(link):
        sys.exit(f"build_wheel: {link} not found and {build_dir} is not a CMake build folder: configure one first "
                 f"(cmake -S . -B {build_dir}; python/build_wheel.sh builds what it needs there)")
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
        "License: Apache-2.0", "License-File: LICENSE",
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Requires-Python: >=3.8", f"Requires-Dist: {NVRTC_REQUIREMENT}",
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


def build_missing_targets(build_dir):
    """Builds libflashjit.so and the tool in a CMake build folder that lacks either."""
    if os.path.exists(os.path.join(build_dir, "libflashjit.so")) and os.path.isfile(os.path.join(build_dir, "flashjit")):
        return
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        return  # not a CMake build folder: library_files() says what is missing
    command = ["cmake", "--build", build_dir, "--target", *TARGETS]
    sys.stderr.write(f"build_wheel: {' '.join(command)}\n")
    if subprocess.run(command, stdout=sys.stderr).returncode != 0:
        sys.exit(f"build_wheel: building {' and '.join(TARGETS)} in {build_dir} failed (see above)")


def binary_bytes(path, strip, scratch):
    """The file's bytes, stripped of its symbol table and debug sections when strip is set (the dynamic
    symbols, which the loader needs, stay)."""
    if not strip:
        return open(path, "rb").read()
    tool = shutil.which("strip")
    if not tool:
        sys.exit("build_wheel: 'strip' (binutils) not found: install binutils, or pass --no-strip")
    stripped = os.path.join(scratch, os.path.basename(path))
    subprocess.run([tool, "--strip-all", "-o", stripped, path], check=True)
    return open(stripped, "rb").read()


def build(build_dir, out_dir, plat, strip=True):
    build_missing_targets(build_dir)
    lib, soname, version = library_files(build_dir)
    if version != header_version():
        sys.exit(f"build_wheel: {lib} is version {version}, include/flashjit/flashjit.h says {header_version()}: "
                 "a stale build?")
    tool = os.path.join(build_dir, "flashjit")
    if not os.path.isfile(tool):
        sys.exit(f"build_wheel: {tool} not found: build the tool too (cmake --build {build_dir} --target flashjit)")
    plat = plat or glibc_tag([lib, tool])
    tag = f"py3-none-{plat}"
    dist_info = f"{NAME}-{version}.dist-info"
    os.makedirs(out_dir, exist_ok=True)
    wheel_path = os.path.join(out_dir, f"{NAME}-{version}-{tag}.whl")
    records = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel_path, "w") as zf:
        package = os.path.join(HERE, NAME)
        for name in sorted(os.listdir(package)):
            if name.endswith(".py") and name != "_version.py":
                add(zf, records, f"{NAME}/{name}", open(os.path.join(package, name), "rb").read())
        add(zf, records, f"{NAME}/_version.py", f'version = "{version}"\n'.encode())
        add(zf, records, f"{NAME}/_lib/{soname}", binary_bytes(lib, strip, scratch), executable=True)
        add(zf, records, f"{NAME}/_bin/flashjit", binary_bytes(tool, strip, scratch), executable=True)
        add(zf, records, f"{dist_info}/METADATA", metadata(version).encode())
        add(zf, records, f"{dist_info}/licenses/LICENSE", open(LICENSE, "rb").read())
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
    parser.add_argument("--no-strip", dest="strip", action="store_false",
                        help="keep the binaries' symbol tables (for debugging the wheel's binaries)")
    args = parser.parse_args()
    print(build(args.build_dir, args.out, args.plat, args.strip))


if __name__ == "__main__":
    main()
