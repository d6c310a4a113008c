/* flashjit: FlashAttention-3-style attention forward kernels for NVIDIA Hopper (sm_90a), compiled
 * at run time with NVRTC, cached on disk, launched through the CUDA driver API.
 *
 * The C API (C99; also compiles as C++). The shared library exports these functions and nothing
 * else; include/flashjit/flashjit.hpp wraps them in header-only C++.
 *
 * LIFECYCLE CONTRACT (this is the one place it is written down)
 *   may compile (NVRTC, about a second per kernel; a spec may need two, see long_seqlen_spec):
 *       flashjit_kernel_get, flashjit_prewarm, flashjit_cache_export   -- JIT policy only; under the
 *       cache-only policy a miss is FLASHJIT_ERROR_NOT_COMPILED at once and nothing is compiled.
 *       NVRTC is loaded on the first compile, never linked (libnvrtc.so.13 as the dynamic loader finds
 *       it, or the file $FLASHJIT_NVRTC names); without it a compile is FLASHJIT_ERROR_DRIVER_UNAVAILABLE
 *       and the rest works, hits on kernels compiled by the NVRTC version of flashjit's build included.
 *   may load a module into a CUDA context:  flashjit_kernel_get only.
 *   may allocate host memory / touch the disk: every function except the hot path below.
 *   hot path: flashjit_attention_forward. It never allocates (host or device), never synchronises,
 *       never copies from the host, never compiles or loads; it picks the handle's kernel for the
 *       shape (see flashjit_kernel_info_t.long_seqlen_spec), encodes the TMA descriptors (or
 *       reuses the ones it encoded for the same arguments: a handle remembers about 64 argument
 *       sets, an engine's layers each with its own buffers) and makes one cuLaunchKernelEx
 *       call on the caller's stream (split_kv=1: two, the attention kernel and its combine, the
 *       second with PDL). It is safe to capture in a CUDA graph: a replay reruns the
 *       kernel with the arguments given at capture (the same device addresses, new data in them).
 *   not capture-safe: flashjit_kernel_get (module load), and anything that compiles. Get every
 *       kernel before capturing: a module load on another thread can invalidate a capture made in
 *       cudaStreamCaptureModeGlobal.
 *
 * OWNERSHIP AND THREADS
 *   A context is one CUDA context (a device's primary context, or one the caller passes in) plus a
 *   kernel cache and a compile policy. Contexts with the same cache settings share one in-process
 *   cache, so a kernel compiled for one is a memory hit for the others.
 *   A kernel keeps its context alive: flashjit_context_destroy drops the caller's reference, and the
 *   context (its modules, its retained primary context) goes away with its last kernel.
 *   All functions may be called from any thread at the same time, including
 *   flashjit_attention_forward on one kernel; only releasing a handle must not race with its use.
 *
 * ERRORS
 *   Every function that can fail returns a flashjit_status_t. flashjit_last_error_message() holds
 *   the detail of the last failed call on the calling thread ("args.q_strides.row: -8 is not
 *   allowed; ..."), and flashjit_last_error_field() the offending field; both are empty after a
 *   call that succeeded. No function lets a C++ exception escape.
 *
 * STRUCTS AND ABI
 *   Every struct passed in or out starts with uint32_t struct_size, which the caller sets to
 *   sizeof(the struct) as its header declares it. Fields are only ever appended, each new one with an
 *   "off" value, so a caller built against an older header passes a smaller struct and gets the old
 *   behaviour. A struct larger than this library knows is accepted when the bytes it does not know
 *   are all zero, and refused otherwise (a newer feature this library does not have). Enums are
 *   int32_t with explicit values that are never reused. FLASHJIT_ABI_VERSION changes only when an
 *   existing declaration changes incompatibly; check it once with flashjit_check_abi.
 */
#ifndef FLASHJIT_FLASHJIT_H_
#define FLASHJIT_FLASHJIT_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define FLASHJIT_API __attribute__((visibility("default")))
#else
#define FLASHJIT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ---------------------------------------------------------------------------------- */

#define FLASHJIT_VERSION_MAJOR 0
#define FLASHJIT_VERSION_MINOR 4
#define FLASHJIT_VERSION_PATCH 0
/* Packed as major * 10000 + minor * 100 + patch (0.1.0 -> 100). */
#define FLASHJIT_MAKE_VERSION(major, minor, patch) ((uint32_t)((major) * 10000 + (minor) * 100 + (patch)))
#define FLASHJIT_VERSION FLASHJIT_MAKE_VERSION(FLASHJIT_VERSION_MAJOR, FLASHJIT_VERSION_MINOR, FLASHJIT_VERSION_PATCH)
/* The ABI this header describes. */
#define FLASHJIT_ABI_VERSION 1u

/* ---- status ------------------------------------------------------------------------------------ */

typedef int32_t flashjit_status_t;
enum flashjit_status_values {
  FLASHJIT_SUCCESS = 0,
  FLASHJIT_ERROR_INVALID_ARGUMENT = 1,   /* null pointer, struct_size, or a field out of range */
  FLASHJIT_ERROR_INVALID_SPEC = 2,       /* spec malformed or asks for what flashjit does not support */
  FLASHJIT_ERROR_NOT_COMPILED = 3,       /* cache-only policy and the kernel is not in the cache */
  FLASHJIT_ERROR_COMPILE_FAILED = 4,     /* NVRTC rejected the kernel (the message holds its log) */
  FLASHJIT_ERROR_RESOURCE_BUDGET = 5,    /* the compiled kernel breaks a resource rule */
  FLASHJIT_ERROR_DRIVER_UNAVAILABLE = 6, /* no libcuda.so.1, or no device; or no NVRTC to compile */
  FLASHJIT_ERROR_UNSUPPORTED_DEVICE = 7, /* the device is not a Hopper (sm_90) GPU */
  FLASHJIT_ERROR_WRONG_CONTEXT = 8,      /* the stream belongs to another CUDA context than the kernel */
  FLASHJIT_ERROR_DRIVER = 9,             /* a CUDA driver call failed (the message names it) */
  FLASHJIT_ERROR_CACHE_IO = 10,          /* a cache or bundle file could not be read or written */
  FLASHJIT_ERROR_INVALID_BUNDLE = 11,    /* a cache bundle is corrupt or from another build */
  FLASHJIT_ERROR_ABI_MISMATCH = 12,      /* flashjit_check_abi: header and library disagree */
  FLASHJIT_ERROR_OUT_OF_MEMORY = 13,     /* host memory */
  FLASHJIT_ERROR_INTERNAL = 14,          /* a bug in flashjit; the message says what happened */
  FLASHJIT_STATUS_FORCE_32BIT = 0x7fffffff
};

