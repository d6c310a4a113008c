#!/usr/bin/env python3
"""CPU tests of flashjit.flash_mla, FlashMLA's interface (no GPU, no torch): stand-in tensors and a stand-in
runtime record what flash_mla_with_kvcache would launch (the spec, every argument field, the split workspace),
and the library checks each launch's arguments against its spec (flashjit_validate_attention_args) in place of
the launch. Also get_mla_metadata's values, the fast path, the errors naming their argument, and that every
spec the plan chooses is one the library builds.

  python3 python/tests/test_mla_cpu.py [--lib build/libflashjit.so]

Exits 0 when every test passed."""
import argparse
import ctypes
import itertools
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stand_ins import contiguous_strides, fake_pointer  # noqa: E402
BF16, FP16, F32, I32 = "torch.bfloat16", "torch.float16", "torch.float32", "torch.int32"
E4M3 = "torch.float8_e4m3fn"
MLA_SPEC = "dtype=bf16,head_dim=576,head_dim_v=512,causal={},varlen=1,paged=1,pack_gqa=1"

class StandIn:
    """What flash_mla reads of a torch tensor: shape, stride(), dtype (its text), device, is_cuda, get_device(),
    data_ptr(), contiguous(); zero_() and fill_() record what they wrote."""

    def __init__(self, shape, dtype=BF16, strides=None, device="cuda:0", ptr=None):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)
        self.ptr = fake_pointer() if ptr is None else ptr
        self.is_cuda = str(device).startswith("cuda")
        self.filled = None
        self.copied_from = None

    def stride(self):
        return self.strides

    def get_device(self):
        return int(str(self.device).split(":")[1])

    def data_ptr(self):
        return self.ptr

    def contiguous(self):
        t = StandIn(self.shape, self.dtype, device=self.device)
        t.copied_from = self
        return t

    def zero_(self):
        self.filled = 0.0
        return self

    def fill_(self, value):
        self.filled = value
        return self


class RecordingRuntime:
    """Stands in for flash_mla's torch runtime: tensors are StandIns, a kernel is its spec, the workspace is a fake
    pointer of the library's size for the launch, and the launch is flashjit_validate_attention_args (the
    library's full argument check, no GPU). Records every kernel fetched and every launch (spec, argument copy)."""

    def __init__(self, sm_count=132, capturing=False):
        import flashjit
        self.lib = flashjit.library()
        self.dev = type("Device", (), {})()
        self.dev.sm_count, self.dev.lib = sm_count, self.lib
        self.unit = fake_pointer()  # the device's float32 1.0 (an FP8 cache's scale where none is given)
        self.dev.unit_scale = lambda: self.unit
        self.capture = capturing
        self.kernels, self.launches, self.workspaces = [], [], []
        self.cu, self.cu_values = {}, {}

    def compiling(self):
        return False

    def capturing(self):
        return self.capture

    def device(self, index):
        return self.dev

    def kernel(self, dev, spec):
        self.kernels.append(spec)
        return spec

    def empty(self, shape, dtype, like):
        return StandIn(shape, dtype, device=like.device)

    def empty_lse(self, shape, strides, like):
        return StandIn(shape, F32, strides, device=like.device)

    def cu_seqlens(self, batch, seqlen_q, device):
        key = (device, batch, seqlen_q)
        if key not in self.cu or self.capture:
            t = StandIn((batch + 1,), I32, device=device)
            self.cu_values[t.ptr] = [i * seqlen_q for i in range(batch + 1)]
            if self.capture:
                return t
            self.cu[key] = t
        return self.cu[key]

    def placeholders(self, lens):
        return StandIn((0, 8), I32, device=lens.device), StandIn((lens.shape[0] + 1,), I32, device=lens.device)

    def stream(self, index):
        return 0x5000

    def workspace(self, dev, spec, max_splits, args, total_q, heads_q, batch, seqlen_q, stream):
        nbytes = self.lib.workspace_size(spec, args)
        ptr = fake_pointer()
        self.workspaces.append((spec, max_splits, ptr, nbytes))
        return ptr, nbytes

    def launch(self, dev, handle, args, stream):
        from flashjit import _capi
        self.launches.append((handle, _capi.AttentionArgs.from_buffer_copy(bytes(args))))
        return self.lib.lib.flashjit_validate_attention_args(handle.encode(), ctypes.byref(args))


def decode_inputs(batch=4, seqlen_q=1, heads_q=128, page=64, blocks=100, max_blocks=40, d=576, dtype=BF16):
    """FlashMLA's decode inputs as StandIns: q, k_cache, block_table, cache_seqlens."""
    return (StandIn((batch, seqlen_q, heads_q, d), dtype), StandIn((blocks, page, 1, d), dtype),
            StandIn((batch, max_blocks), I32), StandIn((batch,), I32))


class MlaCase(unittest.TestCase):
    def setUp(self):
        from flashjit import flash_mla
        self.m = flash_mla
        self.saved = flash_mla._runtime
        self.rt = flash_mla._runtime = RecordingRuntime()
        flash_mla._plans.clear()

    def tearDown(self):
        self.m._runtime = self.saved
        self.m._plans.clear()

    def call(self, q, k_cache, block_table, cache_seqlens, head_dim_v=512, *args, **kwargs):
        return self.m.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, *args, **kwargs)


