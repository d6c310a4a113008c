"""FlashMLA's Python interface (deepseek-ai/FlashMLA, package flash_mla) on flashjit's absorbed-MLA decode
kernels: a second drop-in, beside FA3's.

  import flashjit.flash_mla as flash_mla          # in place of `import flash_mla`
  tile_scheduler_metadata, num_splits = flash_mla.get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)
  out, lse = flash_mla.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, 512,
                                              tile_scheduler_metadata, num_splits, causal=True)

How FlashMLA's call maps onto one flashjit launch (include/flashjit/flashjit.h, ENGINE INPUTS and DECODE):
- the spec: dtype (bf16 or fp16, q's), head_dim 576 (512 latent + 64 rotary; 512 also, as FlashMLA takes it),
  head_dim_v=512, causal, varlen=1, paged=1, pack_gqa=1 (all query heads share the one latent head: each cache
  block is read once per tile for all of them), split_kv=1 where the launch splits the keys, and v_in_k=1 (see
  V_IN_K below);
- q [batch, seqlen_q, heads_q, 576] is read as packed rows [batch * seqlen_q, heads_q, 576] (its own strides; a
  copy only where [batch, seqlen_q] do not merge into one row stride), cu_seqlens_q = arange(batch + 1) *
  seqlen_q (one int32 tensor per device, batch and seqlen_q, made once outside captures), max_seqlen_q =
  seqlen_q;
- k_cache [num_blocks, page_block_size, 1, 576] is both K and V with the same pointer and strides: V is its
  first head_dim_v (512) columns, the same memory, no copy; block_table is the page table, cache_seqlens
  seqused_k, and the key bound max_seqlen_k = block_table.shape[1] * page_block_size (any page size from 1;
  FlashMLA takes 64 only);
- out [batch, seqlen_q, heads_q, 512] (q's dtype) and softmax_lse float32 [batch, heads_q, seqlen_q], natural
  log, as FlashMLA returns them. flashjit writes the LSE as [heads_q, batch * seqlen_q] (varlen); the tensor
  returned is that memory as FlashMLA's shape, strides (seqlen_q, batch * seqlen_q, 1): no copy, no second
  kernel. It is contiguous where batch is 1; elsewhere .contiguous() gives FlashMLA's strides;
- causal is bottom-right aligned per sequence: query i of seqlen_q sees keys j <= cache_seqlens[b] - seqlen_q + i,
  FlashMLA's rule (its kernel's col_limit_right); with seqlen_q 1 causal changes nothing (FlashMLA then clears
  it, and so does flashjit: one kernel for both);
- softmax_scale None is 1 / sqrt(q's head dim), FlashMLA's default (1 / sqrt(576)); DeepSeek's engines pass their
  own (the model's 1 / sqrt(192) with its YaRN factor);
- the split workspace is the torch backend's: per device and stream, the largest asked for, reused (outside
  captures; inside one, from the graph's pool), sized by flashjit_attention_workspace_size.
flashjit schedules each launch itself (the split count from the upper bounds and the SM count, each sequence's
split size from its length on the device), so a CUDA graph captured once stays correct as cache_seqlens and
block_table change. get_mla_metadata computes nothing: its values are placeholders flash_mla_with_kvcache
accepts and never reads (any value is accepted there: FlashMLA's tensors, its FlashMLASchedMeta, None).

Where flashjit differs: a row that sees no key (cache_seqlens 0, or a causal query before the first key) gets
O = 0 and LSE = -inf (FlashMLA writes +inf there; -inf is what merging states across ranks expects). FlashMLA
features flashjit lacks raise NotImplementedError naming the argument: the FP8 cache (is_fp8_kvcache), sparse
attention (indices, topk_length, extra_k_cache, extra_indices_in_kvcache, extra_topk_length), attn_sink,
several latent heads (h_kv > 1), flash_mla_sparse_fwd. Wrong tensors raise ValueError or TypeError naming the
argument; strides and alignment the library checks, and its errors name the argument too.

flashjit extension: an FP8 latent cache. k_cache of torch.float8_e4m3fn under a bf16 or fp16 q is read as e4m3
codes (spec key kv_dtype=e4m3: flashjit.h, FP8 K/V CACHE), V's codes being K's first 512, dequantised by the
keyword-only kv_descale: float32, one element (one scale for the cache) or [batch, 1] (one a sequence); None
reads as 1.0, as FA3 reads a descale not given. The scores and P V run in 16 bits on the widened codes, so the
cache's bytes are halved, not the arithmetic's precision. These launches run the O-in-parts kernels (the v_in_k=1
kernels take no FP8 cache), whatever V_IN_K says. This is not FlashMLA's own FP8 format (is_fp8_kvcache: 656
bytes a token with per-tile scales inside), which stays refused.

flashjit extension: num_splits as a Python int is a hint, as in FA3's functions: 1 never splits, n > 1 caps the
splits at n, 0 lets flashjit choose (what None and FlashMLA's tensors mean).

flashjit extension: V_IN_K (module attribute, read at each call; True by default) runs the spec key v_in_k=1's
kernels: V read from the latent block already loaded for K, two consumer warpgroups sharing each tile's scores
(FlashMLA's design: the first computes Q K^T and hands P to the second, each computes half of O), so no score is
computed twice. False runs the O-in-two-parts kernels (each part's tile computing its own Q K^T), 1.6x (16-32
heads) to 2.4x (128 heads, 2 queries) slower in bench/mla_peers.py's decode cells on the H200 (BENCHMARKS.md).

flashjit extension: SEESAW (module attribute, read at each call) chooses between those kernels' two schedules:
v_in_k=1's hand-over (the first warpgroup computes every block's scores) and the spec key seesaw=1 (the two
warpgroups take alternate latent blocks, FlashMLA's seesaw schedule, each computing one block's scores while the
other's GEMMs run, P crossing both ways; head_dim 576, head_dim_v 512). False (the default) the hand-over everywhere:
with CHUNK_WAITS it was faster than the seesaw in every decode cell timed on an H100 (12-15 % at 64 heads x 2
queries and 128 x 1, 16 % at 128 x 2; bench/NOTES.md, 2026-12-07). None takes the seesaw where
each sequence's rows (seqlen_q x h_q / h_kv) fill two 64-row tiles (65-128 rows) and the launch runs unsplit (its
tiles fill the SMs), the hand-over elsewhere (seesaw_by_shape): in three runs on H100s the seesaw was 4-5 % faster
at 64 heads x 2 queries and 128 x 1 (batch 64 x 4096 keys, one tile a CTA, two tiles sharing each latent block
through L2), 11-14 % slower at 128 x 2 and 8-9 % slower at 16-32 heads (split launches) (bench/NOTES.md,
2026-12-06, slot waits). True: the seesaw everywhere.

flashjit extension: CHUNK_WAITS (module attribute, read at each call; True by default) adds the spec key
chunk_waits=1 to those kernels (either schedule): a latent block's scores start on its first 64-column chunk and
each chunk's products are issued as soon as that chunk has landed, rather than once the whole block (the seesaw:
each half of it) has, so that the scores run beside the loads of the block's later chunks (FlashMLA's
fine-grained loads). On an H100 (batch 64 x 4096 keys, page 64) the hand-over's calls took 0.82x the time at 128
heads x 1 query and 64 x 2 (448 -> 548 and 446 -> 545 TFLOP/s), 0.92x at 128 x 2 (559 -> 606), level at 16 heads
(memory-bound); the seesaw's 0.98-0.99x, 1.03x at 16 heads (bench/NOTES.md, 2026-12-07). False: the slot waits.

flashjit extension: EARLY_RELEASE (module attribute, read at each call) adds the spec key early_release=1 to the
hand-over's kernels with CHUNK_WAITS (not the seesaw's): the two warpgroups give a latent slot back as soon as their
P V's on it are done, so that the next block's load runs beside the scores of the block before it rather than after
its last chunk has landed. None (the default) takes it where each sequence's rows fill two 64-row tiles (65-128
rows) and the launch runs unsplit (early_release_by_shape, SEESAW = None's shapes): on an H100 (batch 64 x 4096
keys, page 64) those calls took 0.982x the time at 128 heads x 1 query and 0.984x at 64 x 2, where the other cells
took 1.007x (16 x 1), 1.013x (32 x 1) and 1.032x (128 x 2); the unsplit 128-head kernel 0.96-0.99x at 1k-8k keys
(bench/NOTES.md, 2026-12-07, f6ebf7d). True: everywhere; False: nowhere.

flashjit extension: HALF_RELEASE (module attribute, read at each call; False by default) adds the spec key
half_release=1 wherever early_release=1 goes: each warpgroup gives back its own part of a latent slot (the first
V's left columns and the rotary chunk, the second V's right columns, after the first's P V), so that the next
block's first chunks load while the second P V runs. Off because on an H100 (batch 64 x 4096 keys, page 64) it was
level with early_release=1 alone: 1.000-1.009x the time at 16-128 heads (bench/NOTES.md, 2026-12-07, e93aff1).

flashjit extension: Q_REG_DIMS (module attribute, read at each call; True by default) adds the spec key
q_reg_dims=MLA_Q_REG_DIMS (192) to the hand-over's kernels (V_IN_K without the seesaw): the warpgroup that computes
the scores holds Q's first 192 head dims in registers for the whole tile, so those steps of Q K^T read only the
latent block from shared memory. On an H100 (batch 64 x 4096 keys, page 64, through this module) the calls took
0.987x the time at 128 heads x 2 queries, 0.993x at 16 x 1, 0.999x at 128 x 1 and 64 x 2 (bench/NOTES.md,
2026-12-07); python/tests/test_mla_gpu.py passed with it. False: Q read from shared memory at every step.

flashjit extension: INLINE_COMBINE (module attribute, read at each call; False by default) adds the spec key
combine=inline to the v_in_k=1 kernels' split launches whose tiles hold at most 16 rows (seqlen_q x h_q / h_kv, the
library's inline-merge bound): the last split of each tile merges the partials in the attention kernel, so the call
is one kernel, not two (the split workspace then keeps counters: the torch backend zeroes it once, and in a CUDA
graph capture its counters alone). Off because on an H100 (64 x 4k keys, page 64, a graph of calls) it was 3.5-5 %
slower at 16 heads and level at 8. Those graphs zeroed the whole workspace, partials and all, before every launch;
they now zero only the counters, and whether that was the cost is not yet measured. The other suspect is the last
split's merge, a chain of L2 round trips, where the combine kernel merges every row at once (bench/NOTES.md).

flashjit extension: PDL (module attribute, read at each call; False by default) launches with programmatic
dependent launch (FLASHJIT_ATTENTION_FLAG_PDL): the attention kernel's set-up overlaps the previous kernel in
the stream and the split combine's the attention kernel's tail; each waits for its predecessor's memory before
it reads or writes a tensor, so results are the same. For back-to-back decode layers and CUDA graphs whose
other kernels are launched with PDL too. Off because on an H100 it was level with PDL off in three interleaved A/Bs
(geomean 0.990-1.003 over the decode cells; bench/NOTES.md, 2026-12-07).

Needs torch only when called (the checks and the launch plan are plain Python: the CPU tests run them with
stand-in tensors). Not traceable by torch.compile yet (call it outside the compiled region, as engines call
attention through their own opaque op)."""
import ctypes
import math
import struct