/* ---- enums ------------------------------------------------------------------------------------- */

typedef int32_t flashjit_compile_policy_t;
enum flashjit_compile_policy_values {
  FLASHJIT_COMPILE_POLICY_JIT = 0,        /* compile on a cache miss (default) */
  FLASHJIT_COMPILE_POLICY_CACHE_ONLY = 1, /* a miss is FLASHJIT_ERROR_NOT_COMPILED at once */
  FLASHJIT_COMPILE_POLICY_FORCE_32BIT = 0x7fffffff
};

typedef int32_t flashjit_cache_mode_t;
enum flashjit_cache_mode_values {
  FLASHJIT_CACHE_DISK = 0,        /* memory in front of the disk cache directory (default) */
  FLASHJIT_CACHE_MEMORY_ONLY = 1, /* no disk: nothing is read from or written to a directory */
  FLASHJIT_CACHE_MODE_FORCE_32BIT = 0x7fffffff
};

typedef int32_t flashjit_dtype_t;
enum flashjit_dtype_values {
  FLASHJIT_DTYPE_FP16 = 1,
  FLASHJIT_DTYPE_BF16 = 2,
  FLASHJIT_DTYPE_FP32 = 3, /* sinks only (flashjit_attention_args_t.sinks_dtype), not a kernel's dtype */
  FLASHJIT_DTYPE_E4M3 = 4, /* FP8 e4m3fn: a kernel's Q, K and V with spec dtype=e4m3 (O is out_dtype's) */
  FLASHJIT_DTYPE_FORCE_32BIT = 0x7fffffff
};

/* Where flashjit_kernel_get found a kernel. */
typedef int32_t flashjit_kernel_source_t;
enum flashjit_kernel_source_values {
  FLASHJIT_KERNEL_FROM_MEMORY = 0,   /* already in this process */
  FLASHJIT_KERNEL_FROM_DISK = 1,     /* the cache directory */
  FLASHJIT_KERNEL_COMPILED = 2,      /* compiled by this call */
  FLASHJIT_KERNEL_SOURCE_FORCE_32BIT = 0x7fffffff
};

/* ---- handles ----------------------------------------------------------------------------------- */

typedef struct flashjit_context_s* flashjit_context_t;
typedef struct flashjit_kernel_s* flashjit_kernel_t;

/* options.device for a context without a GPU: it can check, prewarm, export and import kernels,
 * but not get or launch them. It needs no CUDA driver. */
#define FLASHJIT_DEVICE_NONE (-1)

/* ---- structs ----------------------------------------------------------------------------------- */

typedef struct flashjit_context_options {
  uint32_t struct_size;                     /* sizeof(flashjit_context_options_t) */
  int32_t device;                           /* device ordinal, or FLASHJIT_DEVICE_NONE; default 0 */
  void* cu_context;                         /* a CUcontext to use instead of the device's primary
                                               context (then device is ignored); NULL = primary.
                                               The caller keeps it alive as long as the context. */
  const char* cache_dir;                    /* NULL or "": $FLASHJIT_CACHE_DIR, else
                                               $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit */
  flashjit_compile_policy_t compile_policy; /* default FLASHJIT_COMPILE_POLICY_JIT */
  flashjit_cache_mode_t cache_mode;         /* default FLASHJIT_CACHE_DISK */
  uint64_t max_cache_bytes;                 /* disk cache cap, least recently used evicted; 0 = none */
} flashjit_context_options_t;

typedef struct flashjit_context_info {
  uint32_t struct_size;                     /* in: sizeof(flashjit_context_info_t) */
  int32_t device;                           /* ordinal, or FLASHJIT_DEVICE_NONE */
  void* cu_context;                         /* the CUcontext kernels are loaded in (NULL: none) */
  const char* cache_dir;                    /* the directory in use; "" when memory only. Owned by
                                               the context. */
  flashjit_compile_policy_t compile_policy;
  flashjit_cache_mode_t cache_mode;         /* the mode in effect (an unusable directory: memory) */
  int32_t cache_writable;                   /* 1 when new kernels are written to the directory */
  int32_t reserved0;                        /* 0 */
} flashjit_context_info_t;

