"""What the CPU tests' stand-in tensors share (test_cpu.py, test_mla_cpu.py): distinct fake device addresses
and contiguous strides, so that each stand-in class keeps only what its entry point reads."""

import itertools

_next_pointer = itertools.count(1)


def fake_pointer():
    """A distinct 1 MiB aligned device address."""
    return 0x7f0000000000 + next(_next_pointer) * 0x100000


def contiguous_strides(shape):
    """Row-major strides (elements) of a tensor of `shape`."""
    strides, n = [], 1
    for size in reversed(tuple(shape)):
        strides.insert(0, n)
        n *= size
    return tuple(strides)