from . import _capi, _plan
from ._capi import FlashjitError

MLA_HEAD_DIMS = (576, 512)  # FlashMLA's dense decode: 576 (DeepSeek V2/V3: 512 latent + 64 rotary) or 512
MLA_HEAD_DIM_V = 512        # FlashMLA's only V head dim: the latent's 512 columns
METADATA_COLUMNS = 8        # FlashMLA's TileSchedulerMetaDataSize: int32 words per SM part
_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}
_INT32 = "torch.int32"
_E4M3 = "torch.float8_e4m3fn"  # an FP8 latent cache (flashjit extension: kv_descale)
_FLOAT32 = "torch.float32"
_MAX_PLANS = 4096           # fast-path plans kept before the cache starts over
V_IN_K = True               # flashjit extension: the v_in_k=1 kernels (see the module's notes)
SEESAW = False              # flashjit extension: with V_IN_K, those kernels' seesaw schedule (seesaw=1); None: by shape
CHUNK_WAITS = True          # flashjit extension: with V_IN_K, scores issued chunk by chunk as the latent block lands
EARLY_RELEASE = None        # flashjit extension: with CHUNK_WAITS, the hand-over's latent slots back sooner; None: by shape
HALF_RELEASE = False        # flashjit extension: with early_release=1, each warpgroup's part of a slot back on its own
Q_REG_DIMS = True           # flashjit extension: the hand-over's scores warpgroup holds Q's first MLA_Q_REG_DIMS in registers
MLA_Q_REG_DIMS = 192        # what q_reg_dims takes at 576/512 and 512/512 with 64-key blocks (the most 256 registers hold)
PDL = False                 # flashjit extension: launch with programmatic dependent launch (see the module's notes)
INLINE_COMBINE = False      # flashjit extension: split launches of few rows merge in the attention kernel (see the notes)
INLINE_MERGE_ROWS = 16      # the library's kInlineMergeRows: rows a tile (seqlen_q x heads_q / h_kv) it merges inline