typedef struct flashjit_kernel_info {
  uint32_t struct_size;                     /* in: sizeof(flashjit_kernel_info_t) */
  int32_t device;
  const char* spec;                         /* the resolved spec (every tile field filled in) */
  const char* kernel_name;                  /* the entry point in the cubin */
  const char* cache_key;                    /* 64 hex characters */
  /* The strings above are owned by the kernel and live as long as it. */
  flashjit_dtype_t dtype;
  int32_t head_dim;
  int32_t causal;                           /* 0 or 1 */
  int32_t block_m;                          /* query rows per thread block */
  int32_t block_n;                          /* keys per K/V tile */
  int32_t threads_per_block;
  int32_t registers;                        /* per thread, as the driver loaded it */
  int32_t local_bytes;                      /* local memory per thread (spills, stack) */
  int32_t spill_bytes;                      /* ptxas: spill stores + loads */
  int32_t dynamic_smem_bytes;               /* requested at each launch */
  int32_t static_smem_bytes;
  flashjit_kernel_source_t source;          /* where flashjit_kernel_get found it */
  /* Appended in 0.1 (a caller with the 80-byte layout gets the fields above only). A spec that leaves
   * the warpgroup count at auto may run a second kernel for long sequences (with a causal mask: head
   * dim <= 64, and head dims 192 and 256 with the cluster at auto too): launches whose seqlen_q and
   * seqlen_k are both at least long_seqlen_min run it, and so do the shorter ones that the fields
   * appended in 0.2 describe. The fields above describe the other kernel, which runs every other
   * launch. flashjit_kernel_launch_spec names the kernel that given arguments run. */
  const char* long_seqlen_spec;             /* its resolved spec; NULL when one kernel runs at every length */
  int64_t long_seqlen_min;                  /* 0 when long_seqlen_spec is NULL */
  /* Appended in 0.2 (a caller with the 96-byte layout gets the fields above only). Launches whose
   * lengths are both at least long_seqlen_min_uneven (and not both at least long_seqlen_min) run
   * the long-sequence kernel where the other kernel's persistent grid, one CTA per SM of the
   * device, would use less than long_uneven_use_percent percent of the rounds its causal tile
   * pairs take: pairs = ceil(tiles / 2) with tiles = batch x heads_q x ceil(seqlen_q / block_m),
   * rounds = ceil(pairs / SMs), used = pairs / (rounds x SMs), rounded down to a whole percent. */
  int64_t long_seqlen_min_uneven;           /* 0 when no such launches */
  int32_t long_uneven_use_percent;          /* 0 when no such launches */
  int32_t reserved1;                        /* 0 */
} flashjit_kernel_info_t;

/* Element strides of a [batch, seqlen, heads, head_dim] tensor whose head_dim is contiguous. Each
 * must be positive, a multiple of 8 elements (16 bytes: TMA) and below 2^39. */
typedef struct flashjit_tensor_strides {
  int64_t batch;
  int64_t row;  /* between sequence positions */
  int64_t head;
} flashjit_tensor_strides_t;

