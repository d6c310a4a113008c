#include "tools/flashjit/feature_flags.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <vector>

#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<int> WindowLeft("window-left", cl::desc("window=1 specs: keys a row sees left of its position (-1: unbounded)"),
                               cl::init(-1), cl::value_desc("N"), cl::cat(tool_category()), cl::sub(check_command()),
                               cl::sub(bench_command()));
static cl::opt<int> WindowRight("window-right", cl::desc("window=1 specs: keys a row sees right of its position (-1: unbounded)"),
                                cl::init(-1), cl::value_desc("N"), cl::cat(tool_category()), cl::sub(check_command()),
                                cl::sub(bench_command()));
static cl::opt<int> Chunk("chunk", cl::desc("chunk=1 specs: keys per attention chunk (a row sees only its own chunk)"), cl::init(0),
                          cl::value_desc("N"), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));
static cl::opt<double> Softcap("softcap", cl::desc("softcap=1 specs: the cap c in c * tanh(score * scale / c)"), cl::init(0),
                               cl::value_desc("C"), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));
static cl::opt<std::string> Sinks("sinks", cl::desc("sinks=1 specs: learnable sinks, random per head (seeded: large and very negative "
                                                    "logits mixed), or --sinks=VALUE for one logit on every head"),
                                  cl::ValueOptional, cl::value_desc("VALUE"), cl::cat(tool_category()), cl::sub(check_command()),
                                  cl::sub(bench_command()));
static cl::opt<std::string> SinksDtype("sinks-dtype", cl::desc("The sinks' type: fp32 or bf16"), cl::init("fp32"),
                                       cl::value_desc("fp32|bf16"), cl::cat(tool_category()), cl::sub(check_command()),
                                       cl::sub(bench_command()));
static cl::opt<bool> Alibi("alibi", cl::desc("alibi=1 specs: ALiBi with MPT's slopes 2^(-8 (h + 1) / heads) per head"), cl::init(false),
                           cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));
static cl::opt<bool> AlibiPerBatch("alibi-per-batch", cl::desc("alibi=1 specs: ALiBi slopes per sequence and head ([batch][heads], "
                                                               "MPT's scaled differently per sequence)"),
                                   cl::init(false), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));

static cl::opt<std::string> KvScales("kv-scales", cl::desc("kv_dtype=e4m3 specs: K's and V's dequantisation scales, K,V (or one for both; "
                                                         "default 0.5,0.25: powers of two, the dequantised cache exact)"),
                                     cl::value_desc("K,V"), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));
static cl::opt<bool> KvScalePerHead("kv-scale-per-head", cl::desc("kv_dtype=e4m3 specs: one scale per K/V head (--kv-scales' times 1, 0.5, "
                                                                 "2, 0.25 cycling; head stride 1), not one per tensor"),
                                    cl::init(false), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));

static cl::opt<bool> DescalePerHead("descale-per-head", cl::desc("dtype=e4m3 specs: descales per sequence and K/V head (FlashAttention-3's "
                                                                 "[batch, heads_kv]: the tensor's times 1, 0.5, 2, 0.25 cycling), not one per tensor"),
                                    cl::init(false), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));
static cl::opt<bool> DescaleNonPow2("descale-non-pow2", cl::desc("dtype=e4m3 specs: descales that are not powers of two (Q, K, V 0.3, 0.37, "
                                                                 "0.0913; per head times 1, 0.7, 1.3, 0.45), not the default 0.25, 0.5, 0.25"),
                                    cl::init(false), cl::cat(tool_category()), cl::sub(check_command()), cl::sub(bench_command()));

namespace {

// The random sinks' seed: the same logits every run, so a failing check can be repeated.
constexpr uint64_t kSinkSeed = 38;

bool given(const cl::Option& option) { return option.getNumOccurrences() > 0; }

std::string needs_key(const char* flag, const char* key) {
  return std::string("--") + flag + " needs spec key " + key + "=1, which the spec lacks";
}

// A sink logit as the launch reads it: rounded to float32 or bf16, so the reference sees the same.
double as_sink_type(double value, bool bf16) {
  const float f = float(value);
  return bf16 ? double(half_bits_to_float(float_to_half_bits(f, true), true)) : double(f);
}

// One logit per head, a third each (in a seeded shuffle) large (8..16: the sink outweighs every
// key), very negative (-100..-30: it counts for nothing) and moderate (normal, sd 2).
std::vector<double> random_sinks(int heads_q) {
  std::mt19937_64 rng(kSinkSeed);
  std::vector<int> kinds(static_cast<size_t>(heads_q));
  for (int h = 0; h < heads_q; ++h) kinds[size_t(h)] = h % 3;
  std::shuffle(kinds.begin(), kinds.end(), rng);
  std::uniform_real_distribution<double> large(8, 16), very_negative(-100, -30);
  std::normal_distribution<double> moderate(0, 2);
  std::vector<double> sinks;
  for (int kind : kinds) sinks.push_back(kind == 0 ? large(rng) : kind == 1 ? very_negative(rng) : moderate(rng));
  return sinks;
}

}  // namespace