class Launch(MlaCase):
    def test_decode_packs_the_latent_cache_as_k_and_v(self):
        q, cache, table, lens = decode_inputs()
        out, lse = self.call(q, cache, table, lens, 512, None, None, causal=True)
        self.assertEqual(self.rt.kernels, [MLA_SPEC.format(0) + ",split_kv=1,v_in_k=1,chunk_waits=1,q_reg_dims=192"])  # one query: causal changes nothing
        spec, a = self.rt.launches[0]
        self.assertEqual((a.q, a.k, a.v, a.o, a.lse), (q.ptr, cache.ptr, cache.ptr, out.ptr, lse.ptr))
        self.assertEqual((a.k_strides.batch, a.k_strides.row, a.k_strides.head), (64 * 576, 576, 576))
        self.assertEqual(bytes(a.k_strides), bytes(a.v_strides))
        self.assertEqual((a.q_strides.row, a.q_strides.head), (128 * 576, 576))
        self.assertEqual((a.o_strides.batch, a.o_strides.row, a.o_strides.head), (128 * 512, 128 * 512, 512))
        self.assertEqual((a.batch, a.seqlen_q, a.seqlen_k, a.heads_q, a.heads_kv, a.head_dim),
                         (4, 1, 40 * 64, 128, 1, 576))
        self.assertEqual((a.seqused_k, a.block_table, a.block_table_batch_stride, a.page_size, a.num_pages),
                         (lens.ptr, table.ptr, 40, 64, 100))
        self.assertEqual((a.cu_seqlens_k, a.total_q, a.total_k), (0, 4, 0))
        self.assertEqual(self.rt.cu_values[a.cu_seqlens_q], [0, 1, 2, 3, 4])
        self.assertAlmostEqual(a.softmax_scale, 576 ** -0.5, places=6)
        self.assertEqual((a.window_left, a.window_right, a.softcap, a.sinks, a.k_scale), (-1, -1, 0.0, 0, 0))
        self.assertGreater(a.max_splits, 1)
        (ws_spec, ws_splits, ws_ptr, ws_bytes), = self.rt.workspaces
        self.assertEqual((a.workspace, a.workspace_bytes, ws_splits), (ws_ptr, ws_bytes, a.max_splits))
        self.assertGreaterEqual(ws_bytes, a.max_splits * 4 * 128 * 512 * 4)  # partial O rows at least
        self.assertEqual((out.shape, out.dtype), ((4, 1, 128, 512), BF16))
        self.assertEqual((lse.shape, lse.strides, lse.dtype), ((4, 128, 1), (1, 4, 1), F32))

    def test_lse_is_the_kernels_layout_as_flashmlas_shape(self):
        """Element (b, h, i) of the LSE returned is the kernel's [heads_q, total_q] entry h x total_q + b x seqlen_q
        + i, for every element."""
        for batch, seqlen_q, heads in ((3, 2, 16), (1, 4, 32), (5, 1, 64)):
            q, cache, table, lens = decode_inputs(batch, seqlen_q, heads)
            _, lse = self.call(q, cache, table, lens)
            total = batch * seqlen_q
            for b in range(batch):
                for h in range(heads):
                    for i in range(seqlen_q):
                        self.assertEqual(sum(x * s for x, s in zip((b, h, i), lse.strides)), h * total + b * seqlen_q + i)

    def test_speculative_queries_are_causal_rows(self):
        q, cache, table, lens = decode_inputs(batch=3, seqlen_q=2, heads_q=16, page=16, blocks=50, max_blocks=7)
        out, lse = self.call(q, cache, table, lens, causal=True, softmax_scale=0.125)
        spec, a = self.rt.launches[0]
        self.assertEqual(spec, MLA_SPEC.format(1) + ",split_kv=1,v_in_k=1,chunk_waits=1,q_reg_dims=192")
        self.assertEqual((a.batch, a.seqlen_q, a.total_q, a.seqlen_k, a.page_size), (3, 2, 6, 7 * 16, 16))
        self.assertEqual(self.rt.cu_values[a.cu_seqlens_q], [0, 2, 4, 6])
        self.assertEqual((a.q_strides.row, a.q_strides.head), (16 * 576, 576))
        self.assertEqual(a.softmax_scale, 0.125)
        self.assertEqual((out.shape, lse.shape, lse.strides), ((3, 2, 16, 512), (3, 16, 2), (2, 6, 1)))
        self.call(q, cache, table, lens, causal=False)
        self.assertIn(",causal=0,", self.rt.launches[1][0])

    def test_query_rows_keep_their_strides_or_are_copied(self):
        # one query: a batch stride of any multiple of 8 (q sliced from a larger buffer) reads in place
        q = StandIn((4, 1, 16, 576), strides=(20 * 576, 576, 576, 1))
        _, cache, table, lens = decode_inputs(batch=4, heads_q=16)
        self.call(q, cache, table, lens)
        a = self.rt.launches[-1][1]
        self.assertEqual((a.q, a.q_strides.row, a.q_strides.head), (q.ptr, 20 * 576, 576))
        # two queries of a [4, 3, 16, 576] buffer: batch and seqlen do not merge, the rows are a copy
        q = StandIn((4, 2, 16, 576), strides=(3 * 16 * 576, 16 * 576, 576, 1))
        self.call(q, cache, table, lens)
        a = self.rt.launches[-1][1]
        self.assertNotEqual(a.q, q.ptr)
        self.assertEqual((a.q_strides.row, a.q_strides.head), (16 * 576, 576))
        # batch 1: the seqlen stride is the row stride, whatever the batch stride
        q, cache, table, lens = decode_inputs(batch=1, seqlen_q=3, heads_q=16)
        q.strides = (999 * 8, 16 * 576, 576, 1)
        self.call(q, cache, table, lens)
        a = self.rt.launches[-1][1]
        self.assertEqual((a.q, a.q_strides.row), (q.ptr, 16 * 576))

    def test_split_hint(self):
        q, cache, table, lens = decode_inputs(batch=2, heads_q=32)
        self.call(q, cache, table, lens, num_splits=1)
        spec, a = self.rt.launches[-1]
        self.assertNotIn("split_kv", spec)
        self.assertEqual((a.max_splits, a.workspace, a.workspace_bytes), (0, 0, 0))
        self.call(q, cache, table, lens, num_splits=4)
        spec, a = self.rt.launches[-1]
        self.assertTrue(spec.endswith(",split_kv=1,v_in_k=1,chunk_waits=1,q_reg_dims=192"), spec)
        self.assertEqual(a.max_splits, 4)
        self.assertNotEqual(a.workspace, 0)
        self.call(q, cache, table, lens, num_splits=1000)
        self.assertEqual(self.rt.launches[-1][1].max_splits, 128)  # the C API's most

    def test_flashmla_metadata_values_are_accepted_and_not_read(self):
        q, cache, table, lens = decode_inputs(batch=2, heads_q=64)
        meta, splits = self.m.get_mla_metadata(lens, 64, 1)
        values = [(meta, splits), (None, None), (self.m.MlaScheduleMeta(), None), (object(), StandIn((3,), I32))]
        packed = []
        for tile_scheduler_metadata, num_splits in values:
            self.m._plans.clear()
            self.call(q, cache, table, lens, 512, tile_scheduler_metadata, num_splits)
            packed.append(bytes(self.rt.launches[-1][1])[48:])  # all but the pointers (the workspace's is new)
            packed[-1] = packed[-1][:self.m._capi.AttentionArgs.workspace.offset - 48]
        self.assertEqual(len(set(packed)), 1)

    def test_fp16_and_head_dim_512(self):
        q, cache, table, lens = decode_inputs(batch=2, heads_q=16, dtype=FP16)
        out, _ = self.call(q, cache, table, lens)
        self.assertTrue(self.rt.launches[-1][0].startswith("dtype=fp16,head_dim=576,head_dim_v=512,"))
        self.assertEqual(out.dtype, FP16)
        q, cache, table, lens = decode_inputs(batch=2, heads_q=16, d=512)
        self.call(q, cache, table, lens)
        spec, a = self.rt.launches[-1]
        self.assertTrue(spec.startswith("dtype=bf16,head_dim=512,causal=0,varlen=1,paged=1,pack_gqa=1"), spec)
        self.assertEqual((a.head_dim, a.k, a.v), (512, cache.ptr, cache.ptr))

    def test_one_query_head_runs_unpacked(self):
        q, cache, table, lens = decode_inputs(batch=2, heads_q=1)
        self.call(q, cache, table, lens)
        self.assertNotIn("pack_gqa", self.rt.launches[-1][0])

    def test_fast_path_reuses_the_plan_with_new_pointers(self):
        q, cache, table, lens = decode_inputs(batch=8, seqlen_q=2, heads_q=32)
        out1, lse1 = self.call(q, cache, table, lens, causal=True)
        q2, cache2, table2, lens2 = decode_inputs(batch=8, seqlen_q=2, heads_q=32)
        out2, lse2 = self.call(q2, cache2, table2, lens2, causal=True)
        self.assertEqual(len(self.rt.kernels), 1, "the second call fetched no kernel: the fast path")
        (_, a1), (_, a2) = self.rt.launches
        self.assertEqual((a2.q, a2.k, a2.v, a2.o, a2.lse, a2.seqused_k, a2.block_table),
                         (q2.ptr, cache2.ptr, cache2.ptr, out2.ptr, lse2.ptr, lens2.ptr, table2.ptr))
        self.assertEqual(a2.cu_seqlens_q, a1.cu_seqlens_q, "the query offsets are made once")
        skip = _pointer_fields()
        for name in self.m._capi.ARGS_FIELDS:
            if name not in skip:
                self.assertEqual(_field(a1, name), _field(a2, name), name)
        self.assertEqual((out2.shape, lse2.shape, lse2.strides), (out1.shape, lse1.shape, lse1.strides))
        # another scalar argument is another plan
        self.call(q2, cache2, table2, lens2, causal=False)
        self.assertEqual(len(self.rt.kernels), 2)

    def test_v_in_k_switch_picks_the_shared_scores_kernel_and_its_own_plan(self):
        q, cache, table, lens = decode_inputs(batch=8, seqlen_q=2, heads_q=128)
        self.call(q, cache, table, lens, causal=True)
        try:
            self.m.V_IN_K = False
            self.call(q, cache, table, lens, causal=True)
        finally:
            self.m.V_IN_K = True
        self.call(q, cache, table, lens, causal=True)
        self.assertEqual([spec.endswith(",v_in_k=1,chunk_waits=1,q_reg_dims=192") for spec, _ in self.rt.launches], [True, False, True])
        self.assertEqual(self.rt.launches[0][0], self.rt.launches[1][0] + ",v_in_k=1,chunk_waits=1,q_reg_dims=192")
        self.assertEqual(len(self.rt.kernels), 2, "each setting its own plan, both kept")
        (_, a), (_, b) = self.rt.launches[:2]
        self.assertEqual((b.k, b.v, bytes(b.k_strides)), (cache.ptr, cache.ptr, bytes(b.v_strides)))
        for name in self.m._capi.ARGS_FIELDS:  # the same arguments but the outputs and the workspace
            if name not in _pointer_fields() - {"q", "k", "v", "seqused_k", "block_table"}:
                self.assertEqual(_field(a, name), _field(b, name), name)

    def test_pdl_switch_sets_the_launch_flag_and_keeps_its_own_plan(self):
        q, cache, table, lens = decode_inputs(batch=4, heads_q=16)
        self.call(q, cache, table, lens)
        try:
            self.m.PDL = True
            self.call(q, cache, table, lens)
            self.call(q, cache, table, lens)  # the fast path keeps the flag
        finally:
            self.m.PDL = False
        self.call(q, cache, table, lens)
        self.assertEqual([a.flags for _, a in self.rt.launches], [0, self.m._capi.FLAG_PDL, self.m._capi.FLAG_PDL, 0])
        self.assertEqual(len({spec for spec, _ in self.rt.launches}), 1, "the same kernel either way")

    def test_no_plan_is_kept_inside_a_capture(self):
        self.rt.capture = True
        q, cache, table, lens = decode_inputs(batch=2, heads_q=16)
        self.call(q, cache, table, lens)
        self.call(q, cache, table, lens)
        self.assertEqual(len(self.rt.kernels), 2)
        self.assertNotEqual(self.rt.launches[0][1].cu_seqlens_q, self.rt.launches[1][1].cu_seqlens_q,
                            "inside a capture the offsets are the graph's own")

    def test_nothing_to_launch(self):
        q, cache, table, lens = decode_inputs(batch=0, heads_q=16)
        out, lse = self.call(q, cache, table, lens)
        self.assertEqual((out.shape, lse.shape, self.rt.launches), ((0, 1, 16, 512), (0, 16, 1), []))
        q, cache, table, lens = decode_inputs(batch=3, heads_q=16, max_blocks=0)
        out, lse = self.call(q, cache, table, lens)
        self.assertEqual((out.filled, lse.filled, self.rt.launches), (0.0, float("-inf"), []))

    def test_every_planned_spec_is_supported(self):
        import flashjit
        seen = set()
        for dtype, d, heads, seqlen_q, batch, splits, causal, v_in_k in itertools.product(
                ("bf16", "fp16"), (576, 512), (1, 16, 32, 64, 128), (1, 2, 3, 4), (1, 8, 64, 256), (0, 1, 4), (0, 1),
                (False, True)):
            spec, max_splits = self.m.mla_plan(132, dtype, d, 512, causal, batch, seqlen_q, heads, 1, splits, v_in_k)
            self.assertEqual(",split_kv=1" in spec, max_splits > 0, spec)
            self.assertEqual(spec.replace(",seesaw=1", "").endswith(",v_in_k=1"), v_in_k, spec)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1", seen)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1", seen)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,"
                      "seesaw=1", seen)  # SEESAW = None: the seesaw by shape

    def test_seesaw_plans_only_the_shared_scores_kernels_at_576(self):
        import flashjit
        seen = set()
        for dtype, d, heads, seqlen_q, splits, v_in_k, kv_fp8 in itertools.product(
                ("bf16", "fp16"), (576, 512), (16, 128), (1, 2), (0, 1), (False, True), (False, True)):
            spec, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                      seesaw=True)
            self.assertEqual(",seesaw=1" in spec, v_in_k and not kv_fp8 and d == 576, spec)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,"
                      "seesaw=1", seen)

    def test_seesaw_by_shape_on_unsplit_launches_of_two_row_tiles(self):
        # SEESAW = None: the seesaw where a sequence's rows (queries x heads a latent head) fill two 64-row tiles
        # and the launch runs unsplit (the library's count: SMs / tiles), the hand-over elsewhere (bench/NOTES.md,
        # 2026-12-06). The default is False since chunk_waits=1 (the hand-over faster everywhere: 2026-12-07).
        self.assertIs(self.m.SEESAW, False)
        for heads, seqlen_q, batch, splits, want in (
                (64, 2, 64, 0, True), (128, 1, 64, 0, True), (128, 1, 64, 1, True), (65, 1, 64, 0, True),
                (128, 1, 67, 0, True), (128, 1, 512, 0, True), (32, 4, 64, 0, True),
                (64, 1, 132, 0, False),  # 64 rows: one tile a sequence, though 132 tiles leave no split
                (128, 2, 64, 0, False),  # 256 rows: four tiles a sequence
                (64, 1, 64, 0, False),   # one tile a sequence (the library splits: 132 SMs / 64 tiles)
                (16, 1, 64, 0, False), (32, 1, 64, 0, False), (16, 2, 64, 0, False),
                (128, 1, 33, 0, False),  # 66 tiles: two splits
                (128, 1, 8, 0, False),   # few sequences: the launch splits
                (128, 1, 8, 1, True)):   # ... unless told not to
            spec, max_splits = self.m.mla_plan(132, "bf16", 576, 512, True, batch, seqlen_q, heads, 1, splits, True)
            self.assertEqual(",seesaw=1" in spec, want, (heads, seqlen_q, batch, splits, spec))
            self.assertEqual(self.m.seesaw_by_shape(132, batch, seqlen_q, heads, 1, max_splits), want)
            for forced in (True, False):
                spec, _ = self.m.mla_plan(132, "bf16", 576, 512, True, batch, seqlen_q, heads, 1, splits, True,
                                          seesaw=forced)
                self.assertEqual(",seesaw=1" in spec, forced, spec)
        # Not the O-in-parts kernels, the FP8 latent cache or head dims other than 576/512.
        for v_in_k, kv_fp8, d in ((False, False, 576), (True, True, 576), (True, False, 512)):
            spec, _ = self.m.mla_plan(132, "bf16", d, 512, True, 64, 1, 128, 1, 0, v_in_k, kv_fp8)
            self.assertNotIn("seesaw", spec)

    def kernel_with(self, switch, value, heads, clear=True):
        """The spec one unsplit decode call launches (batch 4, 128 keys) with the module switch `switch` set to
        value for the call (and put back after); clear: the remembered plans and kernels cleared first."""
        q, cache, table, lens = decode_inputs(heads_q=heads)
        if clear:
            self.m._plans.clear()
            self.rt.kernels.clear()
        before = getattr(self.m, switch)
        setattr(self.m, switch, value)
        try:
            self.call(q, cache, table, lens, 512, None, 1, causal=True)  # num_splits 1: not split
        finally:
            setattr(self.m, switch, before)
        return self.rt.launches[-1][0]

    def test_seesaw_switch_reaches_the_launch(self):
        for value, want in ((None, True), (False, False), (True, True)):
            spec = self.kernel_with("SEESAW", value, 128)
            self.assertEqual(",seesaw=1" in spec, want, (value, spec))

    def test_chunk_waits_plans_only_the_shared_scores_kernels(self):
        import flashjit
        self.assertIs(self.m.CHUNK_WAITS, True)  # on by default (faster on an H100: bench/NOTES.md, 2026-12-07)
        seen = set()
        for dtype, d, heads, seqlen_q, splits, v_in_k, kv_fp8, seesaw in itertools.product(
                ("bf16", "fp16"), (576, 512), (16, 128), (1, 2), (0, 1), (False, True), (False, True), (False, True)):
            spec, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                      seesaw=seesaw, chunk_waits=True, early_release=False)
            without, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                         seesaw=seesaw, early_release=False)
            self.assertEqual(spec.endswith(",chunk_waits=1"), v_in_k and not kv_fp8, spec)
            self.assertEqual(spec.replace(",chunk_waits=1", ""), without)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)

    def test_chunk_waits_switch_reaches_the_launch(self):
        for value in (False, True):
            spec = self.kernel_with("CHUNK_WAITS", value, 16)
            self.assertEqual(spec.endswith(",chunk_waits=1,q_reg_dims=192"), value, (value, spec))

    def test_early_release_plans_only_the_hand_over_with_chunk_waits(self):
        import flashjit
        self.assertIsNone(self.m.EARLY_RELEASE)  # by shape (see the next test)
        seen = set()
        for dtype, d, heads, seqlen_q, splits, v_in_k, kv_fp8, seesaw, chunk_waits in itertools.product(
                ("bf16", "fp16"), (576, 512), (16, 128), (1, 2), (0, 1), (False, True), (False, True), (False, True),
                (False, True)):
            spec, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                      seesaw=seesaw, chunk_waits=chunk_waits, early_release=True)
            without, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                         seesaw=seesaw, chunk_waits=chunk_waits, early_release=False)
            want = v_in_k and not kv_fp8 and chunk_waits and ",seesaw=1" not in spec
            self.assertEqual(spec.endswith(",chunk_waits=1,early_release=1"), want, spec)
            self.assertEqual(spec.replace(",early_release=1", ""), without)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)

    def test_early_release_by_shape_on_the_seesaws_shapes(self):
        # EARLY_RELEASE = None: early_release=1 on unsplit launches whose sequences' rows fill two 64-row tiles
        # (faster there on an H100, slower at 16-32 heads and 128 x 2: bench/NOTES.md, 2026-12-07, f6ebf7d), the
        # shapes SEESAW = None takes (test_seesaw_by_shape_on_unsplit_launches_of_two_row_tiles).
        for heads, seqlen_q, batch, splits in itertools.product((16, 32, 64, 65, 128), (1, 2, 4), (8, 33, 64, 132),
                                                                (0, 1)):
            spec, max_splits = self.m.mla_plan(132, "bf16", 576, 512, True, batch, seqlen_q, heads, 1, splits, True,
                                               seesaw=False, chunk_waits=True)
            want = self.m.seesaw_by_shape(132, batch, seqlen_q, heads, 1, max_splits)
            self.assertEqual(self.m.early_release_by_shape(132, batch, seqlen_q, heads, 1, max_splits), want)
            self.assertEqual(spec.endswith(",chunk_waits=1,early_release=1"), want, (heads, seqlen_q, batch, splits, spec))
        self.assertTrue(self.m.early_release_by_shape(132, 64, 1, 128, 1, 0))   # 128 x 1: one sequence, two tiles
        self.assertTrue(self.m.early_release_by_shape(132, 64, 2, 64, 1, 0))    # 64 x 2
        self.assertFalse(self.m.early_release_by_shape(132, 64, 2, 128, 1, 0))  # 128 x 2: four tiles
        self.assertFalse(self.m.early_release_by_shape(132, 64, 1, 16, 1, 2))   # 16 x 1: one tile, split
        # The seesaw's kernels and the slot waits never take it, by shape or not.
        for seesaw, chunk_waits in ((True, True), (False, False)):
            spec, _ = self.m.mla_plan(132, "bf16", 576, 512, True, 64, 1, 128, 1, 0, True, seesaw=seesaw,
                                      chunk_waits=chunk_waits)
            self.assertNotIn("early_release", spec)

    def test_early_release_switch_reaches_the_launch(self):
        for heads, value, want in ((16, False, False), (16, True, True), (16, None, False),
                                   (128, None, True), (128, False, False)):
            spec = self.kernel_with("EARLY_RELEASE", value, heads)
            self.assertEqual(spec.endswith(",chunk_waits=1,early_release=1,q_reg_dims=192"), want, (heads, value, spec))

    def test_half_release_goes_wherever_early_release_does(self):
        import flashjit
        self.assertFalse(self.m.HALF_RELEASE)  # off by default (not yet measured on a GPU)
        seen = set()
        for d, heads, seqlen_q, splits, seesaw, chunk_waits, early_release in itertools.product(
                (576, 512), (16, 128), (1, 2), (0, 1), (False, True), (False, True), (False, True, None)):
            spec, _ = self.m.mla_plan(132, "bf16", d, 512, True, 64, seqlen_q, heads, 1, splits, True, seesaw=seesaw,
                                      chunk_waits=chunk_waits, early_release=early_release, half_release=True)
            without, _ = self.m.mla_plan(132, "bf16", d, 512, True, 64, seqlen_q, heads, 1, splits, True,
                                         seesaw=seesaw, chunk_waits=chunk_waits, early_release=early_release)
            self.assertEqual(spec.endswith(",early_release=1,half_release=1"), without.endswith(",early_release=1"),
                             (spec, without))
            self.assertEqual(spec.replace(",half_release=1", ""), without)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertTrue(any(",half_release=1" in spec for spec in seen))

    def test_half_release_switch_reaches_the_launch(self):
        for heads, value, want in ((128, True, True), (128, False, False), (16, True, False)):
            spec = self.kernel_with("HALF_RELEASE", value, heads)  # EARLY_RELEASE by shape: 128 heads only
            self.assertEqual(spec.endswith(",early_release=1,half_release=1,q_reg_dims=192"), want, (heads, value, spec))

    def test_q_reg_dims_go_on_the_hand_over_kernels_alone(self):
        import flashjit
        self.assertTrue(self.m.Q_REG_DIMS)  # on by default
        seen = set()
        for d, heads, seqlen_q, splits, seesaw, chunk_waits, kv_fp8 in itertools.product(
                (576, 512), (16, 128), (1, 2), (0, 1), (False, True), (False, True), (False, True)):
            spec, _ = self.m.mla_plan(132, "bf16", d, 512, True, 64, seqlen_q, heads, 1, splits, True, kv_fp8,
                                      seesaw=seesaw, chunk_waits=chunk_waits, q_regs=True)
            without, _ = self.m.mla_plan(132, "bf16", d, 512, True, 64, seqlen_q, heads, 1, splits, True, kv_fp8,
                                         seesaw=seesaw, chunk_waits=chunk_waits)
            hand_over = ",v_in_k=1" in without and ",seesaw=1" not in without
            self.assertEqual(spec, without + ",q_reg_dims=192" if hand_over else without, (spec, without))
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertTrue(any(",q_reg_dims=192" in spec for spec in seen))

    def test_q_reg_dims_switch_reaches_the_launch(self):
        for heads, value, want in ((128, True, True), (128, False, False), (16, True, True)):
            spec = self.kernel_with("Q_REG_DIMS", value, heads)
            self.assertEqual(spec.endswith(",q_reg_dims=192"), want, (heads, value, spec))
        # The switch is in the fast path's key: a plan made with it is not reused once it is off, and back.
        self.m._plans.clear()
        specs = [self.kernel_with("Q_REG_DIMS", value, 128, clear=False) for value in (True, False, True)]
        self.assertEqual([spec.endswith(",q_reg_dims=192") for spec in specs], [True, False, True], specs)

    def test_inline_combine_plans_split_shared_scores_launches_of_few_rows(self):
        import flashjit
        self.assertFalse(self.m.INLINE_COMBINE)  # off by default (slower on an H100: bench/NOTES.md)
        seen = set()
        for dtype, d, heads, seqlen_q, splits, v_in_k, kv_fp8, seesaw in itertools.product(
                ("bf16", "fp16"), (576, 512), (1, 8, 16, 32, 128), (1, 2, 4), (0, 1), (False, True), (False, True),
                (False, True)):
            spec, max_splits = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                               seesaw=seesaw, inline_combine=True)
            # the library merges inline where a tile holds at most 16 rows (queries x packed heads)
            want = max_splits > 0 and v_in_k and not kv_fp8 and seqlen_q * heads <= 16
            self.assertEqual(",split_kv=1,combine=inline" in spec, want, spec)
            without, _ = self.m.mla_plan(132, dtype, d, 512, True, 64, seqlen_q, heads, 1, splits, v_in_k, kv_fp8,
                                         seesaw=seesaw)
            self.assertEqual(spec.replace(",combine=inline", ""), without)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=0,varlen=1,paged=1,pack_gqa=1,split_kv=1,"
                      "combine=inline,v_in_k=1", seen)
        self.assertIn("dtype=fp16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,"
                      "combine=inline,v_in_k=1,seesaw=1", seen)