/* One attention forward: O = softmax(scale * Q K^T [+ causal mask]) V, per head, with GQA/MQA
 * (heads_q a multiple of heads_kv). Q, K, V, O are 16-bit (the kernel's dtype) device arrays laid out
 * [batch, seqlen, heads, head_dim] with the strides given (V and O: head_dim_v, the spec's, which is
 * head_dim unless set; FP8: FP8 K/V CACHE and FP8 OPERANDS below); LSE is float [batch, heads_q, seqlen_q]
 * contiguous (natural log; -inf for a row that sees no key). A causal mask is aligned to the
 * bottom-right corner when seqlen_q != seqlen_k. Sliding windows, attention chunks, soft caps,
 * learnable sinks and ALiBi: MASKS AND SCORES below.
 *
 * ENGINE INPUTS (spec keys varlen=1 and paged=1, independent of each other; both 0 = dense)
 *   varlen=1: packed variable-length queries. cu_seqlens_q is int32 [batch + 1] on the device
 *     (query row offsets, cu_seqlens_q[0] = 0, non-decreasing); Q and O are [total_q, heads_q, dim]
 *     with the row and head strides given (q_strides.batch and o_strides.batch are ignored);
 *     seqlen_q is an upper bound of every sequence's query count (FA3's max_seqlen_q); LSE is
 *     float [heads_q, total_q]. K/V are packed too, [total_k, heads_kv, dim] with cu_seqlens_k
 *     int32 [batch + 1], or [batch, seqlen_k, heads_kv, dim] as in a dense call, or paged.
 *   paged=1: K and V through a block table. block_table is int32 [batch][block_table_batch_stride]
 *     (at least ceil(seqlen_k / page_size) entries a sequence); the pools are [num_pages,
 *     page_size, heads_kv, dim] with k_strides.batch / v_strides.batch the page stride, so NHD,
 *     HND, K and V in one tensor or in two all work without copies; seqused_k int32 [batch] (keys
 *     per sequence) is required; page_size is any value from 1 up. A page index outside
 *     [0, num_pages) never makes the kernel touch memory outside the pool (it reads zeros).
 *   seqused_k (varlen or paged): keys per sequence; seqlen_k is then an upper bound.
 *   K/V past a sequence's keys (a dense cache past seqused_k, a page's slots past the sequence's
 *   end, unused pages) may hold anything, NaN included: no output reads it.
 *   Causal masks are bottom-right aligned per sequence. A sequence may have zero queries or zero
 *   keys; a row that sees no key gets O = 0 and LSE = -inf.
 *   The kernel reads every per-sequence value on the device, so a CUDA graph captured once stays
 *   correct when replayed after the lengths, the block table and the active sequences change
 *   within the captured upper bounds (batch, seqlen_q, seqlen_k, total_q, total_k, num_pages):
 *   give an inactive sequence zero queries. Device metadata is trusted on the hot path; check it
 *   off the hot path with flashjit_check_engine_metadata.
 *
 * DECODE (spec keys pack_gqa=1 and split_kv=1, both with varlen=1; K/V packed, dense or paged)
 *   pack_gqa=1: the query heads that share a K/V head fill one tile's rows together (with their
 *     queries: 1..16 a sequence in decode, any number in a mixed batch), so each K/V block is read
 *     once per K/V head. The heads packed per tile are the largest power of two dividing
 *     heads_q / heads_kv (at most block_m).
 *   split_kv=1: each sequence's keys are cut into up to max_splits splits, each done by its own
 *     CTAs, which write a float32 partial O and LSE to the caller's workspace; a second kernel,
 *     launched by the same call (with PDL when the flag is set), merges them into O and LSE. The
 *     launch's split count comes from the upper bounds and the device's SM count (every SM gets
 *     work), at most max_splits; each sequence's split size from its own length on the device, so
 *     a graph captured once stays correct across new lengths. With split_keys > 0 every split
 *     holds split_keys keys whatever else is in the batch, so a sequence's O and LSE are bitwise
 *     the same in any batch (deterministic serving); its keys must fit max_splits splits
 *     (seqlen_k <= max_splits x split_keys). The workspace holds max_splits x total_q x heads_q
 *     rows of head_dim_v + 1 floats (flashjit_attention_workspace_size); size it once for the
 *     largest step. A mixed batch's total_q counts prefill rows too: a smaller workspace (at least
 *     one split's) caps the launch's split count at what it holds. A sequence whose keys make one
 *     split writes O and LSE directly (no partials).
 *   combine=kernel|inline (split_kv=1; kernel by default): inline merges the splits in the
 *     attention kernel instead of the second kernel: the last CTA to finish a tile's rows merges
 *     their splits, so a call is one launch. Only where a tile's rows are few (seqlen_q x the
 *     packed heads at most 16: decode and short speculative steps); a launch with more runs the
 *     second kernel as combine=kernel does. It counts the splits in with counters in the
 *     workspace (before the partials; flashjit_attention_workspace_size counts them): zero the
 *     workspace once when it is allocated, as for scheduler=dynamic; every launch leaves the
 *     counters at zero, one that faulted or was cut short does not, and
 *     flashjit_check_engine_metadata names the first one left set (args.workspace).
 *
 * SCHEDULER (spec key scheduler=static|dynamic; static by default)
 *   static: the persistent grid's CTAs take their tiles by a fixed deal fitted on the host (causal
 *     tiles in pairs of equal cost, a head's heaviest query block with its lightest, also where
 *     the lengths are read on the device; light blocks held back where the host knows them).
 *   dynamic: each CTA takes its next tile from a counter when it is ready for one, head after
 *     head and each head's heaviest query blocks first, so tiles whose costs only the device
 *     knows (ragged varlen batches) balance themselves while the CTAs in flight share few heads'
 *     K/V in L2. The counter is two words at the start of the caller's workspace (256 bytes,
 *     before any split partials: flashjit_attention_workspace_size counts them); zero it once
 *     when it is allocated: every launch leaves it at zero, so a graph replays with it as
 *     captured; one that faulted or was cut short leaves it set, and
 *     flashjit_check_engine_metadata names it (args.workspace). Launches that share a workspace
 *     must not run at the same time. Not with ctas_per_sm=2, consumer_wgs=3, cluster=2, or tiles
 *     that leave room for one Q buffer only (head dims above 128 at the default tiles).
 *   A workspace that holds counters (scheduler=dynamic, combine=inline) is shared only among
 *     launches of the same spec and upper bounds (a model's layers in one step, a graph's
 *     replays): another spec's or other bounds' split partials would land on the counters.
 *
 * MASKS AND SCORES (spec keys window=1, chunk=1, softcap=1, sinks=1, alibi=1; each off by default,
 * compiled in only where asked for; they combine with each other, causal and the engine inputs)
 *   Positions are bottom-right aligned per sequence: query row i of a sequence with sq queries and
 *   sk keys sits at key position p = i + sk - sq.
 *   window=1: window_left, window_right. Row i sees keys j with p - window_left <= j <= p +
 *     window_right; -1 leaves that side unbounded. causal is (-1, 0) and composes with a left
 *     bound: with causal=1 the right side is 0 whatever window_right holds (FlashAttention-3's
 *     (left, 0) sliding window is causal=1 with window_left = left).
 *   chunk=1: attention_chunk C >= 1 (Llama 4's chunked local attention). Row i sees only the keys
 *     of its own chunk, j / C == p / C, together with causal and the window.
 *   softcap=1: softcap c > 0. Each score becomes c * tanh(score * softmax_scale / c), before the
 *     mask (FlashAttention-3's order).
 *   sinks=1: sinks points to one logit per query head, [heads_q], float32 or bf16 (sinks_dtype
 *     FLASHJIT_DTYPE_FP32 or FLASHJIT_DTYPE_BF16), not scaled. The sink joins every row's softmax
 *     denominator as a key with no value: O = sum_j exp(x_j) v_j / (sum_j exp(x_j) + exp(s_h)).
 *     LSE includes the sink, log(sum_j exp(x_j) + exp(s_h)), as vLLM's s_aux and
 *     FlashAttention-4's learnable_sink define it. Under split_kv=1 the sink counts once, in the
 *     merge (the combine kernel's or the inline one), never in a split's partial.
 *   alibi=1: alibi_slopes points to float32 slopes, [heads_q] for every sequence
 *     (alibi_batch_stride 0) or [batch][alibi_batch_stride] (alibi_batch_stride >= heads_q). The
 *     bias -slope * |p - j| is added to the scaled score (FlashAttention-2's definition).
 *   A row that sees no key gets O = 0 and LSE = -inf; with a sink, O = 0 and LSE = the sink's logit.
 *   The sizes, the cap and the pointers are read at each launch, not compiled in: a CUDA graph
 *   replays with them as captured (the tensors' contents may change between replays).
 *   Each field needs its spec key: softcap (softcap=1), window_left and window_right (window=1),
 *   attention_chunk (chunk=1), sinks and sinks_dtype (sinks=1), alibi_slopes and alibi_batch_stride
 *   (alibi=1). A value that is not off, passed to a kernel whose spec lacks the key, is refused
 *   naming the field and the key ("args.window_left: 127 needs spec key window=1"); so are
 *   window_left or window_right below -1, attention_chunk below 0, a softcap negative or not finite,
 *   a sinks_dtype other than those two (0 with no sinks). Off values: softcap 0, window -1, chunk 0,
 *   pointers 0; flashjit_attention_args_init sets them all.
 *
 * FP8 K/V CACHE (spec key kv_dtype=e4m3; off by default)
 *   K and V (contiguous, packed or paged, as above) hold e4m3 (float8_e4m3fn: 1 sign, 4 exponent,
 *   3 mantissa bits, max 448, no infinities) while Q and O stay dtype. Their strides count bytes and
 *   must be multiples of 16, their pointers 16-byte aligned. The value a key or value element
 *   stands for is e4m3 x scale, with k_scale / v_scale float32 at batch x *_scale_batch_stride + K/V
 *   head x *_scale_head_stride: one scale per tensor (both strides 0: vLLM's k_scale and v_scale),
 *   per K/V head (0, 1), or per sequence and K/V head (heads_kv, 1: FlashAttention-3's descale
 *   [batch, heads_kv]). Both scale pointers are required with the key (pass 1.0 for none) and
 *   refused without it. The kernel widens each block to dtype in shared memory (the scale applied in
 *   float, then one rounding to dtype) and runs the 16-bit math: error against float64 on the
 *   dequantised cache at the 16-bit kernel's level. Keys past a sequence are never read. Head dims
 *   to 576 (MLA's e4m3 latent cache: v = k with the same strides and v_scale = k_scale, V's
 *   codes being K's first head_dim_v bytes of each row).
 *
 * FP8 OPERANDS (spec dtype=e4m3, with out_dtype=bf16 (default) or fp16; FlashAttention-3's FP8)
 *   Q, K and V are all e4m3 (strides in bytes, multiples of 16), O is out_dtype, LSE float32. The
 *   descales are FlashAttention-3's q_descale, k_descale, v_descale: q_scale, k_scale and v_scale
 *   above, indexed by sequence and K/V head as there (a query head uses its K/V head's); k_scale and
 *   v_scale are required, q_scale 0 means 1. Scores are q.k x q_descale x k_descale x softmax_scale;
 *   P is rounded to e4m3 for the P V GEMM (as FlashAttention-3 does) and O multiplied by v_descale.
 *   Head dims that are multiples of 32, at most 256; not with softcap=1 or alibi=1 yet. */
