#!/usr/bin/env bash
# The wheel installs on the hosts engines run: built from BUILD_DIR (python/build_wheel.py), it is
#  - tagged manylinux_2_N with N <= 34 (RHEL/Rocky 9 and Amazon Linux 2023 have glibc 2.34), and
#    auditwheel's verdict is that tag: its symbol tag and its overall tag are the wheel's, and it finds
#    no library outside the wheel and the manylinux list (NVRTC is dlopen'ed, never NEEDED);
#  - accepted by `pip install --dry-run --platform ...` with the manylinux tags a pip on each host
#    accepts (Ubuntu 22.04: glibc 2.35, Ubuntu 24.04: 2.39, RHEL/Rocky 9 and Amazon Linux 2023: 2.34),
#    while a copy tagged past the newest of them is refused (pip really checks);
#  - made of stripped binaries that need no libstdc++, libgcc_s or libtinfo of the host's, nor libnvrtc;
#  - licensed (LICENSE, License and License-File in METADATA) and pinned to the NVRTC it was measured
#    with (nvidia-cuda-nvrtc==13.0.*).
# Needs auditwheel for python3 (tools/bootstrap.sh installs it); pip's checks need no network.
#   bash python/tests/wheel_manylinux_check.sh BUILD_DIR
set -euo pipefail
BUILD_DIR=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MAX_GLIBC_MINOR=34
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

echo "== build the wheel"
wheel=$(python3 "$HERE/../build_wheel.py" "$BUILD_DIR" --out "$WORK/dist")
echo "$wheel ($(stat -c %s "$wheel") bytes)"
tag=$(basename "$wheel" .whl | awk -F- '{ print $NF }')
minor=$(sed -nE 's/^manylinux_2_([0-9]+)_x86_64$/\1/p' <<<"$tag")
if [ -z "$minor" ]; then bad "the wheel's platform tag is $tag, not manylinux_2_N_x86_64"
elif [ "$minor" -gt "$MAX_GLIBC_MINOR" ]; then bad "the wheel is tagged $tag: newer than manylinux_2_${MAX_GLIBC_MINOR}"
else echo "ok: tagged $tag"; fi

echo "== auditwheel show"
if ! python3 -m auditwheel --version >/dev/null 2>&1; then
  bad "python3 has no auditwheel: bash tools/bootstrap.sh installs it (python3 -m pip install auditwheel)"
else
  python3 -m auditwheel --version
  python3 -m auditwheel show "$wheel" || bad "auditwheel show failed"
  python3 -m auditwheel show --json "$wheel" >"$WORK/show.json" || bad "auditwheel show --json failed"
  python3 - "$WORK/show.json" "$tag" "$MAX_GLIBC_MINOR" <<'PY' || fail=1
import json, re, sys
show, tag, max_minor = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
ok = True
def check(cond, message):
    global ok
    print(("ok: " if cond else "FAIL: ") + message)
    ok = ok and cond
sym = show["sym_tag"]
match = re.fullmatch(r"manylinux_2_(\d+)_x86_64", sym)
check(bool(match) and int(match.group(1)) <= max_minor,
      f"auditwheel's symbol tag {sym} is manylinux_2_{max_minor} or older")
check(sym == tag, f"auditwheel's symbol tag {sym} is the wheel's tag {tag}")
outside = sorted(show["external_libs"])
check(not outside, f"no library outside the wheel and the manylinux list ({outside or 'none'})")
upgrade = show["policy_upgrades"].get(tag, {})
check(not upgrade, f"nothing keeps the wheel from {tag} ({upgrade or 'nothing'})")
check(show["overall_tag"] == tag, f"auditwheel's overall tag {show['overall_tag']} is the wheel's tag {tag}")
sys.exit(0 if ok else 1)
PY
fi