class Fp8LatentCache(MlaCase):
    """k_cache of torch.float8_e4m3fn (flashjit extension): spec key kv_dtype=e4m3, the O-in-parts kernels, one
    descale for K and V (V's codes are K's), every launch checked by the library's argument validation."""

    def fp8_inputs(self, batch=4, seqlen_q=1, heads_q=128, page=64):
        q, _, table, lens = decode_inputs(batch=batch, seqlen_q=seqlen_q, heads_q=heads_q, page=page)
        return q, StandIn((100, page, 1, 576), E4M3), table, lens

    def test_the_spec_has_kv_dtype_e4m3_and_no_v_in_k(self):
        for heads, sq in ((16, 1), (128, 2), (64, 4)):
            self.rt.launches.clear()
            q, cache, table, lens = self.fp8_inputs(seqlen_q=sq, heads_q=heads)
            self.call(q, cache, table, lens, causal=True)
            spec, a = self.rt.launches[-1]
            self.assertTrue(spec.startswith(MLA_SPEC.format(int(sq > 1))), spec)
            self.assertTrue(spec.endswith(",kv_dtype=e4m3"), spec)
            self.assertNotIn("v_in_k", spec, "the v_in_k=1 kernels take no FP8 cache: V_IN_K is passed over")
            self.assertEqual((a.k, a.v), (cache.ptr, cache.ptr))
            self.assertEqual((a.k_scale, a.v_scale), (self.rt.unit, self.rt.unit), "no kv_descale reads as 1.0")

    def test_kv_descale_is_both_scales_with_its_layout(self):
        q, cache, table, lens = self.fp8_inputs(batch=4)
        one = StandIn((), F32)
        per_seq = StandIn((4, 1), F32)
        per_seq_strided = StandIn((4, 1), F32, strides=(8, 1))
        expanded = StandIn((4, 1), F32, strides=(0, 0))  # one scale expanded to FA3's shape
        for scale, strides in ((one, (0, 0)), (per_seq, (1, 0)), (per_seq_strided, (8, 0)), (expanded, (0, 0))):
            self.call(q, cache, table, lens, kv_descale=scale)
            _, a = self.rt.launches[-1]
            self.assertEqual((a.k_scale, a.v_scale), (scale.ptr, scale.ptr))
            self.assertEqual((a.k_scale_batch_stride, a.k_scale_head_stride), strides)
            self.assertEqual((a.v_scale_batch_stride, a.v_scale_head_stride), strides)
            self.assertEqual(a.q_scale, 0)

    def test_fast_path_takes_each_calls_descale(self):
        q, cache, table, lens = self.fp8_inputs(batch=8, seqlen_q=2, heads_q=32)
        s1, s2 = StandIn((8, 1), F32), StandIn((8, 1), F32)
        self.call(q, cache, table, lens, causal=True, kv_descale=s1)
        self.call(q, cache, table, lens, causal=True, kv_descale=s2)
        self.assertEqual(len(self.rt.kernels), 1, "the second call fetched no kernel: the fast path")
        self.call(q, cache, table, lens, causal=True)  # no descale: another plan (the unit scale, strides 0)
        self.call(q, cache, table, lens, causal=True)
        self.assertEqual(len(self.rt.kernels), 2)
        got = [(a.k_scale, a.v_scale, a.k_scale_batch_stride) for _, a in self.rt.launches]
        self.assertEqual(got, [(s1.ptr, s1.ptr, 1), (s2.ptr, s2.ptr, 1), (self.rt.unit, self.rt.unit, 0),
                               (self.rt.unit, self.rt.unit, 0)])
        q16, cache16, _, _ = decode_inputs(batch=8, seqlen_q=2, heads_q=32)
        self.call(q16, cache16, table, lens, causal=True)  # a 16-bit cache after: its own plan, no scale
        self.assertEqual((self.rt.launches[-1][1].k_scale, self.rt.launches[-1][0].endswith(",v_in_k=1,chunk_waits=1,q_reg_dims=192")), (0, True))

    def test_refusals_name_kv_descale(self):
        q, cache, table, lens = self.fp8_inputs(batch=2, heads_q=16)
        q16, cache16, _, _ = decode_inputs(batch=2, heads_q=16)
        one = StandIn((1,), F32)
        for args, kwargs, exc, pattern in (
                ((q16, cache16), {"kv_descale": one}, ValueError, "kv_descale: given with a torch.bfloat16 latent cache"),
                ((q, cache), {"kv_descale": StandIn((1,), BF16)}, TypeError, "kv_descale: dtype torch.bfloat16"),
                ((q, cache), {"kv_descale": StandIn((1,), F32, device="cuda:1")}, ValueError, "kv_descale: is on cuda:1"),
                ((q, cache), {"kv_descale": 0.5}, TypeError, "kv_descale: expected a float32 torch.Tensor, got float"),
                ((q, cache), {"kv_descale": StandIn((2,), F32)}, ValueError, r"kv_descale: shape \(2,\); expected one element"),
                ((q, cache), {"kv_descale": StandIn((2, 2), F32)}, ValueError, r"kv_descale: shape \(2, 2\).*\[2, 1\]"),
                ((q, cache), {"kv_descale": StandIn((3, 1), F32)}, ValueError, r"kv_descale: shape \(3, 1\)"),
                ((StandIn((2, 1, 16, 576), E4M3), cache), {}, TypeError, "q: dtype torch.float8_e4m3fn is not supported")):
            with self.assertRaisesRegex(exc, "^flashjit.flash_mla_with_kvcache: " + pattern):
                self.call(*args, table, lens, **kwargs)
        self.assertEqual(self.rt.launches, [])

    def test_every_planned_fp8_spec_is_supported(self):
        import flashjit
        seen = set()
        for dtype, d, heads, seqlen_q, batch, splits, causal, v_in_k in itertools.product(
                ("bf16", "fp16"), (576, 512), (1, 16, 64, 128), (1, 2, 4), (1, 64), (0, 1, 4), (0, 1), (False, True)):
            spec, _ = self.m.mla_plan(132, dtype, d, 512, causal, batch, seqlen_q, heads, 1, splits, v_in_k, True)
            self.assertTrue(spec.endswith(",kv_dtype=e4m3") and "v_in_k" not in spec, spec)
            if spec not in seen:
                seen.add(spec)
                self.assertIsNone(flashjit.supported(spec), spec)
        self.assertIn("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,"
                      "kv_dtype=e4m3", seen)


