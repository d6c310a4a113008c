#!/usr/bin/env python3
"""flashjit's C API from Python with ctypes, on PyTorch tensors, checked against PyTorch in float64.

  python3 examples/python/attention_ctypes.py --lib build/libflashjit.so

For each case: get the kernel (flashjit_kernel_get), launch it on torch tensors (data_ptr(), strides in
elements, torch.cuda.current_stream().cuda_stream), and compare O and LSE with
torch.nn.functional.scaled_dot_product_attention computed in float64 (causal masks aligned to the
bottom-right corner, as flashjit's are). One case reads Q, K and V as strided views of a packed QKV
tensor; one captures the launch in a torch CUDA graph and replays it after writing new inputs into the
same tensors. Exits 1 on any mismatch or error; without a CUDA GPU (or PyTorch) it says so and exits 0.
"""
import argparse
import ctypes
import math
import os
import sys


# ---- the C API, as include/flashjit/flashjit.h declares it (sizes checked at load) ---------------
class Strides(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("row", ctypes.c_int64), ("head", ctypes.c_int64)]


class AttentionArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("q", ctypes.c_uint64), ("k", ctypes.c_uint64), ("v", ctypes.c_uint64), ("o", ctypes.c_uint64),
                ("lse", ctypes.c_uint64),
                ("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64),
                ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("q_strides", Strides), ("k_strides", Strides), ("v_strides", Strides), ("o_strides", Strides),
                ("softmax_scale", ctypes.c_float),
                # not supported yet: must hold their "off" values
                ("softcap", ctypes.c_float), ("window_left", ctypes.c_int32), ("window_right", ctypes.c_int32),
                ("cu_seqlens_q", ctypes.c_uint64), ("cu_seqlens_k", ctypes.c_uint64), ("seqused_k", ctypes.c_uint64),
                ("block_table", ctypes.c_uint64), ("block_table_batch_stride", ctypes.c_int64),
                ("page_size", ctypes.c_int64)]


class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("cu_context", ctypes.c_void_p),
                ("cache_dir", ctypes.c_char_p), ("compile_policy", ctypes.c_int32), ("cache_mode", ctypes.c_int32),
                ("max_cache_bytes", ctypes.c_uint64)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("spec", ctypes.c_char_p),
                ("kernel_name", ctypes.c_char_p), ("cache_key", ctypes.c_char_p)] + \
               [(name, ctypes.c_int32) for name in ("dtype", "head_dim", "causal", "block_m", "block_n",
                                                    "threads_per_block", "registers", "local_bytes", "spill_bytes",
                                                    "dynamic_smem_bytes", "static_smem_bytes", "source")]


ABI_VERSION = 1
assert ctypes.sizeof(AttentionArgs) == 256 and ctypes.sizeof(ContextOptions) == 40 and ctypes.sizeof(KernelInfo) == 80


class FlashjitError(RuntimeError):
    pass


class Flashjit:
    """A flashjit context on the current torch device (its primary CUDA context, which torch uses too)."""

    def __init__(self, lib_path, device):
        L = self.lib = ctypes.CDLL(lib_path)
        L.flashjit_get_version.restype = ctypes.c_uint32
        L.flashjit_check_abi.argtypes = [ctypes.c_uint32]
        L.flashjit_last_error_message.restype = ctypes.c_char_p
        L.flashjit_status_string.restype = ctypes.c_char_p
        L.flashjit_status_string.argtypes = [ctypes.c_int32]
        L.flashjit_context_create.argtypes = [ctypes.POINTER(ContextOptions), ctypes.POINTER(ctypes.c_void_p)]
        L.flashjit_context_destroy.argtypes = [ctypes.c_void_p]
        L.flashjit_kernel_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.flashjit_kernel_release.argtypes = [ctypes.c_void_p]
        L.flashjit_kernel_describe.argtypes = [ctypes.c_void_p, ctypes.POINTER(KernelInfo)]
        L.flashjit_attention_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionArgs), ctypes.c_void_p]
        self.check(L.flashjit_check_abi(ABI_VERSION), "check_abi")
        options = ContextOptions(struct_size=ctypes.sizeof(ContextOptions), device=device)
        self.context = ctypes.c_void_p()
        self.check(L.flashjit_context_create(ctypes.byref(options), ctypes.byref(self.context)), "context_create")
        self.kernels = {}

    def check(self, status, what):
        if status != 0:
            name = self.lib.flashjit_status_string(status).decode()
            raise FlashjitError(f"flashjit {what}: {name}: {self.lib.flashjit_last_error_message().decode()}")

    def kernel(self, spec):
        if spec not in self.kernels:
            handle = ctypes.c_void_p()
            self.check(self.lib.flashjit_kernel_get(self.context, spec.encode(), ctypes.byref(handle)), f"kernel_get({spec})")
            info = KernelInfo(struct_size=ctypes.sizeof(KernelInfo))
            self.check(self.lib.flashjit_kernel_describe(handle, ctypes.byref(info)), "kernel_describe")
            self.kernels[spec] = (handle, info.spec.decode())
        return self.kernels[spec]

    def forward(self, spec, q, k, v, o, lse=None, scale=0.0):
        """O (and LSE) of attention over [batch, seqlen, heads, head_dim] tensors, on the current stream."""
        handle, _ = self.kernel(spec)
        args = AttentionArgs(struct_size=ctypes.sizeof(AttentionArgs), window_left=-1, window_right=-1)
        args.q, args.k, args.v, args.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        args.lse = lse.data_ptr() if lse is not None else 0
        args.batch, args.seqlen_q, args.heads_q, args.head_dim = q.shape
        args.seqlen_k, args.heads_kv = k.shape[1], k.shape[2]
        for name, t in (("q_strides", q), ("k_strides", k), ("v_strides", v), ("o_strides", o)):
            assert t.stride(3) == 1, f"{name}: head_dim must be contiguous"
            setattr(args, name, Strides(t.stride(0), t.stride(1), t.stride(2)))
        args.softmax_scale = scale
        import torch
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.flashjit_attention_forward(handle, ctypes.byref(args), ctypes.c_void_p(stream)),
                   f"attention_forward({spec})")

    def close(self):
        for handle, _ in self.kernels.values():
            self.lib.flashjit_kernel_release(handle)
        self.lib.flashjit_context_destroy(self.context)