/* MLA SPLIT FORM (spec key qv=1; off by default; FlashAttention-3's qv)
 *   DeepSeek's absorbed MLA with the query and the latent cache each in two tensors, as
 *   FlashAttention-3's flash_attn_with_kvcache(q, k_cache, v_cache, qv=qv) takes them: qv
 *   [.., heads_q, head_dim_v] and v [.., heads_kv, head_dim_v] (the latent part; V is the values
 *   too), q [.., heads_q, head_dim - head_dim_v] and k [.., heads_kv, head_dim - head_dim_v] (the
 *   rotary part). Scores are (q . k + qv . v) x softmax_scale, O = P V with head_dim_v columns; the
 *   default scale is 1/sqrt(head_dim), FlashAttention-3's (q's + qv's columns)^-0.5. The spec's
 *   head_dim is the sum (576 = 64 + 512) and head_dim_v the latent width; both parts are multiples
 *   of 64. q_strides and k_strides describe q and k; qv_strides qv; every layout above applies
 *   (packed, paged: k and v pools share num_pages and page_size, each its own page stride). V is
 *   read for the scores and for P V from the same memory: with the latent rows stored
 *   [latent | rotary] in one cache, v and k are views of it (k = v + head_dim_v elements). */
/* MLA LATENT CACHE READ ONCE (spec key v_in_k=1; off by default)
 *   V is K's first head_dim_v columns: pass v = k with v_strides = k_strides (anything else is
 *   refused, naming args.v or args.v_strides). The kernel loads each K/V block once and reads V from
 *   it; a tile's two consumer warpgroups share its 64 rows, the first computing the scores and each
 *   computing half of O. head_dim_v 384 or 512 (MLA's absorbed 576/512); with varlen=1 or paged=1;
 *   16-bit dtypes; with combine=inline the last split of a tile merges in the kernel as elsewhere
 *   (both warpgroups' halves of O counted once). With qv=1 (MLA SPLIT FORM above) v and k stay two
 *   tensors: the K tile's first head_dim_v columns are loaded from v, so V is in the loaded block
 *   just the same. The same inputs and results as the spec without the key.
 *   paired=1 (off by default) is the same pairing of the warpgroups with V in its own ring, for any
 *   head_dim_v of 384 or 512 (Gemma 4's 512/512): the scores once per tile, where the default
 *   computes O in two parts that each compute them. seesaw=1 (off by default; with v_in_k=1 at
 *   head_dim_v 512 above head_dim 512) changes only the schedule: the two warpgroups take the
 *   blocks in turns, each computing one block's scores; the same inputs and results.
 *   chunk_waits=1 (off by default; with v_in_k=1, either schedule) changes only when a block's
 *   scores start: each 64-column chunk of the latent block has a barrier of its own and its
 *   products are issued once it has landed, not once the whole block (or the seesaw's half) has.
 *   early_release=1 (off by default; with chunk_waits=1, not the seesaw) changes only when the two
 *   warpgroups give a latent slot back: as soon as their P V's on it are done.
 *   dim_split=1 (off by default; head_dim = head_dim_v = 384 or 512) shares the head dims out over
 *   the two CTAs of a cluster on one tile, each half of Q's, K's, V's and O's columns, adding their
 *   halves of the scores through distributed shared memory: the same inputs and results as the
 *   spec without the key, not with split_kv=1.
 *   q_reg_dims=N (0 by default; with paired=1 or v_in_k=1, not the seesaw) changes only where the
 *   scores' Q comes from: the warpgroup that computes them holds Q's first N head dims (a multiple
 *   of 16, up to what its 256 registers hold: 192 at 576/512, 288 at 512/512, 384 at 384/384;
 *   more is refused naming the field) in registers for the whole tile. */
/* Launch with programmatic dependent launch (PDL): the kernel may start its set-up while the
 * previous kernel in the stream still runs, and waits for that kernel to complete before it reads
 * or writes any tensor; the next kernel in the stream, if launched with PDL too, may likewise start
 * early. Back-to-back launches (a model's layers, a CUDA graph) lose less time between kernels.
 * Capturable into CUDA graphs. Off by default. */
#define FLASHJIT_ATTENTION_FLAG_PDL 1u