def _pointer_fields():
    return {"q", "k", "v", "o", "lse", "seqused_k", "block_table", "workspace"}


def _field(args, name):
    value = args
    for part in name.split("."):
        value = getattr(value, part)
    return value


class Metadata(MlaCase):
    def test_placeholders_of_flashmlas_first_form(self):
        lens = StandIn((6,), I32)
        meta, splits = self.m.get_mla_metadata(lens, 128, 1)
        self.assertEqual((meta.shape, meta.dtype, splits.shape, splits.dtype), ((0, 8), I32, (7,), I32))
        meta, splits = self.m.get_mla_metadata(cache_seqlens=lens, num_heads_per_head_k=64, num_heads_k=1)
        self.assertEqual(splits.shape, (7,))
        meta, splits = self.m.get_mla_metadata(lens, 64, 1, 64, False, None)
        self.assertEqual(meta.shape, (0, 8))

    def test_without_arguments_flashmlas_current_form(self):
        meta, splits = self.m.get_mla_metadata()
        self.assertIsInstance(meta, self.m.MlaScheduleMeta)
        self.assertIsNone(splits)
        meta.tile_scheduler_metadata = "set by the caller"  # engines set these fields; flashjit reads none

    def test_refusals_name_the_argument(self):
        lens = StandIn((6,), I32)
        for kwargs, exc, pattern in (
                ({"is_fp8_kvcache": True}, NotImplementedError, "is_fp8_kvcache=True"),
                ({"topk": 2048}, NotImplementedError, "topk=2048.*sparse"),
                ({"num_heads_k": 2}, NotImplementedError, "num_heads_k=2"),
                ({"num_q_tokens_per_head_k": 0}, ValueError, "num_q_tokens_per_head_k"),
                ({"heads": 3}, TypeError, "unexpected keyword argument 'heads'")):
            with self.assertRaisesRegex(exc, "flashjit.get_mla_metadata: .*" + pattern):
                self.m.get_mla_metadata(lens, **kwargs)
        with self.assertRaisesRegex(TypeError, "multiple values for argument 'num_heads_per_head_k'"):
            self.m.get_mla_metadata(lens, 128, num_heads_per_head_k=128)
        with self.assertRaisesRegex(TypeError, "cache_seqlens: dtype torch.int64"):
            self.m.get_mla_metadata(StandIn((6,), "torch.int64"), 128, 1)
        with self.assertRaisesRegex(TypeError, "cache_seqlens: expected an int32 torch.Tensor"):
            self.m.get_mla_metadata([1, 2], 128, 1)


