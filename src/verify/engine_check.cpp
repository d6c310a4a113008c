#include "verify/engine_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <thread>

#include "driver/launch.hpp"

// The visibility rule the kernels mask by (visible_pairs; the reference's is attend_row's).
#include "../../templates/visibility.cuh"

namespace flashjit {
namespace {

constexpr size_t kElem = 2;  // fp16 / bf16

int longest(const std::vector<int>& lengths) { return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end()); }
int64_t total(const std::vector<int>& lengths) { return std::accumulate(lengths.begin(), lengths.end(), int64_t(0)); }
int pages_for(int keys, int page_size) { return (keys + page_size - 1) / page_size; }

std::vector<int32_t> offsets_of(const std::vector<int>& lengths) {
  std::vector<int32_t> offsets(lengths.size() + 1, 0);
  for (size_t b = 0; b < lengths.size(); ++b) offsets[b + 1] = offsets[b] + lengths[b];
  return offsets;
}

// Where element (row, head, 0) of each tensor sits, host side, as the kernel addresses it: Q's
// and K's rows head_dim wide, V's and O's head_dim_v (v_index: in V's own buffer, or from V's
// start in K's when they share one).
struct HostLayout {
  const EngineProblem& p;
  const EngineBuffers& buffers;
  std::vector<int32_t> cu_q, cu_k, table;

  int64_t q_index(int b, int row, int h) const { return (int64_t(cu_q[b]) + row) * p.heads_q * p.head_dim + int64_t(h) * p.head_dim; }
  int64_t o_index(int b, int row, int h) const { return (int64_t(cu_q[b]) + row) * p.heads_q * p.v_dim() + int64_t(h) * p.v_dim(); }
  int64_t kv_index(int b, int key, int h) const { return pool_index(buffers.pool_strides, b, key, h); }
  int64_t v_index(int b, int key, int h) const { return pool_index(buffers.pool_v_strides, b, key, h); }
  // V in K's buffer: V's first element there (one tensor: one K page on; K's prefix: 0); else -1.
  int64_t v_in_k() const { return p.v_is_k_columns() ? 0 : p.kv_in_one_tensor ? int64_t(p.page_size) * p.heads_kv * p.head_dim : -1; }

 private:
  int64_t pool_index(const TensorStrides& s, int b, int key, int h) const {
    switch (p.kv) {
      case KvSource::kPacked: return (int64_t(cu_k[b]) + key) * s.row + h * s.head;
      case KvSource::kDense: return int64_t(b) * s.batch + int64_t(key) * s.row + h * s.head;
      case KvSource::kPaged: {  // the batch stride is the page stride
        const int page = table[size_t(b) * buffers.capacity().pages_per_sequence + key / p.page_size];
        return int64_t(page) * s.batch + int64_t(key % p.page_size) * s.row + h * s.head;
      }
    }
    return 0;
  }
};

// EngineProblem::nan_padding: NaN in every K/V element no sequence's keys use and in every Q row
// past the last sequence (`seqlen_k` and at.cu_q cover the capacity's sequences, inactive ones
// empty). V in K's tensor sits one K page after the page's start.
void poison_unused(const HostLayout& at, const std::vector<int>& seqlen_k, std::vector<uint16_t>& q, std::vector<uint16_t>& k,
                   std::vector<uint16_t>& v) {
  const EngineProblem& p = at.p;
  const uint16_t nan = p.bf16 ? 0x7FC0 : 0x7E00;
  const int64_t v_in_k = at.v_in_k();
  std::vector<char> k_used(k.size(), 0), v_used(v.size(), 0);
  for (int b = 0; b < int(seqlen_k.size()); ++b)
    for (int key = 0; key < seqlen_k[size_t(b)]; ++key)
      for (int h = 0; h < p.heads_kv; ++h) {
        std::fill_n(k_used.begin() + at.kv_index(b, key, h), p.head_dim, 1);
        const int64_t vi = at.v_index(b, key, h);
        if (v_in_k >= 0) std::fill_n(k_used.begin() + v_in_k + vi, p.v_dim(), 1);
        else std::fill_n(v_used.begin() + vi, p.v_dim(), 1);
      }
  for (size_t i = 0; i < k.size(); ++i) if (!k_used[i]) k[i] = nan;
  if (v_in_k < 0) for (size_t i = 0; i < v.size(); ++i) if (!v_used[i]) v[i] = nan;
  const size_t used_q = size_t(at.cu_q.back()) * p.heads_q * p.head_dim;
  if (!p.dense_q) std::fill(q.begin() + int64_t(std::min(used_q, q.size())), q.end(), nan);
}

// FP8 inputs (EngineProblem::fp8): K's and V's 16-bit random values (NaN where poisoned), and Q's
// with FP8 operands, become e4m3 codes by their KV head's scale, outlier keys' values 50x first; the
// vectors are left holding the dequantised 16-bit copy the reference reads. Returns the codes of
// Q's (operands; else empty), K's and V's buffers (V's empty when it is in K's tensor). With scales
// per sequence (Fp8Cache::per_sequence) Q's rows take their sequence's scale; K and V, whose pages
// sequences may share, take sequence 0's, and the reference reads them through Fp8SequenceReads.
struct Fp8Codes {
  std::vector<unsigned char> q, k, v;
};
Fp8Codes quantise_inputs(const HostLayout& at, const std::vector<int>& seqlen_k, std::vector<uint16_t>& q, std::vector<uint16_t>& k,
                         std::vector<uint16_t>& v, std::mt19937_64& rng) {
  const EngineProblem& p = at.p;
  const Fp8Cache& f = p.fp8;
  const int64_t d = p.head_dim, dv = p.v_dim(), h = p.heads_kv;
  const int64_t page_elems = int64_t(p.page_size) * h * d;  // K's page (V's follows it in one tensor)
  std::vector<char> k_outlier(k.size(), 0);
  for (int b = 0; b < int(seqlen_k.size()); ++b)
    for (int n = 0; n < f.outlier_keys && seqlen_k[size_t(b)] > 0; ++n) {
      const int key = int(rng() % uint64_t(seqlen_k[size_t(b)]));
      for (int kvh = 0; kvh < p.heads_kv; ++kvh) std::fill_n(k_outlier.begin() + at.kv_index(b, key, kvh), d, 1);
    }
  // Where element i of a K or V buffer is: its KV head, and (K and V in one tensor) whether it is
  // V's (rows head_dim_v wide).
  auto place = [&](int64_t i, bool tensor_is_v, bool* is_v) {
    int64_t off = p.kv == KvSource::kPaged ? i % (tensor_is_v ? at.buffers.pool_v_strides : at.buffers.pool_strides).batch : i;
    *is_v = tensor_is_v;
    if (p.kv == KvSource::kPaged && p.kv_in_one_tensor && off >= page_elems) *is_v = true, off -= page_elems;
    const int64_t cols = *is_v ? dv : d;
    return int(p.kv == KvSource::kPaged && p.head_major_pool ? off / (int64_t(p.page_size) * cols) % h : off / cols % h);
  };
  // Each element on its own: the cores take a range each, with a quantiser each (its tables are built as used).
  auto convert = [&](std::vector<uint16_t>& t, bool tensor_is_v, const std::vector<char>* outlier) {
    std::vector<unsigned char> codes(t.size());
    auto range = [&](size_t begin, size_t end) {
      Fp8Quantiser quantise(p.bf16);
      for (size_t i = begin; i < end; ++i) {
        bool is_v = false;
        const int head = place(int64_t(i), tensor_is_v, &is_v);
        codes[i] = quantise(t[i], f.scale_of(is_v ? Fp8Tensor::kV : Fp8Tensor::kK, 0, head), !is_v && outlier && (*outlier)[i]);
      }
    };
    parallel_ranges(t.size(), size_t(1) << 20, range);
    return codes;
  };
  Fp8Codes out;
  out.k = convert(k, false, &k_outlier);
  if (!p.v_in_k_buffer()) out.v = convert(v, true, nullptr);
  if (f.operands) {  // Q's rows [total_q][heads_q][d]: each row's sequence, rows past the last sequence sequence 0's
    out.q.resize(q.size());
    const int64_t row_elems = int64_t(p.heads_q) * d;
    const int group = p.heads_q / p.heads_kv;
    Fp8Quantiser quantise(p.bf16);
    size_t b = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      const int64_t row = int64_t(i) / row_elems;
      while (b + 1 < at.cu_q.size() && row >= at.cu_q[b + 1]) ++b;
      const int seq = b + 1 < at.cu_q.size() ? int(b) : 0;
      const int head = int(int64_t(i) % row_elems / d);
      out.q[i] = quantise(q[i], f.scale_of(Fp8Tensor::kQ, seq, head / group));
    }
  }
  return out;
}