std::string first_feature_flag() {
  for (const cl::Option* option : std::initializer_list<const cl::Option*>{&WindowLeft, &WindowRight, &Chunk, &Softcap, &Sinks, &SinksDtype,
                                                                           &Alibi, &AlibiPerBatch}) {
    if (given(*option)) return "--" + option->ArgStr.str();
  }
  return "";
}

std::string first_fp8_flag() {
  for (const cl::Option* option : std::initializer_list<const cl::Option*>{&KvScales, &KvScalePerHead, &DescalePerHead, &DescaleNonPow2}) {
    if (given(*option)) return "--" + option->ArgStr.str();
  }
  return "";
}

std::string fp8_from_flags(const AttentionSpec& spec, Fp8Cache* out, bool v_in_k) {
  *out = {};
  // 1. The value: K,V or one scale for both, each finite, above 0 and a normal float32.
  float scales[2] = {out->k_scale, out->v_scale};
  if (given(KvScales)) {
    const std::string text = KvScales;
    const size_t comma = text.find(',');
    const std::string parts[2] = {text.substr(0, comma), comma == std::string::npos ? text : text.substr(comma + 1)};
    for (int i = 0; i < 2; ++i) {
      char* end = nullptr;
      const double value = std::strtod(parts[i].c_str(), &end);
      if (parts[i].empty() || *end != '\0' || !std::isfinite(value) || !(value >= 1e-30 && value <= 1e30)) {
        return "--kv-scales: '" + text + "' is not allowed; allowed: K,V or one scale for both, each finite and above 0 (e.g. 0.5,0.25)";
      }
      scales[i] = float(value);
    }
  }
  // 2. The flags need the key: the cache's kv_dtype=e4m3, the operands' dtype=e4m3.
  for (const cl::Option* option : std::initializer_list<const cl::Option*>{&KvScales, &KvScalePerHead}) {
    if (given(*option) && !spec.kv_fp8()) return "--" + option->ArgStr.str() + " needs spec key kv_dtype=e4m3, which the spec lacks";
  }
  for (const cl::Option* option : std::initializer_list<const cl::Option*>{&DescalePerHead, &DescaleNonPow2}) {
    if (given(*option) && !spec.fp8_operands()) return "--" + option->ArgStr.str() + " needs spec key dtype=e4m3, which the spec lacks";
  }
  if (spec.fp8_operands()) {  // 3. FP8 operands: Q, K and V e4m3 with descales.
    out->on = out->operands = true;
    out->out_bf16 = spec.out_dtype == DType::kBf16;
    out->per_head = out->per_sequence = DescalePerHead;
    if (DescaleNonPow2) {
      out->q_scale = 0.3f, out->k_scale = 0.37f, out->v_scale = 0.0913f;
      out->head_factors = {1.0f, 0.7f, 1.3f, 0.45f};
    }
    return "";
  }
  if (!spec.kv_fp8()) return "";
  // 3. The cache.
  out->on = true;
  out->k_scale = scales[0], out->v_scale = scales[1];
  out->per_head = KvScalePerHead;
  if (v_in_k) {  // an FP8 latent cache: V's codes are K's, so one scale serves both
    if (given(KvScales) && scales[0] != scales[1]) {
      return "--kv-scales: '" + KvScales + "' is not allowed with --v-in-k; allowed: one scale for K and V (V's codes are K's)";
    }
    out->v_scale = out->k_scale;
  }
  return "";
}

llvm::json::Object fp8_json(const Fp8Cache& cache, const Fp8Inputs& launched) {
  llvm::json::Object launch{{"k_scale", launched.k_scale != 0}, {"v_scale", launched.v_scale != 0},
                            {"k_scale_head_stride", launched.k_scale_head_stride}, {"v_scale_head_stride", launched.v_scale_head_stride}};
  llvm::json::Object out{{"kv_dtype", cache.on ? "e4m3" : "dtype"}, {"k_scale", double(cache.k_scale)}, {"v_scale", double(cache.v_scale)},
                         {"per_head", cache.per_head}, {"exact", cache.exact()}};
  if (cache.on && cache.operands) {  // FP8 operands: Q's descale too, the scales' batch strides, O's type
    launch["q_scale"] = launched.q_scale != 0;
    launch["q_scale_head_stride"] = launched.q_scale_head_stride;
    for (auto [key, value] : {std::pair{"q_scale_batch_stride", launched.q_scale_batch_stride},
                              {"k_scale_batch_stride", launched.k_scale_batch_stride}, {"v_scale_batch_stride", launched.v_scale_batch_stride}}) {
      launch[key] = value;
    }
    out["dtype"] = "e4m3";
    out["q_scale"] = double(cache.q_scale);
    out["per_sequence"] = cache.per_head && cache.per_sequence;
    out["out_dtype"] = cache.out_bf16 ? "bf16" : "fp16";
  }
  out["launch"] = std::move(launch);
  return out;
}

double mpt_alibi_slope(int head, int heads_q) { return std::exp2(-8.0 * (head + 1) / heads_q); }