class Errors(MlaCase):
    def expect(self, exc, pattern, *args, **kwargs):
        with self.assertRaisesRegex(exc, "^flashjit.flash_mla_with_kvcache: " + pattern):
            self.call(*args, **kwargs)
        self.assertEqual(self.rt.launches, [])

    def test_flashmla_features_flashjit_lacks(self):
        inputs = decode_inputs(batch=2, heads_q=16)
        for name in ("indices", "attn_sink", "extra_k_cache", "extra_indices_in_kvcache", "topk_length",
                     "extra_topk_length"):
            self.expect(NotImplementedError, f"{name}=<tensor of shape \\(2,\\)> is not supported", *inputs,
                        **{name: StandIn((2,), I32)})
        self.expect(NotImplementedError, "is_fp8_kvcache=True is not supported", *inputs, is_fp8_kvcache=True)
        q, _, table, lens = inputs
        for dtype in ("torch.float8_e5m2", "torch.uint8"):  # FlashMLA's own FP8 rows are uint8; e4m3 is flashjit's
            self.expect(NotImplementedError, f"k_cache=.*FP8 latent cache of {dtype}.*{E4M3}, dequantised by kv_descale",
                        q, StandIn((10, 64, 1, 576), dtype), table, lens)
        self.expect(NotImplementedError, "k_cache=.*2 latent heads", q, StandIn((10, 64, 2, 576)), table, lens)
        with self.assertRaisesRegex(NotImplementedError, "flash_mla_sparse_fwd is not supported"):
            self.m.flash_mla_sparse_fwd(q, None, None, 0.1)

    def test_wrong_tensors_are_named(self):
        q, cache, table, lens = decode_inputs(batch=2, heads_q=16)
        self.expect(ValueError, "head_dim_v: 256", q, cache, table, lens, 256)
        self.expect(ValueError, "head_dim_v: 576", q, cache, table, lens, 576)
        self.expect(ValueError, "q: head dim 128", StandIn((2, 1, 16, 128)), StandIn((10, 64, 1, 128)), table, lens)
        self.expect(ValueError, "k_cache: head dim 512 differs", q, StandIn((10, 64, 1, 512)), table, lens)
        self.expect(TypeError, "q: dtype torch.float32", StandIn((2, 1, 16, 576), F32), StandIn((10, 64, 1, 576), F32),
                    table, lens)
        self.expect(TypeError, "k_cache: dtype torch.float16 differs", q, StandIn((10, 64, 1, 576), FP16), table, lens)
        self.expect(ValueError, "q: expected 4 dimensions", StandIn((2, 16, 576)), cache, table, lens)
        self.expect(ValueError, "k_cache: expected 4 dimensions", q, StandIn((640, 1, 576)), table, lens)
        self.expect(ValueError, "block_table: is required", q, cache, None, lens)
        self.expect(ValueError, "cache_seqlens: is required", q, cache, table, None)
        self.expect(TypeError, "block_table: dtype torch.int64", q, cache, StandIn((2, 40), "torch.int64"), lens)
        self.expect(ValueError, "block_table: has 3 rows", q, cache, StandIn((3, 40), I32), lens)
        self.expect(ValueError, "cache_seqlens: has 5 rows", q, cache, table, StandIn((5,), I32))
        self.expect(ValueError, "cache_seqlens: is on cuda:1", q, cache, table, StandIn((2,), I32, device="cuda:1"))
        self.expect(ValueError, "k_cache: is on cuda:1", q, StandIn((10, 64, 1, 576), device="cuda:1"), table, lens)
        self.expect(ValueError, "q: is on cpu", StandIn((2, 1, 16, 576), device="cpu"), cache, table, lens)
        self.expect(ValueError, "k_cache: the last dimension must be contiguous", q,
                    StandIn((10, 64, 1, 576), strides=(64 * 1152, 1152, 1152, 2)), table, lens)
        self.expect(TypeError, "block_table: expected a torch.Tensor", q, cache, [[0]], lens)
        for scale in (0.0, -1.0, float("nan"), float("inf"), "x"):
            self.expect(ValueError, "softmax_scale: ", q, cache, table, lens, softmax_scale=scale)

    def test_the_librarys_errors_name_the_argument(self):
        import flashjit
        q, cache, table, lens = decode_inputs(batch=2, heads_q=16)
        bad_q = StandIn((2, 1, 16, 576), strides=(16 * 576 + 4, 16 * 576, 576, 1))  # rows 8-byte apart
        with self.assertRaisesRegex(flashjit.FlashjitError,
                                    r"^flashjit.flash_mla_with_kvcache: q \(its (batch|row) stride\): .*attention_forward"):
            self.call(bad_q, cache, table, lens)
        bad_cache = StandIn((10, 64, 1, 576), ptr=fake_pointer() + 2)  # not 16-byte aligned
        with self.assertRaisesRegex(flashjit.FlashjitError, "^flashjit.flash_mla_with_kvcache: k_cache: pointer"):
            self.call(q, bad_cache, table, lens)

    def test_without_torch_the_call_says_so(self):
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            self.skipTest("torch is installed here")
        self.m._runtime = None
        with self.assertRaisesRegex(RuntimeError, "flash_mla_with_kvcache needs PyTorch"):
            self.call(*decode_inputs())
        with self.assertRaisesRegex(RuntimeError, "get_mla_metadata needs PyTorch"):
            self.m.get_mla_metadata(StandIn((2,), I32), 128, 1)
        self.assertEqual(self.m.get_mla_metadata()[1], None)  # FlashMLA's current form needs no torch