echo "== pip install --dry-run on each host's tags"
# A host's pip accepts manylinux_2_17 .. manylinux_2_<its glibc> (and the legacy aliases);
# `pip --platform` takes the tags it is given and no older ones, so each host's list is spelled out.
host_platforms() {
  local m args=()
  for m in $(seq "$1" -1 17); do args+=(--platform "manylinux_2_${m}_x86_64"); done
  echo "${args[@]}" --platform manylinux2014_x86_64
}
pip_accepts() {
  python3 -m pip install --dry-run --no-deps --no-index --disable-pip-version-check --only-binary=:all: \
    --target "$WORK/target" $(host_platforms "$1") "$2" >"$WORK/pip.log" 2>&1
}
for host in "Ubuntu 22.04:35" "Ubuntu 24.04:39" "RHEL/Rocky 9:34" "Amazon Linux 2023:34"; do
  if pip_accepts "${host##*:}" "$wheel"; then echo "ok: pip accepts it for ${host%%:*} (glibc 2.${host##*:})"
  else bad "pip refuses it for ${host%%:*} (glibc 2.${host##*:}): $(tail -1 "$WORK/pip.log")"; fi
done
newer=$WORK/newer/$(basename "$wheel" | sed -E 's/manylinux_2_[0-9]+_x86_64/manylinux_2_40_x86_64/')
mkdir -p "$(dirname "$newer")" && cp "$wheel" "$newer"
if pip_accepts 39 "$newer"; then bad "pip accepts a wheel tagged manylinux_2_40 for glibc 2.39: the check above proves nothing"
else echo "ok: pip refuses a copy tagged manylinux_2_40 for glibc 2.39"; fi

echo "== the binaries"
python3 -m zipfile -e "$wheel" "$WORK/unpacked"
echo "unpacked: $(du -sb "$WORK/unpacked" | cut -f1) bytes"
for f in "$WORK"/unpacked/flashjit/_lib/libflashjit.so.* "$WORK/unpacked/flashjit/_bin/flashjit"; do
  name=${f#"$WORK/unpacked/"}
  needed=$(readelf -d "$f" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
  echo "$name needs: $needed"
  if grep -qE 'libstdc\+\+|libgcc_s|libtinfo|libncurses' <<<"$needed"; then bad "$name needs a C++ runtime or terminfo library of the host's"; fi
  if grep -q 'libnvrtc' <<<"$needed"; then bad "$name needs libnvrtc (it must be dlopen'ed)"; else echo "ok: $name does not link NVRTC"; fi
  if grep -qE '\.symtab|\.debug_' <<<"$(readelf -S "$f")"; then bad "$name is not stripped"; else echo "ok: $name is stripped"; fi
done

echo "== licence and NVRTC pin"
meta=$(ls "$WORK"/unpacked/flashjit-*.dist-info/METADATA)
dist_info=$(dirname "$meta")
grep -qx 'License: Apache-2.0' "$meta" && echo "ok: License: Apache-2.0" || bad "METADATA has no 'License: Apache-2.0'"
grep -qx 'License-File: LICENSE' "$meta" && echo "ok: License-File: LICENSE" || bad "METADATA has no 'License-File: LICENSE'"
cmp -s "$dist_info/licenses/LICENSE" "$HERE/../../LICENSE" && echo "ok: the repository's LICENSE is in the wheel" ||
  bad "$dist_info/licenses/LICENSE is not the repository's LICENSE"
grep -q 'Apache License' "$HERE/../../LICENSE" && grep -q 'Version 2.0, January 2004' "$HERE/../../LICENSE" ||
  bad "LICENSE is not the Apache License 2.0"
grep -qx 'Requires-Dist: nvidia-cuda-nvrtc==13.0.\*' "$meta" && echo "ok: Requires-Dist: nvidia-cuda-nvrtc==13.0.*" ||
  bad "METADATA does not pin nvidia-cuda-nvrtc==13.0.* ($(grep Requires-Dist "$meta" | tr '\n' ' '))"

[ "$fail" = 0 ] && echo "PASS: the wheel is manylinux_2_${minor} and installs on the engines' hosts"
exit "$fail"