// Scales per sequence (Fp8Cache::per_sequence): the reference reads K and V as code x the scale of
// the sequence it attends for (a page two sequences share dequantises differently for each),
// rounded once to the copies' type as the copies are.
struct Fp8SequenceReads {
  const std::vector<unsigned char>* k = nullptr;
  std::vector<unsigned char> v;  // V's codes (from K's buffer when they share it)
  std::vector<double> table;     // [batch][heads_kv][K, V][256]
  int heads_kv = 1;
  double load(bool is_v, int b, int h, int64_t i) const {
    const unsigned char code = is_v ? v[size_t(i)] : (*k)[size_t(i)];
    return table[((size_t(b) * heads_kv + h) * 2 + (is_v ? 1 : 0)) * 256 + code];
  }
};

// The float64 attention of every sequence (of its checked rows), O as [total_q rows][heads_q][head_dim_v],
// LSE as [heads_q][total_q]; `checked` marks the packed rows it covers.
Reference engine_reference(const HostLayout& at, const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                           const std::vector<uint16_t>& v, int total_q, std::vector<char>& checked,
                           const Fp8SequenceReads* per_sequence = nullptr) {
  const EngineProblem& p = at.p;
  const int d = p.head_dim, dv = p.v_dim(), group = p.heads_q / p.heads_kv;
  Reference ref;
  ref.o.assign(size_t(total_q) * p.heads_q * dv, 0.0);
  ref.lse.assign(size_t(p.heads_q) * total_q, -std::numeric_limits<double>::infinity());
  const bool magnitudes = p.fp8.on && p.fp8.operands;  // the rows' score magnitudes (fp8_lse_error)
  if (magnitudes) ref.magnitude.assign(size_t(p.heads_q) * total_q, 0.0);
  const double scale = double(float(p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(d))));
  auto load = [&](const std::vector<uint16_t>& t, int64_t i) { return double(half_bits_to_float(t[size_t(i)], p.bf16)); };
  struct Task { int b, row, h; };
  std::vector<Task> tasks;
  checked.assign(size_t(total_q), 0);
  for (int b = 0; b < int(p.seqlen_q.size()); ++b) {
    for (int row : checked_rows_of(p.seqlen_q[b], p.reference_rows)) {
      checked[size_t(at.cu_q[b] + row)] = 1;
      for (int h = 0; h < p.heads_q; ++h) tasks.push_back({b, row, h});
    }
  }
  auto work = [&](size_t first, size_t step) {
    RowAttention row_attention;
    for (size_t i = first; i < tasks.size(); i += step) {
      // Plain ints, not a structured binding: the lambda below captures b (clang before 16 cannot
      // capture a binding; the fuzz build uses clang).
      const int b = tasks[i].b, row = tasks[i].row, h = tasks[i].h;
      const int kvh = h / group;
      const int64_t qi = at.q_index(b, row, h);
      double magnitude = 0;  // the largest sum of |q_c k_c| over the keys the row sees
      auto dot = [&](int j) {
        const int64_t ki = at.kv_index(b, j, kvh);
        double sum = 0, sum_abs = 0;
        auto add = [&](double e) { sum += e, sum_abs += std::fabs(e); };
        if (per_sequence) {
          for (int c = 0; c < d; ++c) add(load(q, qi + c) * per_sequence->load(false, b, kvh, ki + c));
        } else {
          for (int c = 0; c < d; ++c) add(load(q, qi + c) * load(k, ki + c));
        }
        magnitude = std::max(magnitude, sum_abs);
        return sum;
      };
      const double* sink = p.features.sinks.empty() ? nullptr : &p.features.sinks[size_t(h)];
      attend_row(p.features, p.causal, scale, p.features.slope(b, h, p.heads_q), sink, row, p.seqlen_q[b], p.seqlen_k[b], dot,
                 &row_attention);
      double* out = &ref.o[size_t(at.o_index(b, row, h))];
      for (size_t w = 0; w < row_attention.weight.size(); ++w) {
        const int64_t vi = at.v_index(b, row_attention.first_key + int(w), kvh);
        if (per_sequence) {
          for (int c = 0; c < dv; ++c) out[c] += row_attention.weight[w] * per_sequence->load(true, b, kvh, vi + c);
        } else {
          for (int c = 0; c < dv; ++c) out[c] += row_attention.weight[w] * load(v, vi + c);
        }
      }
      ref.lse[size_t(h) * total_q + at.cu_q[b] + row] = row_attention.lse;
      if (magnitudes) ref.magnitude[size_t(h) * total_q + at.cu_q[b] + row] = magnitude * scale;
    }
  };
  const size_t threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
  for (auto& t : pool) t.join();
  return ref;
}