typedef struct flashjit_attention_args {
  uint32_t struct_size;                     /* sizeof(flashjit_attention_args_t) */
  uint32_t flags;                           /* FLASHJIT_ATTENTION_FLAG_* bits; 0 = none */
  uint64_t q, k, v, o;                      /* CUdeviceptr, 16-byte aligned */
  uint64_t lse;                             /* CUdeviceptr of float, 4-byte aligned; 0 = not wanted */
  int64_t batch;                            /* 1..65535; batch x heads_q x query blocks < 2^31 */
  int64_t seqlen_q;                         /* 1..2^31-257 */
  int64_t seqlen_k;                         /* 1..2^31-257 */
  int64_t heads_q;                          /* 1..65535 */
  int64_t heads_kv;                         /* 1..heads_q, dividing heads_q */
  int64_t head_dim;                         /* 0 = the kernel's; else it must equal the kernel's */
  flashjit_tensor_strides_t q_strides, k_strides, v_strides, o_strides;
  float softmax_scale;                      /* 0 = 1/sqrt(head_dim); else finite and positive */
  /* ---- masks and score modifiers (MASKS AND SCORES above) ---- */
  float softcap;                            /* softcap=1: tanh soft cap of the scores, > 0; off: 0 */
  int32_t window_left;                      /* window=1: keys left of the diagonal; off (unbounded): -1 */
  int32_t window_right;                     /* window=1: keys right of the diagonal; off (unbounded): -1 */
  /* ---- engine inputs (ENGINE INPUTS above); off: 0 ---- */
  uint64_t cu_seqlens_q;                    /* varlen: int32 [batch + 1] query row offsets */
  uint64_t cu_seqlens_k;                    /* varlen, packed K/V: int32 [batch + 1] key row offsets */
  uint64_t seqused_k;                       /* int32 [batch] keys per sequence (paged: required) */
  uint64_t block_table;                     /* paged: int32 [batch][block_table_batch_stride] */
  int64_t block_table_batch_stride;         /* paged: entries per sequence */
  int64_t page_size;                        /* paged: keys per page, 1.. */
  /* Appended in 0.3 (a caller with the 256-byte layout has no engine inputs beyond the above). */
  int64_t num_pages;                        /* paged: pages in the K and V pools */
  int64_t total_q;                          /* varlen: rows of Q and O (LSE: [heads_q, total_q]) */
  int64_t total_k;                          /* varlen with cu_seqlens_k: rows of the packed K and V */
  /* Appended in 0.4 (a caller with the 280-byte layout has no split-KV): DECODE above. */
  uint64_t workspace;                       /* split_kv=1, scheduler=dynamic: CUdeviceptr, 256-byte
                                               aligned, caller-owned; zeroed once for scheduler=
                                               dynamic and combine=inline (SCHEDULER, DECODE above) */
  uint64_t workspace_bytes;                 /* its size: flashjit_attention_workspace_size's for
                                               max_splits; a smaller one (at least one split's)
                                               caps the split count at what it holds */
  int32_t max_splits;                       /* split_kv=1: most key splits per sequence, 1..128 */
  int32_t split_keys;                       /* split_kv=1: 0 = each sequence's keys cut into the
                                               launch's split count; else keys per split, a multiple
                                               of the kernel's block_n (batch-invariant mode) */
  /* Appended in 0.5 (a caller with the 304-byte layout has none of these; off: 0): MASKS AND SCORES. */
  int32_t attention_chunk;                  /* chunk=1: keys per attention chunk (Llama 4); off: 0 */
  int32_t sinks_dtype;                      /* sinks=1: a flashjit_dtype_t, FLASHJIT_DTYPE_FP32 or _BF16;
                                               0 with no sinks */
  uint64_t sinks;                           /* sinks=1: CUdeviceptr [heads_q] learnable sink logits, not
                                               scaled; off: 0 */
  uint64_t alibi_slopes;                    /* alibi=1: CUdeviceptr float32 [heads_q], or [batch][alibi_
                                               batch_stride] (per sequence); off: 0 */
  int64_t alibi_batch_stride;               /* alibi=1: elements between sequences' slopes; 0 = one
                                               [heads_q] for every sequence */
  /* Appended with FP8 (a caller with the 336-byte layout has none; off: 0): FP8 K/V CACHE, FP8 OPERANDS. */
  uint64_t k_scale;                         /* kv_dtype=e4m3: CUdeviceptr float32 K dequantisation scales */
  uint64_t v_scale;                         /* kv_dtype=e4m3: CUdeviceptr float32 V dequantisation scales */
  int64_t k_scale_batch_stride;             /* elements between sequences' K scales; 0 = shared */
  int64_t k_scale_head_stride;              /* elements between K/V heads' K scales; 0 = shared */
  int64_t v_scale_batch_stride;             /* the same for V */
  int64_t v_scale_head_stride;
  uint64_t q_scale;                         /* dtype=e4m3: CUdeviceptr float32 Q descales; 0 = 1 */
  int64_t q_scale_batch_stride;             /* indexed as k_scale */
  int64_t q_scale_head_stride;
  /* Appended with qv (a caller with the 408-byte layout has none; off: 0): MLA SPLIT FORM above. */
  uint64_t qv;                              /* qv=1: CUdeviceptr [.., heads_q, head_dim_v], 16-byte aligned */
  flashjit_tensor_strides_t qv_strides;     /* qv=1: its strides, as q_strides (varlen: batch ignored) */
} flashjit_attention_args_t;

/* Sets struct_size, zeroes everything and puts the masks at their "off" values (window -1). */
static inline void flashjit_attention_args_init(flashjit_attention_args_t* args) {
  memset(args, 0, sizeof(*args));
  args->struct_size = (uint32_t)sizeof(*args);
  args->window_left = -1;
  args->window_right = -1;
}

/* Sets struct_size and the defaults: device 0's primary context, default cache directory, JIT. */
static inline void flashjit_context_options_init(flashjit_context_options_t* options) {
  memset(options, 0, sizeof(*options));
  options->struct_size = (uint32_t)sizeof(*options);
}

/* Strides of a contiguous [batch, seqlen, heads, head_dim] tensor. */
static inline flashjit_tensor_strides_t flashjit_contiguous_bshd(int64_t seqlen, int64_t heads, int64_t head_dim) {
  flashjit_tensor_strides_t strides;
  strides.batch = seqlen * heads * head_dim;
  strides.row = heads * head_dim;
  strides.head = head_dim;
  return strides;
}

