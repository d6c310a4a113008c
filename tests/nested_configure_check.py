#!/usr/bin/env python3
"""Every CMake build that a test configures inside the main build takes the main build's toolchain.

A nested configure left to search on its own finds what the machine offers by default, not what
bootstrap chose: where CUDA is not in /usr/local/cuda (bootstrap's NVRTC from PyPI in
/opt/flashjit/cuda13) it finds none ("Could not find nvcc, please set CUDAToolkit_ROOT").
So: every ctest test whose script runs `cmake -S` is run in its configure-only mode
(FLASHJIT_NESTED_CONFIGURE_ONLY=DIR), and each nested CMakeCache.txt must hold the main build's
CUDA toolkit root, LLVM prefix and CMAKE_PROJECT_INCLUDE (where set), and, where the nested build
looks for NVRTC and LLVM Support, have found the same files.
Usage: nested_configure_check.py BUILD_DIR     exit 0 pass, 1 fail, 77 nothing to check (skip)
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

build = os.path.abspath(sys.argv[1])


def read_cache(path):
    values = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.+-]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                values[m.group(1)] = m.group(2)
    return values


main = read_cache(os.path.join(build, "CMakeCache.txt"))
# The main build's settings, derived as CMakeLists.txt derives FLASHJIT_NESTED_CMAKE_ARGS.
expected = {
    "CUDAToolkit_ROOT": main.get("CUDAToolkit_ROOT") or os.path.dirname(main.get("CUDAToolkit_BIN_DIR", "")),
    "FLASHJIT_LLVM_ROOT": os.path.dirname(main["LLVM_SUPPORT_INCLUDE"]),
}
if main.get("CMAKE_PROJECT_INCLUDE"):
    expected["CMAKE_PROJECT_INCLUDE"] = main["CMAKE_PROJECT_INCLUDE"]
found = {k: main[k] for k in ("NVRTC_LIB", "LLVM_SUPPORT_LIB")}

# NOTES: listed from a scratch directory that includes the build's tests: ctest run in the build
# itself rewrites its Testing/Temporary/LastTest.log, the suite's own log, while the suite runs.
with tempfile.TemporaryDirectory(prefix="flashjit-list-") as listing_dir:
    with open(os.path.join(listing_dir, "CTestTestfile.cmake"), "w") as f:
        f.write('subdirs("%s")\n' % os.path.abspath(build).replace("\\", "/"))
    listing = subprocess.run(["ctest", "--show-only=json-v1"], cwd=listing_dir, capture_output=True, text=True, check=True)
nested_configure = re.compile(r"^\s*cmake\s+-S\b", re.M)


def configures_nested(command):
    for arg in command[1:]:
        if arg.endswith(".sh") and os.path.isfile(arg):
            with open(arg) as f:
                if nested_configure.search(f.read()):
                    return True
    return False


failures = []
checked = 0
with tempfile.TemporaryDirectory(prefix="flashjit-nested-") as tmp:
    for test in json.loads(listing.stdout)["tests"]:
        if not configures_nested(test.get("command", [])):
            continue
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = dict(os.environ)
        for entry in props.get("ENVIRONMENT", []):
            name, _, value = entry.partition("=")
            env[name] = value
        out = os.path.join(tmp, test["name"])
        os.makedirs(out)
        env["FLASHJIT_NESTED_CONFIGURE_ONLY"] = out
        run = subprocess.run(test["command"], cwd=props.get("WORKING_DIRECTORY", build), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=500)
        if run.returncode == 77:
            print(f"skip {test['name']}: {run.stdout.strip()[-200:]}")
            continue
        if run.returncode != 0:
            failures.append(f"{test['name']}: configure-only run failed (rc {run.returncode}):\n{run.stdout[-3000:]}")
            continue
        caches = sorted(glob.glob(os.path.join(out, "**", "CMakeCache.txt"), recursive=True))
        if not caches:
            failures.append(f"{test['name']}: runs a nested cmake but left no configure under "
                            "FLASHJIT_NESTED_CONFIGURE_ONLY (give its script the configure-only mode)")
        for path in caches:
            nested = read_cache(path)
            where = f"{test['name']}: {os.path.relpath(os.path.dirname(path), out)}"
            checked += 1
            for name, value in expected.items():
                if nested.get(name) != value:
                    failures.append(f"{where}: {name} is {nested.get(name)!r}, the main build's is {value!r}")
            for name, value in found.items():
                if name in nested and nested[name] != value:
                    failures.append(f"{where}: found {name}={nested[name]}, the main build {value}")
            print(f"checked {where}: " + ", ".join(f"{n}={nested.get(n)}" for n in list(expected) + list(found) if n in nested))

for failure in failures:
    print("FAIL " + failure)
if failures:
    sys.exit(1)
if checked == 0:
    print("nothing checked: no nested configure ran (skipped)")
    sys.exit(77)
print(f"PASS: {checked} nested configures take the main build's toolchain")