// A block table for `p`: each sequence's pages drawn from a shuffled pool, some sequences sharing
// the first pages of the one before (a shared prefix); unused entries hold out-of-range indices.
std::vector<int32_t> random_block_table(const EngineProblem& p, const EngineCapacity& cap, std::mt19937_64& rng) {
  std::vector<int32_t> pages(size_t(cap.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> table(size_t(cap.batch) * cap.pages_per_sequence, -7);
  size_t next = 0;
  for (int b = 0; b < int(p.seqlen_k.size()); ++b) {
    const int needed = pages_for(p.seqlen_k[b], p.page_size);
    int shared = 0;
    if (b > 0 && rng() % 3 == 0) shared = std::min(needed, pages_for(p.seqlen_k[b - 1], p.page_size) / 2);
    for (int i = 0; i < needed; ++i) {
      int32_t& entry = table[size_t(b) * cap.pages_per_sequence + i];
      entry = i < shared ? table[size_t(b - 1) * cap.pages_per_sequence + i] : pages[next++ % pages.size()];
    }
  }
  return table;
}

}  // namespace

const char* kv_source_name(KvSource source) {
  switch (source) {
    case KvSource::kPacked: return "packed";
    case KvSource::kDense: return "dense";
    case KvSource::kPaged: return "paged";
  }
  return "?";
}

std::string EngineProblem::describe() const {
  std::string lengths;
  for (size_t b = 0; b < seqlen_q.size(); ++b) {
    if (b == 8) { lengths += " ..."; break; }
    lengths += (b ? " " : "") + std::to_string(seqlen_q[b]) + "/" + std::to_string(seqlen_k[b]);
  }
  std::string text = std::string(bf16 ? "bf16" : "fp16") + " d=" + std::to_string(head_dim) +
                     (head_dim_v && head_dim_v != head_dim ? "/" + std::to_string(head_dim_v) : std::string()) + (causal ? " causal" : "") +
                     " hq=" + std::to_string(heads_q) + " hkv=" + std::to_string(heads_kv) + " kv=" + kv_source_name(kv);
  if (kv == KvSource::kPaged) {
    text += " page=" + std::to_string(page_size) + (head_major_pool ? " hnd" : " nhd") + (kv_in_one_tensor ? " kv-one-tensor" : "");
  }
  if (v_is_k_prefix) text += " v=k-prefix";
  if (qv_split) text += " qv-split";
  if (max_splits > 0) text += " splits<=" + std::to_string(max_splits) + (split_keys ? " split_keys=" + std::to_string(split_keys) : "") +
                             (workspace_splits ? " workspace for " + std::to_string(workspace_splits) : "");
  return text + features.describe() + fp8.describe() + " batch=" + std::to_string(seqlen_q.size()) + " q/k: " + lengths;
}

std::vector<int> checked_rows_of(int rows, int limit) {
  std::vector<int> out;
  if (rows <= 0) return out;
  if (limit <= 0 || limit >= rows) {
    for (int r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  if (limit == 1) return {0};
  for (int i = 0; i < limit; ++i) out.push_back(int(int64_t(i) * (rows - 1) / (limit - 1)));  // distinct: rows > limit
  return out;
}

bool parse_engine_lengths(const std::string& text, std::vector<int>* seqlen_q, std::vector<int>* seqlen_k, std::string* error) {
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    int q = -1, k = -1;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%d:%d%c", &q, &k, &tail) != 2 || q < 0 || k < 0) {
      *error = "'" + item.substr(0, 32) + "' is not Q:K with Q, K >= 0";
      return false;
    }
    seqlen_q->push_back(q);
    seqlen_k->push_back(k);
    at = end + 1;
  }
  return true;
}

EngineLayout engine_layout(const EngineProblem& p, const EngineCapacity& cap) {
  const int64_t d = p.head_dim, dv = p.v_dim(), h = p.heads_kv;
  EngineLayout l;
  l.q_elems = int64_t(cap.total_q) * p.heads_q * d;
  l.o_elems = int64_t(cap.total_q) * p.heads_q * dv;
  l.q_strides = {p.dense_q ? int64_t(cap.max_seqlen_q) * p.heads_q * d : 0, p.heads_q * d, d};
  l.o_strides = {p.dense_q ? int64_t(cap.max_seqlen_q) * p.heads_q * dv : 0, p.heads_q * dv, dv};
  l.k_strides = {0, h * d, d};
  l.v_strides = {0, h * dv, dv};
  switch (p.kv) {
    case KvSource::kPacked:
      l.k_elems = int64_t(cap.total_k) * h * d;
      l.v_elems = int64_t(cap.total_k) * h * dv;
      break;
    case KvSource::kDense:
      l.k_strides.batch = int64_t(cap.max_seqlen_k) * h * d;
      l.v_strides.batch = int64_t(cap.max_seqlen_k) * h * dv;
      l.k_elems = int64_t(cap.batch) * l.k_strides.batch;
      l.v_elems = int64_t(cap.batch) * l.v_strides.batch;
      break;
    case KvSource::kPaged: {
      // HND pages: [heads][page_size][columns]; NHD: [page_size][heads][columns]. K and V in one
      // tensor: [pages][K's page, V's page], V one K page on.
      const int64_t k_page = int64_t(p.page_size) * h * d, v_page = int64_t(p.page_size) * h * dv;
      if (p.head_major_pool) l.k_strides = {0, d, int64_t(p.page_size) * d}, l.v_strides = {0, dv, int64_t(p.page_size) * dv};
      l.page_stride = p.kv_in_one_tensor ? k_page + v_page : k_page;
      l.k_strides.batch = l.page_stride;
      l.v_strides.batch = p.kv_in_one_tensor ? l.page_stride : v_page;
      l.k_elems = int64_t(cap.num_pages) * l.page_stride;
      l.v_elems = p.kv_in_one_tensor ? 0 : int64_t(cap.num_pages) * v_page;
      l.v_in_k = p.kv_in_one_tensor ? k_page : -1;
      break;
    }
  }
  if (p.v_is_k_columns()) {  // V's rows are K's, read head_dim_v columns wide (the host's rows with qv_split)
    l.v_strides = l.k_strides;
    l.v_elems = 0;
    l.v_in_k = 0;
  }
  return l;
}

SplitLayout split_layout(const EngineProblem& p, const EngineCapacity& cap) {
  EngineProblem tail = p;
  tail.head_dim = p.head_dim - p.v_dim();
  tail.head_dim_v = p.v_dim();
  tail.v_is_k_prefix = tail.qv_split = false;
  EngineProblem qv = tail;
  qv.head_dim = p.v_dim();
  return {engine_layout(tail, cap), engine_layout(qv, cap)};
}

// qv_split: each (outer, row, head) vector of a host tensor's full rows (head_dim wide, at `from`'s
// strides) split at head_dim_v: its first columns into `first` (qv or V), the rest into `rest` (q or
// k), each at its own strides.
void split_rows(const std::vector<uint16_t>& full, const TensorStrides& from, int outer, int rows, int heads, int d, int dv,
                std::vector<uint16_t>& first, const TensorStrides& first_at, std::vector<uint16_t>& rest, const TensorStrides& rest_at) {
  for (int o = 0; o < outer; ++o)
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads; ++h) {
        const uint16_t* row = full.data() + o * from.batch + r * from.row + h * from.head;
        std::copy_n(row, dv, first.begin() + (o * first_at.batch + r * first_at.row + h * first_at.head));
        std::copy_n(row + dv, d - dv, rest.begin() + (o * rest_at.batch + r * rest_at.row + h * rest_at.head));
      }
}