/* ---- library ----------------------------------------------------------------------------------- */

/* The library's version, packed as FLASHJIT_MAKE_VERSION does. */
FLASHJIT_API uint32_t flashjit_get_version(void);
/* The library's ABI version. */
FLASHJIT_API uint32_t flashjit_abi_version(void);
/* FLASHJIT_SUCCESS when the library implements header_abi_version (pass FLASHJIT_ABI_VERSION),
 * else FLASHJIT_ERROR_ABI_MISMATCH. */
FLASHJIT_API flashjit_status_t flashjit_check_abi(uint32_t header_abi_version);

/* A static name for a status ("FLASHJIT_ERROR_INVALID_ARGUMENT"); never NULL. */
FLASHJIT_API const char* flashjit_status_string(flashjit_status_t status);
/* The last failed call's message on this thread ("" after a success); valid until this thread's
 * next flashjit call. Never NULL. */
FLASHJIT_API const char* flashjit_last_error_message(void);
/* The field that message is about ("device", "args.q_strides.row", "struct_size"...), or "". */
FLASHJIT_API const char* flashjit_last_error_field(void);

/* ---- specs (no GPU needed) --------------------------------------------------------------------- */

/* A spec is text: comma-separated key=value pairs, e.g. "dtype=bf16,head_dim=128,causal=1".
 * FLASHJIT_SUCCESS when flashjit can build a kernel for it; otherwise FLASHJIT_ERROR_INVALID_SPEC
 * and, when reason_size > 0, the reason (starting with the field: "head_dim: ...") written to
 * reason, truncated to reason_size - 1 characters and NUL-terminated. Compiles nothing. */
FLASHJIT_API flashjit_status_t flashjit_supported(const char* spec, char* reason, size_t reason_size);

/* Checks launch arguments against a spec exactly as flashjit_attention_forward would, without a GPU
 * (for setting up an engine, and for tests). */
FLASHJIT_API flashjit_status_t flashjit_validate_attention_args(const char* spec, const flashjit_attention_args_t* args);

/* The workspace a launch with these arguments needs, in bytes: 256 for scheduler=dynamic's tile
 * counter, combine=inline's merge counters (a word per sequence, head group, query block and
 * consumer warpgroup, 256-byte aligned), plus the split partials for split_kv=1 (0 for other
 * specs); a function of the upper bounds (batch, seqlen_q, max_splits, total_q, heads_q) only. */
FLASHJIT_API flashjit_status_t flashjit_attention_workspace_size(const char* spec, const flashjit_attention_args_t* args,
                                                                 uint64_t* bytes);
/* The leading part of that workspace that holds counters (scheduler=dynamic's tile counter and
 * combine=inline's merge counters), in bytes; 0 for specs without them. These bytes are what must
 * be zero when the workspace is first used (every launch leaves them at zero): a caller that makes
 * a fresh workspace for each capture of a CUDA graph zeroes them alone, not the split partials
 * after them. A function of the same upper bounds. */
FLASHJIT_API flashjit_status_t flashjit_attention_workspace_counter_bytes(const char* spec, const flashjit_attention_args_t* args,
                                                                         uint64_t* bytes);

/* ---- contexts ---------------------------------------------------------------------------------- */

/* options may be NULL (all defaults). Errors: FLASHJIT_ERROR_DRIVER_UNAVAILABLE without a driver,
 * FLASHJIT_ERROR_INVALID_ARGUMENT naming "device" for an ordinal out of range,
 * FLASHJIT_ERROR_UNSUPPORTED_DEVICE for a device that is not sm_90. */
FLASHJIT_API flashjit_status_t flashjit_context_create(const flashjit_context_options_t* options,
                                                       flashjit_context_t* context);
/* Drops the caller's reference (see OWNERSHIP). NULL is a no-op. */
FLASHJIT_API flashjit_status_t flashjit_context_destroy(flashjit_context_t context);
FLASHJIT_API flashjit_status_t flashjit_context_describe(flashjit_context_t context, flashjit_context_info_t* info);

/* Compiles (policy permitting) every spec into the context's cache, in parallel, with its
 * long-sequence kernel where it has one (what flashjit_kernel_get will look for); loads nothing and
 * needs no GPU. On failure the status is the first failing spec's, and the message lists each one.
 * Prewarming is for storing: in a context with a cache directory (FLASHJIT_CACHE_DISK), a kernel
 * compiled but not stored there (a read-only or full disk, a directory that could not be used, so
 * the context fell back to memory) fails its spec with FLASHJIT_ERROR_CACHE_IO naming the directory;
 * a FLASHJIT_CACHE_MEMORY_ONLY context prewarms into memory. flashjit_prewarm_report says per spec
 * what was done. */
FLASHJIT_API flashjit_status_t flashjit_prewarm(flashjit_context_t context, const char* const* specs, size_t count);

/* What flashjit_prewarm_report did for one spec. */
#define FLASHJIT_PREWARM_MESSAGE_SIZE 512
typedef struct flashjit_prewarm_result {
  uint32_t struct_size;                     /* in: sizeof(flashjit_prewarm_result_t) */
  flashjit_status_t status;                 /* FLASHJIT_SUCCESS, or why this spec failed */
  int32_t kernels;                          /* the spec's kernels: 1, or 2 with a long-sequence kernel */
  int32_t compiled;                         /* of them, compiled by this call */
  int32_t hits;                             /* found in memory or in the cache directory */
  int32_t stored;                           /* in the cache directory after the call (0 when memory only) */
  char message[FLASHJIT_PREWARM_MESSAGE_SIZE]; /* why it failed ("" on success), NUL-terminated,
                                               truncated to FLASHJIT_PREWARM_MESSAGE_SIZE - 1 */
} flashjit_prewarm_result_t;

/* flashjit_prewarm, with what it did per spec in results[0 .. count-1] (may be NULL: then it is
 * flashjit_prewarm). Set struct_size in each to sizeof(flashjit_prewarm_result_t); the library steps
 * through the array by results[0].struct_size. The status and message are flashjit_prewarm's. */