# ---- the float64 reference -------------------------------------------------------------------------
def reference(q, k, v, causal, scale):
    """O [b, s_q, h_q, d] and LSE [b, h_q, s_q] in float64, GQA by repeating K/V heads."""
    import torch
    import torch.nn.functional as F
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vd = v.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    mask = None
    if causal:  # bottom-right aligned: query i sees keys j <= i + (sk - sq)
        i = torch.arange(sq, device=q.device).unsqueeze(1)
        j = torch.arange(sk, device=q.device).unsqueeze(0)
        mask = j <= i + (sk - sq)
    o = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, scale=scale)
    scores = (qd @ kd.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return o.transpose(1, 2), lse


def errors(o, lse, ref_o, ref_lse):
    o_err = ((o.double() - ref_o).norm() / ref_o.norm()).item()
    lse_err = ((lse.double() - ref_lse).abs() / ref_lse.abs().clamp(min=1.0)).max().item()
    return o_err, lse_err


O_BOUND = {"bf16": 6e-3, "fp16": 1e-3}  # as src/verify/check.hpp
LSE_BOUND = 1e-4


# ---- cases -----------------------------------------------------------------------------------------
def run_case(fj, name, dtype, d, causal, b, sq, sk, hq, hkv, packed=False, graph=False):
    import torch
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    spec = f"dtype={dtype},head_dim={d},causal={int(causal)}"
    gen = torch.Generator(device="cuda").manual_seed(1234)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(tdtype)

    if packed:  # one [b, s, hq + 2 hkv, d] tensor; Q, K, V are strided views of it
        qkv = rand(b, sq, hq + 2 * hkv, d)
        q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
    else:
        q, k, v = rand(b, sq, hq, d), rand(b, sk, hkv, d), rand(b, sk, hkv, d)
    o = torch.full((b, sq, hq, d), float("nan"), device="cuda", dtype=tdtype)
    lse = torch.full((b, hq, sq), float("nan"), device="cuda", dtype=torch.float32)
    scale = 1.0 / math.sqrt(d)

    runs = []
    if graph:
        fj.forward(spec, q, k, v, o, lse, scale)  # first launch outside the capture (kernel loaded already)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fj.forward(spec, q, k, v, o, lse, scale)
        for replay in range(3):
            with torch.no_grad():
                for t in (q, k, v):
                    t.copy_(rand(*t.shape))
                o.fill_(float("nan"))
                lse.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            runs.append((f"replay {replay}", errors(o, lse, *reference(q, k, v, causal, scale))))
    else:
        fj.forward(spec, q, k, v, o, lse, scale)
        torch.cuda.synchronize()
        runs.append(("", errors(o, lse, *reference(q, k, v, causal, scale))))

    ok = True
    for label, (o_err, lse_err) in runs:
        passed = o_err <= O_BOUND[dtype] and lse_err <= LSE_BOUND and not math.isnan(o_err) and not math.isnan(lse_err)
        ok &= passed
        print(f"{'ok  ' if passed else 'FAIL'} {name:<34} {spec:<32} b={b} sq={sq} sk={sk} hq={hq} hkv={hkv} "
              f"{label:<9} O err {o_err:.2e}  LSE err {lse_err:.2e}")
    return ok


CASES = [
    # name, dtype, head_dim, causal, batch, seqlen_q, seqlen_k, heads_q, heads_kv, extra
    ("mha", "bf16", 128, False, 2, 512, 512, 8, 8, {}),
    ("gqa causal, seqlen_q < seqlen_k", "bf16", 128, True, 2, 300, 1000, 16, 4, {}),
    ("mqa fp16", "fp16", 64, True, 1, 777, 777, 8, 1, {}),
    ("head_dim 256", "bf16", 256, False, 1, 200, 333, 4, 2, {}),
    ("packed qkv (strided views)", "fp16", 128, True, 2, 384, 384, 8, 2, {"packed": True}),
    ("cuda graph, new data each replay", "bf16", 64, True, 2, 256, 640, 8, 2, {"graph": True}),
]


def default_lib():
    here = os.path.dirname(os.path.abspath(__file__))
    for build in ("build", "build-api", "build-gpu"):
        path = os.path.join(here, "..", "..", build, "libflashjit.so")
        if os.path.exists(path):
            return os.path.normpath(path)
    return "libflashjit.so"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=default_lib(), help="path to libflashjit.so")
    args = parser.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"skipped: PyTorch is not installed ({e})")
        return 0
    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 0
    torch.cuda.init()
    fj = Flashjit(args.lib, torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {args.lib} on "
          f"{torch.cuda.get_device_name()} (torch {torch.__version__})")
    failed = 0
    for name, dtype, d, causal, b, sq, sk, hq, hkv, extra in CASES:
        try:
            failed += not run_case(fj, name, dtype, d, causal, b, sq, sk, hq, hkv, **extra)
        except FlashjitError as e:
            print(f"FAIL {name}: {e}")
            failed += 1
    fj.close()
    print(f"{len(CASES) - failed} of {len(CASES)} cases match the float64 reference" + ("" if failed else ": ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