double visible_pairs(const EngineProblem& p) {
  const MaskRule rule{p.causal, p.features.window_left, p.features.window_right, p.features.chunk};
  double pairs = 0;
  for (size_t b = 0; b < p.seqlen_q.size(); ++b)
    for (int row = 0; row < p.seqlen_q[b]; ++row) pairs += visible_key_count(rule, row, p.seqlen_q[b], p.seqlen_k[b]);
  return pairs;
}

EngineProblem random_engine_problem(std::mt19937_64& rng, int batch, int max_len) {
  EngineProblem p;
  for (int b = 0; b < batch; ++b) {
    const int kind = int(rng() % 6);  // empty, decode, speculative, short, long, no keys
    int q = 0, k = 0;
    switch (kind) {
      case 0: q = 0; k = int(rng() % (max_len + 1)); break;
      case 1: q = 1; k = 1 + int(rng() % max_len); break;
      case 2: q = 2 + int(rng() % 15); k = q + int(rng() % max_len); break;
      case 3: q = 1 + int(rng() % std::max(1, max_len / 4)); k = q + int(rng() % std::max(1, max_len / 2)); break;
      case 4: q = 1 + int(rng() % max_len); k = std::max(0, q + int(rng() % max_len) - max_len / 4); break;
      default: q = 1 + int(rng() % 64); k = 0; break;
    }
    p.seqlen_q.push_back(std::min(q, max_len));
    p.seqlen_k.push_back(std::min(k, max_len));
  }
  return p;
}

