// Verify stage for the engine inputs (spec varlen=1 / paged=1): a ragged batch of sequences with
// packed queries, K/V packed, dense with seqused_k, or in a paged pool with a shuffled block table
// (pages shared between sequences), run on fresh random inputs against the float64 CPU reference
// (visibility.cuh's rule), outputs poisoned first, the rows past the last sequence checked
// untouched. Used by the GPU tests and by `flashjit check --seqlens`.
#pragma once
#include <cuda.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "config/kernel_config.hpp"
#include "launch/attention_launch.hpp"
#include "verify/check.hpp"
#include "verify/fp8_cache.hpp"  // Fp8Cache (EngineProblem::fp8)

namespace flashjit {

enum class KvSource {
  kPacked,  // [total_k, heads_kv, d] with cu_seqlens_k
  kDense,   // [batch, max keys, heads_kv, d] with seqused_k
  kPaged,   // pools [num_pages, page_size, heads_kv, d] with a block table and seqused_k
};  // (d: K's head_dim; V's columns are head_dim_v)
const char* kv_source_name(KvSource source);


struct EngineProblem {
  bool bf16 = true;
  int head_dim = 128, heads_q = 8, heads_kv = 2;
  int head_dim_v = 0;               // V's and O's head dim (a head_dim_v spec's); 0 = head_dim
  bool causal = true;
  double scale = 0;                 // 0 = 1/sqrt(head_dim)
  std::vector<int> seqlen_q, seqlen_k;  // per sequence (zero allowed)
  KvSource kv = KvSource::kPaged;
  int page_size = 16;               // paged
  bool head_major_pool = false;     // paged: HND pools ([pages, heads, page_size, d])
  bool kv_in_one_tensor = false;    // paged: K and V pages interleaved ([pages, 2, page_size, heads, d]; each page K's then V's head_dim_v columns)
  // V is K's first head_dim_v columns, the same memory (MLA's latent cache: V the latent part of
  // each 576-column row); any KV source. Not with kv_in_one_tensor or FP8 operands; with an FP8
  // cache, K's and V's scales equal (the same codes).
  bool v_is_k_prefix = false;
  // qv=1 (FlashAttention-3's split MLA form): the same math as v_is_k_prefix (Q and K rows head_dim
  // wide, V K's first head_dim_v columns), uploaded as four tensors: qv and V (the first head_dim_v
  // columns of Q's and K's rows), q and k (the rest). Not with kv_in_one_tensor or FP8.
  bool qv_split = false;
  int spare_q_rows = 3;             // rows of Q/O past the last sequence (must stay untouched)
  // Queries dense [batch, seqlen_q, heads, d] (a paged=1 spec without varlen): every sequence
  // has the same query count; LSE [batch, heads_q, seqlen_q].
  bool dense_q = false;
  int spare_pages = 5;              // pool pages no sequence uses
  // Upper bounds passed as seqlen_q / seqlen_k (0: the longest sequence's); larger ones are what a
  // captured graph keeps.
  int max_seqlen_q = 0, max_seqlen_k = 0;
  // Split-KV (a split_kv=1 spec): the launch's bounds; the workspace is sized for them.
  int max_splits = 0, split_keys = 0;
  int workspace_splits = 0;  // > 0: a workspace for only this many splits (it caps the count)
  // scheduler=dynamic: the workspace starts with the tile counter, zeroed once when the buffers
  // are made (as a caller does); each check then finds it back at zero after the launch.
  bool dynamic_schedule = false;
  // combine=inline: the merge counters follow (zeroed once, each check finds them back at zero).
  bool inline_combine = false;
  // K/V elements no sequence's keys use (a dense cache past seqused_k, a page's slots past its
  // sequence's end, unused pages, packed rows past the last sequence) and Q rows past the last
  // sequence hold NaN, as uninitialised engine memory may: no used output may turn NaN (0 x NaN).
  // false: random values there too.
  bool nan_padding = true;
  // > 0: the float64 reference covers only this many query rows of each longer sequence
  // (checked_rows_of), for the timing tool's large cells; the rest are only checked for being
  // written. 0: every row.
  int reference_rows = 0;
  // Issue 38's features for the float64 reference and the launch (alibi_slopes [batch, heads_q]
  // per sequence); the launch reads the sinks as bf16 with sinks_bf16, else as float32.
  AttentionFeatures features;
  bool sinks_bf16 = false;
  // The FP8 cache (a kv_dtype=e4m3 spec): K and V uploaded as e4m3 codes with float32 scales;
  // the reference runs on their dequantised 16-bit copy (Fp8Cache's rule). FP8 operands (a
  // dtype=e4m3 spec, fp8.operands): Q too, the copies bf16 whatever `bf16`, O read in
  // fp8.out_bf16's type.
  Fp8Cache fp8;
  int v_dim() const { return head_dim_v ? head_dim_v : head_dim; }
  bool v_in_k_buffer() const { return kv_in_one_tensor || v_is_k_prefix; }  // on the device
  bool v_is_k_columns() const { return v_is_k_prefix || qv_split; }         // in the math (host rows)
  std::string describe() const;
};

// The rows of a sequence of `rows` queries that the reference covers when it covers at most
// `limit` (0: all): the first and the last, the others spread evenly between, ascending (limit 1:
// the first only).
std::vector<int> checked_rows_of(int rows, int limit);

// "Q:K,Q:K,..." (each sequence's query and key counts, zero allowed) into the lengths; false
// with the reason when the text is not that.
bool parse_engine_lengths(const std::string& text, std::vector<int>* seqlen_q, std::vector<int>* seqlen_k, std::string* error);

// The visible (query, key) pairs of every sequence (useful FLOPs = 2 x (head_dim + head_dim_v) x
// heads_q x pairs: Q K^T and P V).
double visible_pairs(const EngineProblem& problem);

// A random ragged batch: zero-length, one-token and longer sequences, keys shorter and longer
// than the queries. `max_len` bounds any sequence.
EngineProblem random_engine_problem(std::mt19937_64& rng, int batch, int max_len);

// What a launch's arguments are sized for: the upper bounds a captured graph keeps. Every
// problem checked on the same EngineBuffers gets the same arguments (addresses and bounds); only
// the data behind them changes.
struct EngineCapacity {
  int batch = 1, max_seqlen_q = 1, max_seqlen_k = 1;
  int total_q = 1, total_k = 1;  // rows of the packed Q/O and K/V buffers
  int num_pages = 1, pages_per_sequence = 1;
  int max_splits = 0;        // split_kv: the launch's bound
  int workspace_splits = 0;  // the workspace holds this many splits' partials (0: max_splits)
  bool tile_counter = false; // the workspace's first 256 bytes: the dynamic scheduler's counter
  bool merge_counters = false; // combine=inline's counters after it (room for any tiles' count)
};
// Room for `problem` (its lengths, spare rows and pages).
EngineCapacity capacity_for(const EngineProblem& problem);

// Where a problem's tensors sit in buffers of a capacity, in elements: Q [total_q][heads_q][head_dim]
// and O [total_q][heads_q][head_dim_v] (dense_q: the same rows, batch stride max_seqlen_q rows); K
// with head_dim columns and V with head_dim_v, each in its KvSource's layout (packed [total_k],
// dense [batch][max keys], paged [pages][page_size] NHD or [pages][heads][page_size] HND); K and V
// in one tensor: each page holds K's page, then V's (V's offset in K's buffer v_in_k).
struct EngineLayout {
  int64_t q_elems = 0, o_elems = 0;
  TensorStrides q_strides, o_strides;  // the launch's (batch 0 unless dense_q)
  TensorStrides k_strides, v_strides;  // the launch's: batch the page stride (paged) or max keys' rows (dense), 0 packed
  int64_t page_stride = 0;             // paged: elements between pages (K's and V's alike)
  int64_t k_elems = 0, v_elems = 0;    // each buffer's elements (v_elems 0 with V in K's buffer)
  int64_t v_in_k = -1;                 // V in K's buffer (one tensor, or K's prefix): V's first element there; else -1
};
EngineLayout engine_layout(const EngineProblem& problem, const EngineCapacity& capacity);
// qv_split's device tensors: q, k (head_dim - head_dim_v columns), v (head_dim_v) in `tail`, and
// qv (head_dim_v columns, Q's rows) in `qv`; engine_layout's of the problem narrowed.
struct SplitLayout {
  EngineLayout tail, qv;
};
SplitLayout split_layout(const EngineProblem& problem, const EngineCapacity& capacity);

// Device buffers for problems within one capacity and layout (KvSource, page size, pool layout).
class EngineBuffers {
 public:
  EngineBuffers(const DriverApi& api, const EngineProblem& layout, const EngineCapacity& capacity);
  const EngineCapacity& capacity() const { return capacity_; }
  // The launch arguments (the same for every problem checked on these buffers).
  AttentionArgs args(const EngineProblem& layout, bool with_lse) const;
  uint64_t workspace_start() const;  // the workspace's 256-byte aligned start (the args' workspace)