std::string features_from_flags(const AttentionSpec& spec, int batch, int heads_q, FeatureChoice* out) {
  *out = {};
  AttentionFeatures& f = out->features;
  // 1. Each flag's own value.
  for (auto [flag, value] : {std::pair{"window-left", int(WindowLeft)}, {"window-right", int(WindowRight)}}) {
    if (value < -1) return std::string("--") + flag + ": " + std::to_string(value) + " is not allowed; allowed: -1 (unbounded) or 0 and more keys";
  }
  if (given(Chunk) && Chunk < 1) return "--chunk: " + std::to_string(Chunk) + " is not allowed; allowed: 1 or more keys per chunk";
  if (given(Softcap) && !(std::isfinite(Softcap) && Softcap > 0)) {
    return "--softcap: " + std::to_string(Softcap) + " is not allowed; allowed: a finite cap above 0";
  }
  if (SinksDtype != "fp32" && SinksDtype != "bf16") return "--sinks-dtype: '" + SinksDtype + "' is not allowed; allowed: fp32, bf16";
  if (given(SinksDtype) && !given(Sinks)) return "--sinks-dtype needs --sinks";
  double sink_value = 0;
  if (given(Sinks) && !Sinks.empty()) {
    char* end = nullptr;
    sink_value = std::strtod(Sinks.c_str(), &end);
    if (end == Sinks.c_str() || *end != '\0' || !std::isfinite(sink_value)) {
      return "--sinks: '" + Sinks + "' is not allowed; allowed: --sinks (random logits per head) or --sinks=VALUE (a finite logit)";
    }
  }
  // 2. Each flag needs its spec key; each key but window needs its flag (the launch refuses a
  // chunk of 0, a softcap of 0 and missing sinks or slopes).
  const struct {
    const char* flag;
    bool flag_given;
    const char* key;
    bool has_key;
  } needs[] = {{"window-left", given(WindowLeft), "window", spec.window}, {"window-right", given(WindowRight), "window", spec.window},
               {"chunk", given(Chunk), "chunk", spec.chunk}, {"softcap", given(Softcap), "softcap", spec.softcap},
               {"sinks", given(Sinks), "sinks", spec.sinks}, {"sinks-dtype", given(SinksDtype), "sinks", spec.sinks},
               {"alibi", given(Alibi), "alibi", spec.alibi}, {"alibi-per-batch", given(AlibiPerBatch), "alibi", spec.alibi}};
  for (const auto& n : needs) {
    if (n.flag_given && !n.has_key) return needs_key(n.flag, n.key);
  }
  if (spec.chunk && !given(Chunk)) return "spec key chunk=1 needs --chunk N (keys per chunk)";
  if (spec.softcap && !given(Softcap)) return "spec key softcap=1 needs --softcap C (a finite cap above 0)";
  if (spec.sinks && !given(Sinks)) return "spec key sinks=1 needs --sinks (random logits per head) or --sinks=VALUE";
  if (spec.alibi && !given(Alibi) && !given(AlibiPerBatch)) return "spec key alibi=1 needs --alibi or --alibi-per-batch";
  // 3. The features.
  f.window_left = WindowLeft, f.window_right = WindowRight;
  f.chunk = Chunk;
  f.softcap = Softcap;
  if (given(Sinks)) {
    out->sinks_bf16 = SinksDtype == "bf16";
    f.sinks = Sinks.empty() ? random_sinks(heads_q) : std::vector<double>(size_t(heads_q), sink_value);
    for (double& sink : f.sinks) sink = as_sink_type(sink, out->sinks_bf16);
  }
  if (AlibiPerBatch) {  // sequence b's slopes: MPT's times 0.5, 0.75, 1, 1.25, 1.5, 0.5, ...
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads_q; ++h) f.alibi_slopes.push_back(double(float(mpt_alibi_slope(h, heads_q) * (0.5 + 0.25 * (b % 5)))));
  } else if (Alibi) {
    for (int h = 0; h < heads_q; ++h) f.alibi_slopes.push_back(double(float(mpt_alibi_slope(h, heads_q))));
  }
  return "";
}

llvm::json::Object features_json(const FeatureChoice& choice, const FeatureInputs& launched) {
  const AttentionFeatures& f = choice.features;
  llvm::json::Array sinks, slopes;
  for (double sink : f.sinks) sinks.push_back(sink);
  for (double slope : f.alibi_slopes) slopes.push_back(slope);
  llvm::json::Object launch{{"window_left", launched.window_left}, {"window_right", launched.window_right},
                            {"chunk", launched.chunk}, {"softcap", double(launched.softcap)},
                            {"sinks", launched.sinks != 0}, {"sinks_dtype", launched.sinks_bf16 ? "bf16" : "fp32"},
                            {"alibi_slopes", launched.alibi_slopes != 0}, {"alibi_batch_stride", launched.alibi_batch_stride}};
  return llvm::json::Object{{"window_left", f.window_left}, {"window_right", f.window_right}, {"chunk", f.chunk},
                            {"softcap", f.softcap}, {"sinks", std::move(sinks)},
                            {"sinks_dtype", choice.sinks_bf16 ? "bf16" : "fp32"}, {"alibi_slopes", std::move(slopes)},
                            {"launch", std::move(launch)}};
}

}  // namespace flashjit::tool