EngineCapacity capacity_for(const EngineProblem& p) {
  EngineCapacity c;
  c.batch = std::max<int>(1, int(p.seqlen_q.size()));
  c.max_seqlen_q = std::max({1, longest(p.seqlen_q), p.max_seqlen_q});
  c.max_seqlen_k = std::max({1, longest(p.seqlen_k), p.max_seqlen_k});
  c.total_q = int(total(p.seqlen_q)) + p.spare_q_rows + 1;
  c.total_k = std::max<int>(1, int(total(p.seqlen_k)));
  c.max_splits = p.max_splits;
  c.workspace_splits = p.workspace_splits;
  c.tile_counter = p.dynamic_schedule;
  c.merge_counters = p.inline_combine;
  if (p.kv == KvSource::kPaged) {
    c.pages_per_sequence = pages_for(c.max_seqlen_k, p.page_size);
    int used = 0;
    for (int k : p.seqlen_k) used += pages_for(k, p.page_size);
    c.num_pages = std::max(1, used + p.spare_pages);
  }
  return c;
}

// Bytes for combine=inline's merge counters, whatever the tiles: batch x (heads_q / pack_heads) x
// ceil(max_seqlen_q / (block_m / pack_heads)) x (block_m / 64) words is at most batch x heads_q x
// (ceil(max_seqlen_q / 64) + 3), plus the alignment.
static size_t merge_counter_room(const EngineProblem& p, const EngineCapacity& cap) {
  if (!cap.merge_counters) return 0;
  return size_t(cap.batch) * size_t(p.heads_q) * (size_t(cap.max_seqlen_q + 63) / 64 + 3) * 4 + 256;
}

EngineBuffers::EngineBuffers(const DriverApi& api, const EngineProblem& p, const EngineCapacity& cap)
    : q(api, size_t(p.qv_split ? split_layout(p, cap).tail.q_elems : engine_layout(p, cap).q_elems) * kElem),
      k(api, size_t(p.qv_split ? split_layout(p, cap).tail.k_elems : engine_layout(p, cap).k_elems) * kElem),
      v(api, p.qv_split ? size_t(split_layout(p, cap).tail.v_elems) * kElem
             : p.v_in_k_buffer() ? 16 : size_t(engine_layout(p, cap).v_elems) * kElem),  // V in k's buffer
      o(api, size_t(engine_layout(p, cap).o_elems) * kElem),
      lse(api, size_t(p.heads_q) * cap.total_q * 4),
      cu_seqlens_q(api, size_t(cap.batch + 1) * 4),
      cu_seqlens_k(api, size_t(cap.batch + 1) * 4),
      seqused_k(api, size_t(cap.batch) * 4),
      block_table(api, size_t(cap.batch) * cap.pages_per_sequence * 4),
      // attention_workspace_bytes' layout: the tile counter (scheduler=dynamic), the merge counters
      // (combine=inline), then O partials, then LSE partials, each 256-byte aligned; 256 more to
      // align the start.
      workspace(api, (cap.tile_counter ? kTileCounterBytes : 0) + merge_counter_room(p, cap) +
                         size_t(cap.workspace_splits > 0 ? cap.workspace_splits : cap.max_splits) * cap.total_q * p.heads_q * (p.v_dim() + 1) * 4 + 512 + 16),
      qv(api, p.qv_split ? size_t(split_layout(p, cap).qv.q_elems) * kElem : 16),
      k_scale(api, size_t(cap.batch) * p.heads_kv * 4),
      v_scale(api, size_t(cap.batch) * p.heads_kv * 4),
      q_scale(api, size_t(cap.batch) * p.heads_kv * 4),
      features(api, cap.batch, p.heads_q),
      pool_page_stride(engine_layout(p, cap).page_stride),
      pool_strides(engine_layout(p, cap).k_strides),
      pool_v_strides(engine_layout(p, cap).v_strides),
      capacity_(cap) {
  workspace.fill_bytes(0);  // the tile counter starts at zero (the kernel leaves it so)
}

uint64_t EngineBuffers::workspace_start() const { return (workspace.ptr() + 255) / 256 * 256; }