FLASHJIT_API flashjit_status_t flashjit_prewarm_report(flashjit_context_t context, const char* const* specs, size_t count,
                                                       flashjit_prewarm_result_t* results);

/* ---- kernels ----------------------------------------------------------------------------------- */

/* The only call that compiles (policy permitting) or loads a module. A handle holds the spec's
 * kernel and, where the spec has one, its long-sequence kernel (flashjit_kernel_info_t). Each call
 * returns a new handle; handles for one spec in one context share the loaded modules. */
FLASHJIT_API flashjit_status_t flashjit_kernel_get(flashjit_context_t context, const char* spec,
                                                   flashjit_kernel_t* kernel);
/* NULL is a no-op. */
FLASHJIT_API flashjit_status_t flashjit_kernel_release(flashjit_kernel_t kernel);
FLASHJIT_API flashjit_status_t flashjit_kernel_describe(flashjit_kernel_t kernel, flashjit_kernel_info_t* info);

/* The resolved spec of the kernel flashjit_attention_forward would launch for args (the handle's
 * own or its long-sequence kernel: flashjit_kernel_info_t), after the same checks; launches nothing.
 * *spec is owned by the kernel and lives as long as it; NULL on failure. */
FLASHJIT_API flashjit_status_t flashjit_kernel_launch_spec(flashjit_kernel_t kernel, const flashjit_attention_args_t* args,
                                                           const char** spec);

/* Launches the kernel on stream (a CUstream of the kernel's CUDA context; NULL = the legacy default
 * stream of the current context). The hot path: see LIFECYCLE CONTRACT. A stream of another context
 * is FLASHJIT_ERROR_WRONG_CONTEXT, found before anything is launched. */
FLASHJIT_API flashjit_status_t flashjit_attention_forward(flashjit_kernel_t kernel, const flashjit_attention_args_t* args,
                                                          void* stream);

/* Merge of two attention states over the same rows and heads (cascade and shared-prefix attention;
 * vLLM's merge_attn_states): O = (w_a O_a + w_b O_b) / (w_a + w_b), w = exp(LSE - max(LSE_a, LSE_b)),
 * LSE = max + log(w_a + w_b); a row whose two LSEs are -inf gets O = 0 and LSE = -inf. O tensors are
 * [rows, heads, head_dim_v] (the kernel's head_dim_v, head_dim unless set; element strides, multiples
 * of 8, head_dim_v contiguous, 16-byte aligned), float32 (flags) or the kernel's 16-bit dtype; LSE float [heads,
 * lse_head_stride] (0 = rows). The kernel must be a split_kv=1 one (its module holds the merge).
 * Hot path like flashjit_attention_forward: no allocation, no synchronisation; capturable. */
#define FLASHJIT_MERGE_FLAG_FLOAT32_STATES 1u /* o_a and o_b are float32 */
#define FLASHJIT_MERGE_FLAG_FLOAT32_OUT 2u    /* o_out is float32 */
#define FLASHJIT_MERGE_FLAG_PDL 4u            /* launch with PDL (FLASHJIT_ATTENTION_FLAG_PDL) */
typedef struct flashjit_merge_args {
  uint32_t struct_size;                     /* sizeof(flashjit_merge_args_t) */
  uint32_t flags;                           /* FLASHJIT_MERGE_FLAG_* */
  uint64_t o_a, lse_a, o_b, lse_b;          /* CUdeviceptr: the two states */
  uint64_t o_out, lse_out;                  /* CUdeviceptr: the merged state; lse_out 0 = not wanted */
  int64_t rows, heads;
  int64_t a_row_stride, a_head_stride, b_row_stride, b_head_stride, out_row_stride, out_head_stride;
  int64_t lse_head_stride;                  /* elements between heads of every LSE; 0 = rows */
} flashjit_merge_args_t;
FLASHJIT_API flashjit_status_t flashjit_merge_attention_states(flashjit_kernel_t kernel, const flashjit_merge_args_t* args,
                                                               void* stream);

/* Checks the device metadata args points to (cu_seqlens_q/k, seqused_k, block_table: ENGINE
 * INPUTS) against the contract, after the checks flashjit_attention_forward makes: offsets from 0
 * up that never decrease, sequences within seqlen_q / seqlen_k and the packed rows, seqused_k in
 * range, every page a sequence needs in [0, num_pages), the counters in the workspace at zero, each
 * sink finite or -inf and each ALiBi slope finite (MASKS AND SCORES). Off the hot path: it copies the arrays to
 * the host in the kernel's CUDA context and waits for them (not capture-safe). The first bad entry
 * is named in the last error ("args.cu_seqlens_q[3]: ..."): FLASHJIT_ERROR_INVALID_ARGUMENT. */
FLASHJIT_API flashjit_status_t flashjit_check_engine_metadata(flashjit_kernel_t kernel, const flashjit_attention_args_t* args);
/* The same checks on host copies: args' metadata pointers point to host memory (no GPU needed). */
FLASHJIT_API flashjit_status_t flashjit_check_engine_metadata_host(const char* spec, const flashjit_attention_args_t* args);

/* ---- cache bundles ----------------------------------------------------------------------------- */

/* Writes the kernels of specs (compiling them, policy permitting; long-sequence kernels included)
 * into one bundle file at path, replacing it atomically, so an engine can ship its kernels with its model. */
FLASHJIT_API flashjit_status_t flashjit_cache_export(flashjit_context_t context, const char* const* specs, size_t count,
                                                     const char* path);
/* Checks every entry of the bundle at path (checksums, and that each is what this build of flashjit
 * would compile for its spec), then adds them all to the context's cache (memory, and the directory
 * unless memory only). A corrupt or foreign bundle adds nothing: FLASHJIT_ERROR_INVALID_BUNDLE.
 * imported (may be NULL) receives the number of entries in the bundle. */
FLASHJIT_API flashjit_status_t flashjit_cache_import(flashjit_context_t context, const char* path, size_t* imported);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHJIT_FLASHJIT_H_ */