# The C fields as this interface's arguments call them (a library error names the argument).
_FIELD_NAMES = {"q": "q", "k": "k_cache", "v": "k_cache (V: its first head_dim_v columns)", "o": "out",
                "lse": "softmax_lse", "seqused_k": "cache_seqlens", "block_table": "block_table",
                "block_table_batch_stride": "block_table", "page_size": "k_cache.shape[1] (page_block_size)",
                "num_pages": "k_cache.shape[0] (num_blocks)", "heads_q": "q's heads", "heads_kv": "k_cache's heads",
                "head_dim": "q's head dim", "batch": "the batch size", "seqlen_q": "q.shape[1] (seqlen_q)",
                "seqlen_k": "block_table.shape[1] x page_block_size", "softmax_scale": "softmax_scale",
                "cu_seqlens_q": "cu_seqlens_q (arange(batch + 1) x seqlen_q)", "workspace": "the split workspace",
                "total_q": "batch x seqlen_q"}


# ---- the launch plan (plain Python) -----------------------------------------------------------------
def mla_spec(dtype_name, head_dim, head_dim_v, causal, pack_gqa, split_kv, v_in_k=False, kv_fp8=False, seesaw=False,
             inline_combine=False, chunk_waits=False, early_release=False, half_release=False, q_regs=False):
    """The spec of an absorbed-MLA decode launch, keys in this order: "dtype=bf16,head_dim=576,head_dim_v=512,
    causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1[,combine=inline][,v_in_k=1[,seesaw=1][,chunk_waits=1
    [,early_release=1[,half_release=1]]][,q_reg_dims=192]]
    [,kv_dtype=e4m3]" (head_dim_v left out where it equals head_dim; kv_fp8: an FP8 latent cache, which the v_in_k=1
    kernels do not take; seesaw: v_in_k=1's schedule with the two warpgroups on alternate blocks, at head_dim_v 512
    above head_dim 512 only; inline_combine: the splits merged by the attention kernel's last split of each tile,
    v_in_k=1 kernels only; chunk_waits: v_in_k=1's scores issued chunk by chunk as a block lands; early_release: with
    chunk_waits and the hand-over (not the seesaw), its latent slots given back as soon as their P V's are done;
    half_release: with early_release, each warpgroup's part of a slot given back on its own; q_regs: on the hand-over
    (v_in_k=1 without the seesaw), Q's first MLA_Q_REG_DIMS head dims in the scores warpgroup's registers)."""
    spec = f"dtype={dtype_name},head_dim={head_dim}"
    if head_dim_v != head_dim:
        spec += f",head_dim_v={head_dim_v}"
    spec += f",causal={int(bool(causal))},varlen=1,paged=1"
    if pack_gqa:
        spec += ",pack_gqa=1"
    if split_kv:
        spec += ",split_kv=1"
        if inline_combine and v_in_k and not kv_fp8:
            spec += ",combine=inline"
    if v_in_k:
        spec += ",v_in_k=1"
        if seesaw and head_dim_v == 512 and head_dim > 512:
            spec += ",seesaw=1"
        if chunk_waits:
            spec += ",chunk_waits=1"
            if early_release and ",seesaw=1" not in spec:
                spec += ",early_release=1"
                if half_release:
                    spec += ",half_release=1"
        if q_regs and ",seesaw=1" not in spec:
            spec += f",q_reg_dims={MLA_Q_REG_DIMS}"
    if kv_fp8:
        spec += ",kv_dtype=e4m3"
    return spec