AttentionArgs EngineBuffers::args(const EngineProblem& p, bool with_lse) const {
  const EngineCapacity& cap = capacity_;
  AttentionArgs a;
  const EngineLayout layout = engine_layout(p, cap);
  a.q = q.ptr();
  a.o = o.ptr();
  a.k = k.ptr();
  // The FP8 cache's elements are one byte: its strides (bytes) are the same numbers.
  const size_t kv_elem = p.fp8.on ? 1 : kElem;
  a.v = p.v_in_k_buffer() ? k.ptr() + size_t(layout.v_in_k) * kv_elem : v.ptr();
  if (p.fp8.on) {
    a.fp8.k_scale = k_scale.ptr();
    a.fp8.v_scale = v_scale.ptr();
    a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = p.fp8.scale_head_stride();
    a.fp8.k_scale_batch_stride = a.fp8.v_scale_batch_stride = p.fp8.scale_batch_stride(p.heads_kv);
    if (p.fp8.operands) {  // Q's codes are one byte too: its strides (bytes) are the same numbers
      a.fp8.q_scale = q_scale.ptr();
      a.fp8.q_scale_head_stride = p.fp8.scale_head_stride();
      a.fp8.q_scale_batch_stride = p.fp8.scale_batch_stride(p.heads_kv);
    }
  }
  a.lse = with_lse ? lse.ptr() : 0;
  a.batch = cap.batch;
  a.seqlen_q = cap.max_seqlen_q;
  a.seqlen_k = cap.max_seqlen_k;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.q_strides = layout.q_strides;  // O: head_dim_v columns
  a.o_strides = layout.o_strides;
  a.softmax_scale = float(p.scale);
  features.set_launch_features(a.features, p.features, p.sinks_bf16);
  EngineInputs& e = a.engine;
  if (!p.dense_q) {  // dense_q: the packed rows of equal sequences are the dense layout (the strides' batch)
    e.cu_seqlens_q = cu_seqlens_q.ptr();
    e.total_q = cap.total_q;
  }
  if (cap.max_splits > 0 || cap.tile_counter) {
    a.decode.workspace = workspace_start();
    a.decode.workspace_bytes = workspace.bytes() - (a.decode.workspace - workspace.ptr());
  }
  if (cap.max_splits > 0) {
    a.decode.max_splits = cap.max_splits;
    a.decode.split_keys = p.split_keys;
  }
  a.k_strides = pool_strides;  // V: head_dim_v columns
  a.v_strides = pool_v_strides;
  if (p.qv_split) {  // the four split tensors at their own strides
    const SplitLayout split = split_layout(p, cap);
    a.q_strides = split.tail.q_strides;
    a.k_strides = split.tail.k_strides;
    a.v_strides = split.tail.v_strides;
    a.qv = qv.ptr();
    a.qv_strides = split.qv.q_strides;
  }
  switch (p.kv) {
    case KvSource::kPacked:
      e.cu_seqlens_k = cu_seqlens_k.ptr();
      e.total_k = cap.total_k;
      break;
    case KvSource::kDense:
      e.seqused_k = seqused_k.ptr();
      break;
    case KvSource::kPaged:
      e.seqused_k = seqused_k.ptr();
      e.block_table = block_table.ptr();
      e.block_table_stride = cap.pages_per_sequence;
      e.page_size = p.page_size;
      e.num_pages = cap.num_pages;
      break;
  }
  return a;
}