  DeviceBuffer q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, workspace;
  // qv_split: qv's buffer (q, k and v then hold the split tensors: q's and k's rotary columns, V's
  // latent ones; their strides split_layout's).
  DeviceBuffer qv;
  // FP8 inputs' float32 scales, [batch][heads_kv] at most (q_scale: FP8 operands' Q descales).
  DeviceBuffer k_scale, v_scale, q_scale;
  FeatureBuffers features;  // sinks and slopes, uploaded by each check
  int64_t pool_page_stride = 0;  // paged: elements between pages (the K and V pools' batch stride)
  TensorStrides pool_strides;    // paged / dense: row, head strides of K
  TensorStrides pool_v_strides;  // and of V (head_dim_v columns)

 private:
  EngineCapacity capacity_;
};

struct EngineCheck {
  CheckResult result;
  std::string detail;  // which element failed first, when one did
};

// Fresh inputs and metadata for `problem` in `buffers`, poisoned outputs, one launch (`launch`
// runs the kernel, e.g. a graph replay; when empty, make_kernel_params and launch_kernel on the
// device's stream), the float64 reference, the comparison.
using EngineLaunch = std::function<Status(const AttentionArgs& args)>;
EngineCheck check_engine_attention(const CheckDevice& device, const AttentionFunctions& functions, const KernelConfig& config,
                                   const EngineProblem& problem, EngineBuffers& buffers, std::mt19937_64& rng,
                                   const EngineLaunch& launch = {});

}  // namespace flashjit
