"""The `flashjit` command the wheel installs: the bundled tool, run with the NVRTC the package would load
(the nvidia-cuda-nvrtc wheel's folder first on LD_LIBRARY_PATH; the tool's RUNPATH has the toolkit)."""
import os
import sys

from . import _capi


def main():
    tool = _capi.BUNDLED_TOOL
    if not os.path.isfile(tool):
        sys.stderr.write(f"flashjit: this package carries no tool ({tool})\n")
        return 1
    env = dict(os.environ)
    nvrtc = _capi.find_nvrtc()
    if nvrtc:
        folder = os.path.dirname(nvrtc)
        env["LD_LIBRARY_PATH"] = folder + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.execve(tool, [tool] + sys.argv[1:], env)


if __name__ == "__main__":
    sys.exit(main())