EngineCheck check_engine_attention(const CheckDevice& device, const AttentionFunctions& functions, const KernelConfig& config,
                                   const EngineProblem& problem, EngineBuffers& buffers, std::mt19937_64& rng,
                                   const EngineLaunch& launch) {
  EngineCheck outcome;
  // The inputs' 16-bit type (and the reference's): bf16 copies with FP8 operands; O's type apart.
  EngineProblem p = problem;
  p.bf16 = p.fp8.copies_bf16(p.bf16);
  const bool o_bf16 = p.fp8.on && p.fp8.operands ? p.fp8.out_bf16 : p.bf16;
  CheckResult& result = outcome.result;
  const DriverApi& api = *device.api;
  const EngineCapacity& cap = buffers.capacity();
  const int batch = int(p.seqlen_q.size());
  if (std::string bad = p.features.error(batch, p.heads_q); !bad.empty()) {
    result.error = bad;
    return outcome;
  }
  if (batch > cap.batch || total(p.seqlen_q) + 1 > cap.total_q || longest(p.seqlen_q) > cap.max_seqlen_q ||
      longest(p.seqlen_k) > cap.max_seqlen_k) {
    result.error = "problem does not fit the buffers' capacity";
    return outcome;
  }
  if (p.dense_q && (batch != cap.batch || std::any_of(p.seqlen_q.begin(), p.seqlen_q.end(), [&](int q) { return q != cap.max_seqlen_q; }))) {
    result.error = "dense queries need every sequence at the capacity's query count";
    return outcome;
  }
  // Metadata: sequences past `batch` (up to the capacity) are inactive: no queries, no keys.
  std::vector<int> seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k;
  seqlen_q.resize(size_t(cap.batch), 0);
  seqlen_k.resize(size_t(cap.batch), 0);
  HostLayout at{p, buffers, offsets_of(seqlen_q), offsets_of(seqlen_k), {}};
  if (p.kv == KvSource::kPaged) at.table = random_block_table(p, cap, rng);
  std::vector<int32_t> used(seqlen_k.begin(), seqlen_k.end());
  buffers.cu_seqlens_q.upload(at.cu_q.data(), at.cu_q.size() * 4);
  buffers.cu_seqlens_k.upload(at.cu_k.data(), at.cu_k.size() * 4);
  buffers.seqused_k.upload(used.data(), used.size() * 4);
  if (!at.table.empty()) buffers.block_table.upload(at.table.data(), at.table.size() * 4);
  // Inputs: fresh random values, NaN where no sequence reads (nan_padding); outputs poisoned (NaN).
  // Host rows: Q's and K's head_dim wide (qv_split too: split at upload).
  const EngineLayout host = engine_layout(p, cap);
  std::vector<uint16_t> q(p.qv_split ? size_t(host.q_elems) : buffers.q.bytes() / kElem);
  std::vector<uint16_t> k(p.qv_split ? size_t(host.k_elems) : buffers.k.bytes() / kElem);
  std::vector<uint16_t> v(p.qv_split ? 0 : buffers.v.bytes() / kElem);
  fill_random(q, p.bf16, rng);
  fill_random(k, p.bf16, rng);
  fill_random(v, p.bf16, rng);
  if (p.nan_padding) poison_unused(at, seqlen_k, q, k, v);
  if (p.fp8.on != (config.spec.kv_fp8() || config.spec.fp8_operands()) || (p.fp8.on && p.fp8.operands != config.spec.fp8_operands())) {
    result.error = "the problem's FP8 inputs differ from the spec's dtype and kv_dtype";
    return outcome;
  }
  // An FP8 latent cache (v_is_k_prefix with kv_dtype=e4m3): V's codes are K's, so one scale serves both.
  const bool fp8_latent = p.v_is_k_prefix && p.fp8.on && !p.fp8.operands && p.fp8.k_scale == p.fp8.v_scale;
  if (p.v_is_k_columns() && (p.kv_in_one_tensor || (p.fp8.on && !fp8_latent) || p.v_dim() > p.head_dim)) {
    result.error = "V as K's first columns (v_is_k_prefix, qv_split) takes K/V in their own tensor (16-bit, or an FP8 cache with "
                   "one scale for K and V), and head_dim_v at most head_dim";
    return outcome;
  }
  if (p.qv_split != config.spec.qv) {
    result.error = "the problem's qv_split differs from the spec's qv";
    return outcome;
  }
  if (p.fp8.on && p.fp8.operands && p.fp8.out_bf16 != (config.spec.out_dtype == DType::kBf16)) {
    result.error = "the problem's FP8 output type differs from the spec's out_dtype";
    return outcome;
  }
  Fp8Codes codes;
  if (p.fp8.on) {
    codes = quantise_inputs(at, seqlen_k, q, k, v, rng);
    buffers.k.upload(codes.k.data(), codes.k.size());
    if (!codes.v.empty()) buffers.v.upload(codes.v.data(), codes.v.size());
    const int sequences = buffers.capacity().batch;
    auto upload_scales = [&](DeviceBuffer& buffer, Fp8Tensor t) {
      const std::vector<float> scales = p.fp8.scales(t, sequences, p.heads_kv);
      buffer.upload(scales.data(), scales.size() * 4);
    };
    upload_scales(buffers.k_scale, Fp8Tensor::kK);
    upload_scales(buffers.v_scale, Fp8Tensor::kV);
    if (p.fp8.operands) upload_scales(buffers.q_scale, Fp8Tensor::kQ);
  } else if (p.qv_split) {  // K's rows into V (the first head_dim_v columns) and k; Q's into qv and q
    const SplitLayout split = split_layout(p, cap);
    const int d = p.head_dim, dv = p.v_dim();
    std::vector<uint16_t> dev_k(buffers.k.bytes() / kElem), dev_v(buffers.v.bytes() / kElem);
    std::vector<uint16_t> dev_q(buffers.q.bytes() / kElem), dev_qv(buffers.qv.bytes() / kElem);
    const int outer = p.kv == KvSource::kPaged ? cap.num_pages : p.kv == KvSource::kDense ? cap.batch : 1;
    const int rows = p.kv == KvSource::kPaged ? p.page_size : p.kv == KvSource::kDense ? cap.max_seqlen_k : cap.total_k;
    split_rows(k, host.k_strides, outer, rows, p.heads_kv, d, dv, dev_v, split.tail.v_strides, dev_k, split.tail.k_strides);
    const TensorStrides q_rows{0, int64_t(p.heads_q) * d, d};  // Q's host rows: [total_q][heads_q][d]
    split_rows(q, q_rows, 1, cap.total_q, p.heads_q, d, dv, dev_qv, {0, int64_t(p.heads_q) * dv, dv}, dev_q,
               {0, int64_t(p.heads_q) * (d - dv), d - dv});
    buffers.k.upload(dev_k.data(), buffers.k.bytes());
    buffers.v.upload(dev_v.data(), buffers.v.bytes());
    buffers.q.upload(dev_q.data(), buffers.q.bytes());
    buffers.qv.upload(dev_qv.data(), buffers.qv.bytes());
  } else {
    buffers.k.upload(k.data(), buffers.k.bytes());
    buffers.v.upload(v.data(), buffers.v.bytes());
  }
  if (p.fp8.on && p.fp8.operands) buffers.q.upload(codes.q.data(), codes.q.size());
  else if (!p.qv_split) buffers.q.upload(q.data(), buffers.q.bytes());
  const int64_t v_in_k = at.v_in_k();
  if (v_in_k >= 0) v.assign(k.begin() + v_in_k, k.end());  // V in K's rows (one K page on, or from their start)
  std::optional<Fp8SequenceReads> sequence_reads;  // scales per sequence: K and V read by code
  if (p.fp8.on && p.fp8.per_head && p.fp8.per_sequence) {
    Fp8SequenceReads& r = sequence_reads.emplace();
    r.k = &codes.k;
    r.v = p.v_in_k_buffer() ? std::vector<unsigned char>(codes.k.begin() + v_in_k, codes.k.end()) : codes.v;
    r.heads_kv = p.heads_kv;
    r.table.resize(size_t(cap.batch) * p.heads_kv * 2 * 256);
    for (int b = 0; b < cap.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int is_v = 0; is_v < 2; ++is_v) {
          const float scale = p.fp8.scale_of(is_v ? Fp8Tensor::kV : Fp8Tensor::kK, b, h);
          for (int code = 0; code < 256; ++code) {
            r.table[((size_t(b) * p.heads_kv + h) * 2 + is_v) * 256 + code] =
                half_bits_to_float(dequantised_bits((unsigned char)code, scale, p.bf16), p.bf16);
          }
        }
  }
  if (std::string bad = buffers.features.upload(p.features, p.sinks_bf16); !bad.empty()) {
    result.error = bad;
    return outcome;
  }
  buffers.o.fill_bytes(0xFF);
  buffers.lse.fill_bytes(0xFF);
  if (config.spec.dynamic_schedule != cap.tile_counter) {
    result.error = "the problem's dynamic_schedule differs from the spec's scheduler";
    return outcome;
  }
  if (config.spec.inline_combine != cap.merge_counters) {
    result.error = "the problem's inline_combine differs from the spec's combine";
    return outcome;
  }
  const AttentionArgs args = buffers.args(p, true);
  result.launched = args.features;
  result.launched_fp8 = args.fp8;
  // A partial a combine reads but no tile wrote shows as NaN; the counters are left as the last
  // launch left them (zero).
  const size_t start = size_t(buffers.workspace_start() - buffers.workspace.ptr());
  const size_t counter_end = cap.tile_counter || cap.merge_counters ? start + schedule_workspace_bytes(config, args) : 0;
  if (cap.merge_counters && counter_end > buffers.workspace.bytes()) {
    result.error = "the merge counters do not fit the buffers' workspace";
    return outcome;
  }
  buffers.workspace.fill_bytes(0xFF, counter_end);

  if (launch) {
    if (Status st = launch(args); !st) { result.error = "launch: " + st.error().message; return outcome; }
  } else {
    auto params = make_kernel_params(api, config, args, device.max_ctas);
    if (!params) { result.error = "launch: " + params.error().message; return outcome; }
    if (Status st = launch_attention_kernels(api, functions, config, args, *params, device.stream, device.max_ctas, false); !st) {
      result.error = "launch: " + st.error().message;
      return outcome;
    }
  }
  if (Status st = check(api, api.cuStreamSynchronize(device.stream), "attention kernel"); !st) {
    result.error = st.error().message;
    return outcome;
  }

  if (cap.tile_counter) {
    result.error = tile_counter_error(buffers.workspace, start);
    if (!result.error.empty()) return outcome;
  }
  if (cap.merge_counters) {
    result.error = merge_counters_error(buffers.workspace, start + merge_counters_offset(config), size_t(merge_counter_words(config, args)));
    if (!result.error.empty()) return outcome;
  }
  std::vector<char> checked;
  const Reference ref = engine_reference(at, q, k, v, cap.total_q, checked, sequence_reads ? &*sequence_reads : nullptr);
  std::vector<uint16_t> o_raw(buffers.o.bytes() / kElem);
  std::vector<float> lse(buffers.lse.bytes() / 4);
  buffers.o.download(o_raw.data(), buffers.o.bytes());
  buffers.lse.download(lse.data(), buffers.lse.bytes());
  const int used_rows = at.cu_q[size_t(cap.batch)];
  const size_t row_elems = size_t(p.heads_q) * p.v_dim();  // O's rows: head_dim_v columns
  std::vector<double> actual, expected;  // the checked rows' O
  for (size_t i = 0; i < ref.o.size(); ++i) {
    const float value = half_bits_to_float(o_raw[i], o_bf16);
    const size_t row = i / row_elems;
    const bool used_row = row < size_t(used_rows);
    if (used_row && std::isnan(value)) {
      if (result.unwritten++ == 0) outcome.detail = "O row " + std::to_string(row) + " unwritten";
    }
    if (!used_row && o_raw[i] != 0xFFFF) {
      if (result.error.empty()) result.error = "O row " + std::to_string(row) + " past the last sequence was written";
    }
    if (used_row && checked[row]) {
      actual.push_back(value);
      expected.push_back(ref.o[i]);
    }
  }
  result.o_error = relative_l2_error(actual, expected);
  // LSE as the kernel writes it: varlen [heads_q][total_q]; dense queries [batch][heads_q][seqlen_q].
  auto lse_at = [&](int h, int row) {
    if (!p.dense_q) return size_t(h) * cap.total_q + row;
    const int b = row / cap.max_seqlen_q, r = row % cap.max_seqlen_q;
    return (size_t(b) * p.heads_q + h) * cap.max_seqlen_q + r;
  };
  const bool exact = p.fp8.exact();
  for (int h = 0; h < p.heads_q; ++h) {
    for (int row = 0; row < cap.total_q; ++row) {
      const size_t i = size_t(h) * cap.total_q + row;
      if (p.dense_q && row >= used_rows) continue;  // the dense LSE has no rows past the batch
      const size_t got = lse_at(h, row);
      uint32_t bits;
      std::memcpy(&bits, &lse[got], 4);
      if (row >= used_rows) {
        if (bits != 0xFFFFFFFFu && result.error.empty()) result.error = "LSE of row " + std::to_string(row) + " past the last sequence was written";
        continue;
      }
      const double want = ref.lse[i];
      if (!std::isnan(lse[got]) && !checked[size_t(row)]) continue;  // written; not covered by the reference
      const double err = lse_entry_error(lse[got], want, ref.magnitude.empty() ? -1.0 : ref.magnitude[i], exact, result);
      if (err > result.lse_error && err > kLseErrorBound && outcome.detail.empty()) {
        outcome.detail = "LSE head " + std::to_string(h) + " row " + std::to_string(row) + ": " + std::to_string(lse[got]) + " vs " + std::to_string(want);
      }
      result.lse_error = std::max(result.lse_error, err);
    }
  }
  result.ran = true;
  return outcome;
}

}  // namespace flashjit