def mla_plan(sm_count, dtype_name, head_dim, head_dim_v, causal, batch, seqlen_q, heads_q, heads_kv, num_splits=0,
             v_in_k=False, kv_fp8=False, seesaw=None, inline_combine=False, chunk_waits=False, early_release=None,
             half_release=False, q_regs=False):
    """(spec, max_splits) of a flash_mla_with_kvcache launch (max_splits 0: no split). causal only where seqlen_q
    > 1 (one query sees every key either way). num_splits: 1 = never split, n > 1 = at most n splits (at most
    _plan.MAX_SPLITS), 0 or None = the most the library can use (_plan.most_splits; a launch it could give only
    one split runs unsplit). Query heads are packed (pack_gqa=1) whenever several share the latent head. v_in_k:
    the shared-scores kernels (see V_IN_K), except with kv_fp8 (an FP8 latent cache: the O-in-parts kernels); seesaw:
    their seesaw schedule (True, False, or None: seesaw_by_shape; see SEESAW); inline_combine: combine=inline on
    those kernels where a split launch's tiles hold at most INLINE_MERGE_ROWS rows (see INLINE_COMBINE); chunk_waits:
    chunk_waits=1 on those kernels (see CHUNK_WAITS); early_release: early_release=1 with it on the hand-over's (True,
    False, or None: early_release_by_shape; see EARLY_RELEASE); half_release: half_release=1 wherever early_release=1
    goes (see HALF_RELEASE); q_regs: q_reg_dims on the hand-over's kernels (see Q_REG_DIMS)."""
    if num_splits is None or num_splits <= 0:
        most = _plan.most_splits(sm_count, batch, seqlen_q, heads_q, heads_kv)
        max_splits = most if most > 1 else 0
    else:
        max_splits = 0 if num_splits == 1 else min(int(num_splits), _plan.MAX_SPLITS)
    merges_inline = inline_combine and seqlen_q * (heads_q // max(1, heads_kv)) <= INLINE_MERGE_ROWS
    if seesaw is None:
        seesaw = seesaw_by_shape(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits)
    if early_release is None:
        early_release = early_release_by_shape(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits)
    spec = mla_spec(dtype_name, head_dim, head_dim_v, causal and seqlen_q > 1, heads_q > heads_kv, max_splits > 0,
                    v_in_k and not kv_fp8, kv_fp8, seesaw, merges_inline, chunk_waits, early_release, half_release, q_regs)
    return spec, max_splits


def _switch(value):
    """A by-shape module switch (SEESAW, EARLY_RELEASE) as the plan takes it: None (by shape), else True or False."""
    return None if value is None else bool(value)


def two_row_tiles_unsplit(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits):
    """Whether a launch's sequences' rows fill two 64-row tiles (65-128: seqlen_q x h_q / h_kv) and it runs unsplit:
    no split_kv (max_splits 0), or the library's count is one: it gives each SM's CTA slot a tile, splits = SMs /
    tiles (src/launch/attention_args.cpp, tile_geometry; one CTA an SM at these head dims)."""
    rows = seqlen_q * (heads_q // max(1, heads_kv))
    tiles = batch * max(1, heads_kv) * ((rows + 63) // 64)
    return 64 < rows <= 128 and (max_splits == 0 or sm_count // max(1, tiles) <= 1)


def seesaw_by_shape(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits):
    """SEESAW = None's choice: the seesaw schedule on two_row_tiles_unsplit's launches, where it measured faster than
    the hand-over with the slot waits (see SEESAW)."""
    return two_row_tiles_unsplit(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits)


def early_release_by_shape(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits):
    """EARLY_RELEASE = None's choice: early_release=1 on two_row_tiles_unsplit's launches, where it measured faster
    than the release after the scores (see EARLY_RELEASE)."""
    return two_row_tiles_unsplit(sm_count, batch, seqlen_q, heads_q, heads_kv, max_splits)


def rows_strides(shape, strides):
    """(row, head) element strides of q [batch, seqlen_q, heads, d] read as rows [batch * seqlen_q, heads, d], or
    None where batch and seqlen_q do not merge into one row stride (the rows are then a copy)."""
    b, s = shape[0], shape[1]
    if s == 1:
        return strides[0], strides[2]
    if b == 1 or strides[0] == s * strides[1]:
        return strides[1], strides[2]
    return None


def launch_args(q_ptr, kv_ptr, out_ptr, lse_ptr, cu_ptr, seqused_ptr, table_ptr, batch, seqlen_q, heads_q, head_dim,
                q_rows, k_cache_shape, k_cache_strides, table_columns, table_stride, head_dim_v, softmax_scale):
    """The flashjit_attention_args_t of a launch: K and V both the latent cache (one pointer, one set of strides),
    O packed rows [batch * seqlen_q, heads_q, head_dim_v] (contiguous), LSE [heads_q, batch * seqlen_q]. No split
    fields (max_splits, the workspace: the caller's)."""
    num_pages, page_size, heads_kv = k_cache_shape[0], k_cache_shape[1], k_cache_shape[2]
    kv = _capi.Strides(*k_cache_strides[:3])
    args = _capi.new_args()
    args.q = q_ptr
    args.k = args.v = kv_ptr
    args.o, args.lse = out_ptr, lse_ptr
    args.batch, args.seqlen_q, args.seqlen_k = batch, seqlen_q, table_columns * page_size
    args.heads_q, args.heads_kv, args.head_dim = heads_q, heads_kv, head_dim
    args.q_strides = _capi.Strides(q_rows[0], q_rows[0], q_rows[1])
    args.k_strides = args.v_strides = kv
    o_row = heads_q * head_dim_v
    args.o_strides = _capi.Strides(o_row, o_row, head_dim_v)
    args.softmax_scale = softmax_scale
    args.cu_seqlens_q, args.seqused_k, args.block_table = cu_ptr, seqused_ptr, table_ptr
    args.block_table_batch_stride, args.page_size, args.num_pages = table_stride, page_size, num_pages
    args.total_q = batch * seqlen_q
    return args


# ---- the runtime: torch and the torch backend's devices (replaced by the CPU tests' stand-in) -----------------
class _TorchRuntime:
    """What a launch needs of torch: the device (the torch backend's: its flashjit context, loaded kernels, SM
    count, split workspaces), tensors, the current stream, the launch."""

    def __init__(self):
        import torch
        from . import _torch_backend
        self.torch, self.tb = torch, _torch_backend
        self.cu = {}        # (device, batch, seqlen_q) -> int32 [batch + 1]
        self.metadata = {}  # (device, batch) -> get_mla_metadata's placeholders

    def compiling(self):
        return self.torch.compiler.is_compiling()

    def capturing(self):
        return self.torch.cuda.is_current_stream_capturing()

    def device(self, index):
        return self.tb.device(index)

    def kernel(self, dev, spec):
        return dev.kernel(spec)  # fetched on the first call for the spec, never inside a capture (it raises)

    def empty(self, shape, dtype, like):
        return self.torch.empty(shape, dtype=dtype, device=like.device)

    def empty_lse(self, shape, strides, like):
        return self.torch.empty_strided(shape, strides, dtype=self.torch.float32, device=like.device)

    def cu_seqlens(self, batch, seqlen_q, device):
        """int32 [batch + 1] = 0, seqlen_q, 2 seqlen_q, ...: made once per device and shape outside captures
        (inside one, a fresh one the graph owns)."""
        if self.capturing():
            return self.torch.arange(batch + 1, dtype=self.torch.int32, device=device) * seqlen_q
        key = (device, batch, seqlen_q)
        t = self.cu.get(key)
        if t is None:
            if len(self.cu) > _MAX_PLANS:
                self.cu.clear()
            t = self.cu[key] = self.torch.arange(batch + 1, dtype=self.torch.int32, device=device) * seqlen_q
        return t

    def placeholders(self, cache_seqlens):
        """get_mla_metadata's (tile_scheduler_metadata int32 [0, 8], num_splits int32 [batch + 1] zeros) on
        cache_seqlens' device: made once per device and batch outside captures."""
        torch = self.torch
        device, batch = cache_seqlens.device, cache_seqlens.shape[0]

        def make():
            return (torch.zeros((0, METADATA_COLUMNS), dtype=torch.int32, device=device),
                    torch.zeros((batch + 1,), dtype=torch.int32, device=device))
        if self.capturing():
            return make()
        key = (device, batch)
        made = self.metadata.get(key)
        if made is None:
            if len(self.metadata) > _MAX_PLANS:
                self.metadata.clear()
            made = self.metadata[key] = make()
        return made

    def stream(self, index):
        return self.tb._raw_stream(index)

    def workspace(self, dev, spec, max_splits, args, total_q, heads_q, batch, seqlen_q, stream):
        """(pointer, bytes) of the launch's split workspace: the torch backend's, per stream (or, for a kernel
        whose workspace keeps counters, per stream and layout), from the graph's pool inside a capture."""
        tb = self.tb
        layout = tb._workspace_layout(dev, spec, max_splits, total_q, heads_q, batch, seqlen_q)
        return tb._workspace(dev, spec, max_splits, args, total_q, heads_q, stream, layout)

    def launch(self, dev, handle, args, stream):
        return dev.lib.forward(handle, ctypes.byref(args), stream)


_runtime = None


def _rt(fn):
    global _runtime
    if _runtime is None:
        try:
            _runtime = _TorchRuntime()
        except ImportError as e:
            raise RuntimeError(f"flashjit.{fn} needs PyTorch (2.x, CUDA build), which did not import here "
                               f"({type(e).__name__}: {e})") from None
    return _runtime


# ---- errors ------------------------------------------------------------------------------------------
def _fail(fn, name, what, exc=ValueError):
    raise exc(f"flashjit.{fn}: {name}: {what}")


def _lacks(fn, name, value, what):
    shape = getattr(value, "shape", None)
    shown = f"<tensor of shape {tuple(shape)}>" if shape is not None else repr(value)
    raise NotImplementedError(f"flashjit.{fn}: {name}={shown} is not supported ({what}); flashjit runs FlashMLA's "
                              "dense decode with a 16-bit latent cache")


def _python_name(field):
    """The argument a C field stands for: "args.q_strides.row" -> "q (its row stride)"."""
    name = field[5:] if field.startswith("args.") else field
    base, _, part = name.partition(".")
    base = base.split("[")[0]
    if base.endswith("_strides"):
        base = base[:-len("_strides")]
        return f"{_FIELD_NAMES.get(base, base)} (its {part or 'strides'} stride)"
    return _FIELD_NAMES.get(base, name)


def _library_error(lib, status, spec):
    """The library's last error on this thread, naming the argument: "flashjit.flash_mla_with_kvcache: q: ..."."""
    message = lib.lib.flashjit_last_error_message().decode()
    field = lib.lib.flashjit_last_error_field().decode()
    status_name = lib.lib.flashjit_status_string(status).decode()
    if field and message.startswith(field + ": "):
        message = message[len(field) + 2:]
    where = f"{_python_name(field)}: " if field else ""
    return FlashjitError(f"flashjit.flash_mla_with_kvcache: {where}{message} [attention_forward({spec}): "
                         f"{status_name}]", status=status_name, field=field)


# ---- get_mla_metadata ----------------------------------------------------------------------------------------
class MlaScheduleMeta:
    """get_mla_metadata's first value where it is called without cache_seqlens (FlashMLA's FlashMLASchedMeta
    form, whose get_mla_metadata takes no arguments): a placeholder flash_mla_with_kvcache accepts. Its fields are
    FlashMLASchedMeta's, for callers that read or set them; flashjit reads none."""

    def __init__(self):
        self.have_initialized = False
        self.config = None
        self.tile_scheduler_metadata = None
        self.num_splits = None

    def __repr__(self):
        return "MlaScheduleMeta(flashjit schedules each launch itself)"


# FlashMLA's get_mla_metadata arguments, by position, across its versions (the first one named the second
# num_heads_per_head_k; later ones num_q_tokens_per_head_k and added the last three).
_METADATA_ARGS = ("cache_seqlens", "num_q_tokens_per_head_k", "num_heads_k", "num_heads_q", "is_fp8_kvcache", "topk")
_METADATA_ALIASES = {"num_heads_per_head_k": "num_q_tokens_per_head_k"}


def get_mla_metadata(*args, **kwargs):
    """FlashMLA's get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k (or num_heads_per_head_k), num_heads_k,
    num_heads_q=None, is_fp8_kvcache=False, topk=None) -> (tile_scheduler_metadata, num_splits).

    flashjit needs no per-step schedule: each launch's split count comes from its upper bounds and the SM count,
    each sequence's split size from its length on the device. So nothing is computed here and nothing is
    synchronised. With cache_seqlens (int32 [batch]) the values are placeholders shaped like FlashMLA's first
    interface's, for engines that copy them into CUDA graph buffers: tile_scheduler_metadata int32 [0, 8] and
    num_splits int32 [batch + 1] of zeros on cache_seqlens' device (made once per device and batch, outside
    captures). Without arguments (FlashMLA's current form) it returns (MlaScheduleMeta(), None).
    flash_mla_with_kvcache accepts these values, any others, or None, and reads none of them. An FP8 cache
    (is_fp8_kvcache) and sparse attention (topk) raise NotImplementedError, as do several latent heads
    (num_heads_k > 1)."""
    fn = "get_mla_metadata"
    if len(args) > len(_METADATA_ARGS):
        raise TypeError(f"flashjit.{fn}: takes at most {len(_METADATA_ARGS)} positional arguments "
                        f"({', '.join(_METADATA_ARGS)}), got {len(args)}")
    given = dict(zip(_METADATA_ARGS, args))
    for name, value in kwargs.items():
        canonical = _METADATA_ALIASES.get(name, name)
        if canonical not in _METADATA_ARGS:
            raise TypeError(f"flashjit.{fn}: unexpected keyword argument '{name}'")
        if canonical in given:
            raise TypeError(f"flashjit.{fn}: got multiple values for argument '{name}'")
        given[canonical] = value
    if given.get("is_fp8_kvcache"):
        _lacks(fn, "is_fp8_kvcache", given["is_fp8_kvcache"], "FlashMLA's FP8 latent cache")
    if given.get("topk") is not None:
        _lacks(fn, "topk", given["topk"], "sparse attention")
    heads_k = given.get("num_heads_k")
    if heads_k is not None and heads_k != 1:
        _lacks(fn, "num_heads_k", heads_k, "more than one latent head")
    tokens = given.get("num_q_tokens_per_head_k")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        _fail(fn, "num_q_tokens_per_head_k", f"{tokens!r}; expected an int >= 1 (seqlen_q x heads_q / heads_k)")
    lens = given.get("cache_seqlens")
    if lens is None:
        return MlaScheduleMeta(), None
    if not hasattr(lens, "shape") or not hasattr(lens, "device"):
        _fail(fn, "cache_seqlens", f"expected an int32 torch.Tensor [batch], got {type(lens).__name__}", TypeError)
    if str(lens.dtype) != _INT32:
        _fail(fn, "cache_seqlens", f"dtype {lens.dtype}; expected torch.int32", TypeError)
    if len(lens.shape) != 1:
        _fail(fn, "cache_seqlens", f"expected 1 dimension [batch], got shape {tuple(lens.shape)}")
    return _rt(fn).placeholders(lens)


def flash_mla_sparse_fwd(*args, **kwargs):
    """FlashMLA's sparse prefill: not supported by flashjit (NotImplementedError)."""
    raise NotImplementedError("flashjit.flash_mla_sparse_fwd is not supported (sparse attention: flashjit runs "
                              "FlashMLA's dense decode, flash_mla_with_kvcache without indices)")


# ---- flash_mla_with_kvcache ------------------------------------------------------------------------------------
_plans = {}
_ARGS_FROM = _capi.AttentionArgs.from_buffer_copy
_PACK_IO = struct.Struct("<QQQQQ").pack_into      # q, k, v, o, lse at offset 8
_PACK_ENGINE = struct.Struct("<QQQQ").pack_into  # cu_seqlens_q, cu_seqlens_k, seqused_k, block_table
_ENGINE_AT = _capi.AttentionArgs.cu_seqlens_q.offset
_PACK_SCALES = struct.Struct("<QQ").pack_into    # k_scale, v_scale
_SCALES_AT = _capi.AttentionArgs.k_scale.offset
assert _capi.AttentionArgs.v_scale.offset == _SCALES_AT + 8
assert _capi.AttentionArgs.q.offset == 8 and _capi.AttentionArgs.lse.offset == 40


class _MlaPlan:
    """A checked call's launch (the fast path of later calls with the same shapes, strides, dtypes, devices and
    scalar arguments): the kernel, its argument bytes without pointers, the shapes of out and LSE, the query
    offsets tensor it points to."""
    __slots__ = ("dev", "handle", "spec", "template", "max_splits", "index", "cu", "out_shape", "lse_shape",
                 "lse_strides", "bounds", "kv_fp8")

    def __init__(self, dev, handle, spec, template, max_splits, index, cu, out_shape, lse_shape, lse_strides, bounds,
                 kv_fp8):
        self.dev, self.handle, self.spec, self.template = dev, handle, spec, template
        self.max_splits, self.index, self.cu = max_splits, index, cu
        self.out_shape, self.lse_shape, self.lse_strides, self.bounds = out_shape, lse_shape, lse_strides, bounds
        self.kv_fp8 = kv_fp8

    def __call__(self, rt, q, k_cache, block_table, cache_seqlens, kv_descale):
        out = rt.empty(self.out_shape, q.dtype, q)
        lse = rt.empty_lse(self.lse_shape, self.lse_strides, q)
        args = _ARGS_FROM(self.template)
        kv = k_cache.data_ptr()
        _PACK_IO(args, 8, q.data_ptr(), kv, kv, out.data_ptr(), lse.data_ptr())
        _PACK_ENGINE(args, _ENGINE_AT, self.cu.data_ptr(), 0, cache_seqlens.data_ptr(), block_table.data_ptr())
        if self.kv_fp8:  # V's codes are K's: one scale for both (the strides are the template's)
            scale = _scale_pointer(self.dev, kv_descale)
            _PACK_SCALES(args, _SCALES_AT, scale, scale)
        _launch(rt, self.dev, self.handle, self.spec, args, self.max_splits, self.index, *self.bounds)
        return out, lse


def _scale_pointer(dev, kv_descale):
    """An FP8 latent cache's scale pointer (K's and V's): kv_descale's, else the device's float32 1.0 (made once,
    outside captures)."""
    return kv_descale.data_ptr() if kv_descale is not None else dev.unit_scale()


def _launch(rt, dev, handle, spec, args, max_splits, index, total_q, heads_q, batch, seqlen_q):
    stream = rt.stream(index)
    if max_splits:
        args.workspace, args.workspace_bytes = rt.workspace(dev, spec, max_splits, args, total_q, heads_q, batch,
                                                            seqlen_q, stream)
    status = rt.launch(dev, handle, args, stream)
    if status != 0:
        raise _library_error(dev.lib, status, spec)


def _splits_hint(num_splits):
    """num_splits as flashjit reads it: a Python int is a hint (1 never splits, n > 1 caps, 0 chooses); FlashMLA's
    values (its tensor, None) leave the choice to flashjit."""
    return num_splits if isinstance(num_splits, int) and not isinstance(num_splits, bool) else 0


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata=None,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None, *, kv_descale=None):
    """FlashMLA's flash_mla_with_kvcache, dense decode: q [batch, seqlen_q, heads_q, 576] (bf16 or fp16), k_cache
    [num_blocks, page_block_size, 1, 576] of q's dtype (the latent cache; V is its first head_dim_v = 512 columns),
    block_table int32 [batch, max_blocks], cache_seqlens int32 [batch]. Returns (out [batch, seqlen_q, heads_q,
    512] of q's dtype, softmax_lse float32 [batch, heads_q, seqlen_q], natural log; strides (seqlen_q, batch x
    seqlen_q, 1): no copy, see the module's notes). causal: bottom-right aligned per sequence (MTP's seqlen_q > 1).
    softmax_scale None: 1 / sqrt(576). tile_scheduler_metadata and num_splits: accepted, not read (flashjit
    schedules itself); a Python int num_splits is flashjit's split hint (1 never splits, n > 1 at most n splits).
    flashjit extension: k_cache of torch.float8_e4m3fn is an FP8 latent cache (spec key kv_dtype=e4m3; V's codes
    are K's), dequantised by kv_descale (float32: one element, or [batch, 1] for one scale a sequence; None = 1.0);
    it runs the O-in-parts kernels whatever V_IN_K says. FlashMLA's own FP8 format (is_fp8_kvcache), sparse
    attention and attn_sink raise NotImplementedError naming the argument."""
    fn = "flash_mla_with_kvcache"
    if is_fp8_kvcache:
        _lacks(fn, "is_fp8_kvcache", is_fp8_kvcache, "FlashMLA's FP8 latent cache (656 bytes a token)")
    for name, value, what in (("indices", indices, "sparse attention"), ("topk_length", topk_length, "sparse attention"),
                              ("extra_k_cache", extra_k_cache, "sparse attention's extra cache"),
                              ("extra_indices_in_kvcache", extra_indices_in_kvcache, "sparse attention's extra cache"),
                              ("extra_topk_length", extra_topk_length, "sparse attention's extra cache"),
                              ("attn_sink", attn_sink, "attention sinks (FlashMLA's sparse decode)")):
        if value is not None:
            _lacks(fn, name, value, what)
    splits = _splits_hint(num_splits)
    rt = _rt(fn)
    if rt.compiling():
        raise NotImplementedError(f"flashjit.{fn} is not traceable by torch.compile yet; call it outside the compiled "
                                  "region (torch.compiler.disable) or from an opaque custom op")
    try:
        key = (q.shape, q.stride(), q.dtype, q.device, k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.device,
               block_table.shape, block_table.stride(), block_table.dtype, block_table.device,
               cache_seqlens.shape, cache_seqlens.stride(), cache_seqlens.dtype, cache_seqlens.device,
               head_dim_v, softmax_scale, bool(causal), splits, bool(V_IN_K), _switch(SEESAW), bool(PDL),
               bool(INLINE_COMBINE), bool(CHUNK_WAITS), _switch(EARLY_RELEASE), bool(HALF_RELEASE), bool(Q_REG_DIMS),
               None if kv_descale is None else (kv_descale.shape, kv_descale.stride(), kv_descale.dtype,
                                                kv_descale.device))
        plan = _plans.get(key)
    except (AttributeError, TypeError):  # an argument that is not a tensor (or a scale that is not hashable): the
        key = plan = None               # checks below name it
    if plan is not None:
        return plan(rt, q, k_cache, block_table, cache_seqlens, kv_descale)
    return _checked_call(fn, rt, key, q, k_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, causal,
                         splits, kv_descale)


def _check_tensor(fn, name, t, dims, layout):
    if not (hasattr(t, "shape") and hasattr(t, "stride") and hasattr(t, "dtype")):
        _fail(fn, name, f"expected a torch.Tensor {layout}, got {type(t).__name__}", TypeError)
    if len(t.shape) != dims:
        _fail(fn, name, f"expected {dims} dimensions {layout}, got shape {tuple(t.shape)}")
    if dims and t.shape[-1] > 1 and t.stride()[-1] != 1:
        _fail(fn, name, f"the last dimension must be contiguous (stride 1); strides {tuple(t.stride())}")


def _check_kv_descale(fn, t, kv_fp8, kd, where, batch):
    """kv_descale (flashjit extension): None, or with an FP8 latent cache a float32 tensor on q's device of one
    element or [batch, 1]. Returns its (batch stride, head stride) in elements ((0, 0): one scale)."""
    if t is None:
        return 0, 0
    if not kv_fp8:
        _fail(fn, "kv_descale", f"given with a {kd} latent cache; it dequantises an FP8 one (k_cache of {_E4M3})")
    if not (hasattr(t, "shape") and hasattr(t, "stride") and hasattr(t, "dtype")):
        _fail(fn, "kv_descale", f"expected a float32 torch.Tensor, got {type(t).__name__}", TypeError)
    if str(t.dtype) != _FLOAT32:
        _fail(fn, "kv_descale", f"dtype {t.dtype}; expected {_FLOAT32}", TypeError)
    if t.device != where:
        _fail(fn, "kv_descale", f"is on {t.device}; expected {where} (where q is)")
    strides = _plan.descale_strides(t.shape, t.stride(), batch, 1)
    if strides is None:
        _fail(fn, "kv_descale", f"shape {tuple(t.shape)}; expected one element (one scale for the cache) or "
                                f"[batch, 1] = [{batch}, 1] (one a sequence)")
    return strides


def _check_metadata(fn, name, t, dims, layout, where, batch):
    if t is None:
        _fail(fn, name, f"is required (int32 {layout}); FlashMLA takes None only with indices (sparse attention)")
    _check_tensor(fn, name, t, dims, layout)
    if str(t.dtype) != _INT32:
        _fail(fn, name, f"dtype {t.dtype}; expected torch.int32", TypeError)
    if t.device != where:
        _fail(fn, name, f"is on {t.device}; expected {where} (where q is)")
    if t.shape[0] != batch:
        _fail(fn, name, f"has {t.shape[0]} rows; expected q's batch {batch}")


def _checked_call(fn, rt, key, q, k_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, causal, splits,
                  kv_descale):
    _check_tensor(fn, "q", q, 4, "[batch, seqlen_q, heads_q, head_dim]")
    _check_tensor(fn, "k_cache", k_cache, 4, "[num_blocks, page_block_size, 1, head_dim]")
    qd, kd = str(q.dtype), str(k_cache.dtype)
    if qd not in _DTYPES:
        _fail(fn, "q", f"dtype {qd} is not supported; FlashMLA's dense decode takes torch.bfloat16 or "
                       "torch.float16", TypeError)
    kv_fp8 = kd == _E4M3
    if kd != qd and not kv_fp8:
        if "float8" in kd or "uint8" in kd or "int8" in kd:
            _lacks(fn, "k_cache", k_cache, f"an FP8 latent cache of {kd} under a {qd} q; flashjit's FP8 latent cache "
                                           f"is {_E4M3}, dequantised by kv_descale")
        _fail(fn, "k_cache", f"dtype {kd} differs from q's {qd}", TypeError)
    if not getattr(q, "is_cuda", False):
        _fail(fn, "q", f"is on {q.device}; flashjit runs on CUDA devices")
    where = q.device
    if k_cache.device != where:
        _fail(fn, "k_cache", f"is on {k_cache.device}, q on {where}")
    batch, seqlen_q, heads_q, head_dim = q.shape
    num_blocks, page_size, heads_kv, head_dim_k = k_cache.shape
    if head_dim not in MLA_HEAD_DIMS:
        _fail(fn, "q", f"head dim {head_dim}; FlashMLA's decode takes {MLA_HEAD_DIMS[0]} (512 latent + 64 rotary) or "
                       f"{MLA_HEAD_DIMS[1]}")
    if head_dim_k != head_dim:
        _fail(fn, "k_cache", f"head dim {head_dim_k} differs from q's {head_dim} (K is the whole latent cache row)")
    if isinstance(head_dim_v, bool) or not isinstance(head_dim_v, int) or head_dim_v != MLA_HEAD_DIM_V:
        _fail(fn, "head_dim_v", f"{head_dim_v!r}; FlashMLA's decode takes {MLA_HEAD_DIM_V} only (V is the latent "
                                f"cache's first {MLA_HEAD_DIM_V} columns)")
    if heads_kv != 1:
        _lacks(fn, "k_cache", k_cache, f"{heads_kv} latent heads (k_cache.shape[2]); flashjit's MLA decode takes one")
    if page_size < 1 or num_blocks < 1:
        _fail(fn, "k_cache", f"shape {tuple(k_cache.shape)}: no pages")
    _check_metadata(fn, "block_table", block_table, 2, "[batch, max_num_blocks_per_seq]", where, batch)
    _check_metadata(fn, "cache_seqlens", cache_seqlens, 1, "[batch]", where, batch)
    scale_strides = _check_kv_descale(fn, kv_descale, kv_fp8, kd, where, batch)
    if softmax_scale is None:
        scale = head_dim ** -0.5
    else:
        try:
            scale = float(softmax_scale)
        except (TypeError, ValueError):
            scale = float("nan")
        if not (math.isfinite(scale) and scale > 0):
            _fail(fn, "softmax_scale", f"{softmax_scale!r}; expected a finite float > 0 (None: 1 / sqrt({head_dim}))")
    out_shape = (batch, seqlen_q, heads_q, head_dim_v)
    total_q = batch * seqlen_q
    lse_shape, lse_strides = (batch, heads_q, seqlen_q), (seqlen_q, total_q, 1)
    if total_q == 0 or heads_q == 0:  # nothing to launch (FlashMLA refuses batch 0; empty results here)
        return rt.empty(out_shape, q.dtype, q), rt.empty_lse(lse_shape, lse_strides, q)
    table_columns = block_table.shape[1]
    if table_columns == 0:  # no key for any sequence: O = 0, LSE = -inf, no launch
        out, lse = rt.empty(out_shape, q.dtype, q), rt.empty_lse(lse_shape, lse_strides, q)
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    q_rows = rows_strides(q.shape, q.stride())
    if q_rows is None:  # [batch, seqlen_q] do not merge into one row stride: the rows are a copy
        q = q.contiguous()
        q_rows, key = rows_strides(q.shape, q.stride()), None
    index = q.get_device()
    dev = rt.device(index)
    spec, max_splits = mla_plan(dev.sm_count, _DTYPES[qd], head_dim, head_dim_v, causal, batch, seqlen_q, heads_q,
                                heads_kv, splits, bool(V_IN_K), kv_fp8, _switch(SEESAW), bool(INLINE_COMBINE),
                                bool(CHUNK_WAITS), _switch(EARLY_RELEASE), bool(HALF_RELEASE), bool(Q_REG_DIMS))
    handle = rt.kernel(dev, spec)
    cu = rt.cu_seqlens(batch, seqlen_q, where)
    out, lse = rt.empty(out_shape, q.dtype, q), rt.empty_lse(lse_shape, lse_strides, q)
    kv = k_cache.data_ptr()
    args = launch_args(q.data_ptr(), kv, out.data_ptr(), lse.data_ptr(), cu.data_ptr(), cache_seqlens.data_ptr(),
                       block_table.data_ptr(), batch, seqlen_q, heads_q, head_dim, q_rows, k_cache.shape,
                       k_cache.stride(), table_columns, block_table.stride()[0], head_dim_v, scale)
    args.max_splits = max_splits
    args.flags = _capi.FLAG_PDL if PDL else 0
    if kv_fp8:  # V's codes are K's: one scale for both
        args.k_scale = args.v_scale = _scale_pointer(dev, kv_descale)
        args.k_scale_batch_stride, args.k_scale_head_stride = scale_strides
        args.v_scale_batch_stride, args.v_scale_head_stride = scale_strides
    bounds = (total_q, heads_q, batch, seqlen_q)
    template = bytes(args)
    _launch(rt, dev, handle, spec, args, max_splits, index, *bounds)
    if key is not None and not rt.capturing():  # a checked call: later calls like it take the fast path
        if len(_plans) > _MAX_PLANS:
            _plans.clear()
        _plans[key] = _MlaPlan(dev, handle, spec, template, max_splits, index, cu, out_shape, lse_shape, lse_strides,
                               bounds, kv_fp8)
    return out, lse