class Package(unittest.TestCase):
    def test_exported(self):
        import flashjit
        from flashjit import flash_mla
        self.assertIs(flashjit.flash_mla_with_kvcache, flash_mla.flash_mla_with_kvcache)
        self.assertIs(flashjit.get_mla_metadata, flash_mla.get_mla_metadata)
        self.assertIn("flash_mla_with_kvcache", flashjit.__all__)
        self.assertIn("get_mla_metadata", flashjit.__all__)

    def test_signature_is_flashmlas(self):
        import inspect
        from flashjit import flash_mla
        params = inspect.signature(flash_mla.flash_mla_with_kvcache).parameters.values()
        flashmlas = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
        self.assertEqual(flashmlas, ["q", "k_cache", "block_table", "cache_seqlens", "head_dim_v", "tile_scheduler_metadata",
                                     "num_splits", "softmax_scale", "causal", "is_fp8_kvcache", "indices", "attn_sink",
                                     "extra_k_cache", "extra_indices_in_kvcache", "topk_length", "extra_topk_length"])
        # flashjit's extensions: keyword-only, after FlashMLA's, so no positional call of FlashMLA's means another thing
        self.assertEqual([(p.name, p.default) for p in params if p.kind != p.POSITIONAL_OR_KEYWORD],
                         [("kv_descale", None)])
        self.assertTrue(all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="libflashjit.so (default: $FLASHJIT_LIBRARY, else ../../build/libflashjit.so)")
    args, rest = parser.parse_known_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    lib = args.lib or os.environ.get("FLASHJIT_LIBRARY") or os.path.join(HERE, "..", "..", "build", "libflashjit.so")
    os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(lib)
    import flashjit
    print(f"flashjit package {flashjit.__file__}")
    result = unittest.main(argv=[sys.argv[0], "-v"] + rest, exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
