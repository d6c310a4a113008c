// flashjit check: one kernel on fresh random data on the GPU against the float64 reference.
#include <algorithm>
#include <cstdio>
#include <random>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "driver/context.hpp"
#include "driver/device_info.hpp"
#include "tools/flashjit/commands.hpp"
#include "tools/flashjit/feature_flags.hpp"
#include "verify/check.hpp"
#include "verify/engine_check.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<std::string> Spec("spec", cl::desc("The kernel spec"), cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> Batch("batch", cl::desc("Batch size"), cl::init(2), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> SeqlenQ("seqlen-q", cl::desc("Query length"), cl::init(1000), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> SeqlenK("seqlen-k", cl::desc("Key length"), cl::init(1000), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> HeadsQ("heads-q", cl::desc("Query heads"), cl::init(8), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> HeadsKv("heads-kv", cl::desc("Key/value heads (divides heads-q)"), cl::init(8), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> Device("device", cl::desc("Device ordinal"), cl::init(0), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<std::string> Seqlens("seqlens", cl::desc("varlen/paged specs: each sequence's query and key counts, Q:K,Q:K,... "
                                                       "(zero allowed); default: --batch sequences of --seqlen-q:--seqlen-k"),
                                    cl::value_desc("Q:K,..."), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<int> PageSize("page-size", cl::desc("paged specs: keys per page (any value from 1)"), cl::init(16), cl::cat(tool_category()), cl::sub(check_command()));
static cl::opt<bool> VInK("v-in-k", cl::desc("varlen/paged specs: V is K's first head_dim_v columns, the same memory (MLA's latent cache)"),
                          cl::cat(tool_category()), cl::sub(check_command()));

namespace {

// --seqlens into the lengths; empty: `batch` copies of (seqlen_q, seqlen_k).
bool parse_seqlens(const std::string& text, EngineProblem& p, std::string* error) {
  if (!text.empty()) {
    if (parse_engine_lengths(text, &p.seqlen_q, &p.seqlen_k, error)) return true;
    *error = "--seqlens: " + *error;
    return false;
  }
  p.seqlen_q.assign(size_t(Batch), SeqlenQ);
  p.seqlen_k.assign(size_t(Batch), SeqlenK);
  return true;
}

// A ragged batch (varlen / paged spec) against the float64 reference.
int run_engine_check(const DriverApi& api, CUcontext context, CUstream stream, int sm_count, const AttentionFunctions& functions,
                     const KernelConfig& config, const FeatureChoice& features, const Fp8Cache& fp8) {
  EngineProblem p;
  p.bf16 = config.spec.dtype != DType::kFp16;  // e4m3: the bf16 copies
  p.head_dim = config.spec.head_dim;
  p.head_dim_v = config.spec.effective_head_dim_v();  // V and O
  p.causal = config.spec.causal;
  p.heads_q = HeadsQ, p.heads_kv = HeadsKv;
  p.kv = config.spec.paged ? KvSource::kPaged : KvSource::kPacked;
  p.page_size = PageSize;
  p.v_is_k_prefix = VInK || config.spec.v_is_k_rows();  // spec key v_in_k=1 (absorbed form) takes V in K's rows: implied
  p.qv_split = config.spec.qv;  // qv=1: Q and K uploaded in FlashAttention-3's four tensors
  if (config.spec.split_kv) p.max_splits = 16;  // the launch picks its count from the SMs, at most this
  p.dynamic_schedule = config.spec.dynamic_schedule;
  p.inline_combine = config.spec.inline_combine;
  std::string error;
  parse_seqlens(Seqlens, p, &error);  // checked before the device
  p.features = features.features;
  p.sinks_bf16 = features.sinks_bf16;
  p.fp8 = fp8;
  std::mt19937_64 rng(std::random_device{}());
  EngineBuffers buffers(api, p, capacity_for(p));
  const EngineCheck check = check_engine_attention({&api, context, stream, sm_count}, functions, config, p, buffers, rng);
  const CheckResult& r = check.result;
  const double bound = o_error_bound(p.bf16, fp8);
  const bool ok = r.passed_within(bound) && r.error.empty();
  if (json_option()) {
    llvm::json::Object out{{"spec", to_string(config.spec)}, {"shape", p.describe()}, {"head_dim", p.head_dim},
                           {"head_dim_v", p.v_dim()}, {"passed", ok},
                           {"o_rel_error", r.o_error}, {"o_bound", bound}, {"lse_error", r.lse_error},
                           {"lse_bound", kLseErrorBound}, {"unwritten", int64_t(r.unwritten)}, {"error", r.error},
                           {"detail", check.detail}, {"features", features_json(features, r.launched)}};
    if (fp8.on) out["fp8"] = fp8_json(fp8, r.launched_fp8);
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
  } else {
    std::printf("spec        %s\nshape       %s\n", to_string(config.spec).c_str(), p.describe().c_str());
    if (!r.error.empty()) std::printf("error       %s\n", r.error.c_str());
    if (!check.detail.empty()) std::printf("first bad   %s\n", check.detail.c_str());
    std::printf("O error     %.3e (bound %.0e, ||O - ref|| / ||ref|| against float64)\n", r.o_error, bound);
    std::printf("LSE error   %.3e (bound %.0e)\nunwritten   %zu\nresult      %s\n", r.lse_error, kLseErrorBound, r.unwritten,
                ok ? "PASS" : "FAIL");
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int run_check() {
  // 1. The kernel (parse errors exit 2 naming the field).
  if (Spec.getNumOccurrences() == 0) return missing_spec("check");
  auto spec = parse_spec(Spec);
  if (!spec) return fail(spec.error());
  const std::pair<const char*, int> extents[] = {{"batch", Batch}, {"seqlen-q", SeqlenQ}, {"seqlen-k", SeqlenK},
                                                 {"heads-q", HeadsQ}, {"heads-kv", HeadsKv}};
  for (auto [name, value] : extents) {
    if (value < 1) return usage_error(std::string("--") + name + " must be at least 1, got " + std::to_string(value));
  }
  if (HeadsQ % HeadsKv != 0) return usage_error("--heads-kv must divide --heads-q");
  if (spec->varlen || spec->paged) {  // the lengths before the device: bad usage is exit 2 anywhere
    EngineProblem lengths;
    std::string error;
    if (!parse_seqlens(Seqlens, lengths, &error)) return usage_error(error);
    if (PageSize < 1) return usage_error("--page-size must be at least 1, got " + std::to_string(PageSize));
  } else if (!Seqlens.empty()) {
    return usage_error("--seqlens needs a varlen=1 or paged=1 spec");
  }
  if (PageSize.getNumOccurrences() > 0 && !spec->paged) return usage_error("--page-size needs a paged=1 spec");
  if (VInK && !(spec->varlen || spec->paged)) return usage_error("--v-in-k needs a varlen=1 or paged=1 spec");
  if (spec->qv && !(spec->varlen || spec->paged)) return usage_error("check of a qv=1 spec needs varlen=1 or paged=1 (the engine inputs' check builds its four tensors)");
  if (spec->v_is_k_rows()) VInK = true;  // the kernel reads V from K's rows (args.v = args.k): the check's V is there too
  if (spec->qv && VInK) return usage_error("--v-in-k does not go with qv=1 (V is its own tensor there, K's first columns in the math)");
  if (VInK && spec->fp8_operands()) return usage_error("--v-in-k needs 16-bit or kv_dtype=e4m3 K and V (not dtype=e4m3)");
  // The mask and score flags against the spec's keys, for the sequences checked.
  int sequences = Batch;
  if (spec->varlen || spec->paged) {
    EngineProblem lengths;
    std::string error;
    parse_seqlens(Seqlens, lengths, &error);
    sequences = int(lengths.seqlen_q.size());
  }
  FeatureChoice features;
  if (std::string bad = features_from_flags(*spec, sequences, HeadsQ, &features); !bad.empty()) return usage_error(bad);
  // kv_dtype=e4m3: the cache's scales (--kv-scales, --kv-scale-per-head); dtype=e4m3: Q's, K's and
  // V's descales (--descale-per-head, --descale-non-pow2), the reference on bf16 copies.
  Fp8Cache fp8;
  if (std::string bad = fp8_from_flags(*spec, &fp8, VInK); !bad.empty()) return usage_error(bad);
  Engine engine(engine_options());
  auto family = engine.prepare_family(*spec, engine.options().policy);
  if (!family) return fail(family.error());
  // 2. The device.
  auto api = driver();
  if (!api) return fail(api.error());
  auto info = query_device(**api, Device);
  if (!info) return fail(info.error());
  if (!info->is_hopper()) return fail(Error::make(ErrorCode::kDriverUnavailable, "device " + std::to_string(Device) + " is " + info->name + ", not sm_90 (Hopper)"));
  auto context = PrimaryContext::retain(**api, Device);
  if (!context) return fail(context.error());
  if (Status st = check(**api, (*api)->cuCtxSetCurrent(context->get()), "cuCtxSetCurrent"); !st) return fail(st.error());
  CUstream stream = nullptr;
  if (Status st = check(**api, (*api)->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); !st) return fail(st.error());
  // What the C API would launch on this device.
  const PreparedKernel* prepared = &family->for_launch(attention_extents(Batch, SeqlenQ, SeqlenK, HeadsQ, HeadsKv), info->sm_count);
  auto loaded = engine.load(**api, *prepared, context->get());
  if (!loaded) return fail(loaded.error());
  // 3. Run and compare.
  if (prepared->config.spec.varlen || prepared->config.spec.paged) {
    const int rc = run_engine_check(**api, context->get(), stream, info->sm_count, {(*loaded)->function(), (*loaded)->more(0)}, prepared->config,
                                    features, fp8);
    (*api)->cuStreamDestroy(stream);
    engine.modules().drop_context(context->get());
    drop_verify_kernels(context->get());
    return rc;
  }
  Problem p;
  p.bf16 = prepared->config.spec.dtype != DType::kFp16;  // e4m3: the bf16 copies
  p.head_dim = prepared->config.spec.head_dim;
  p.head_dim_v = prepared->config.spec.effective_head_dim_v();  // V and O
  p.causal = prepared->config.spec.causal;
  p.batch = Batch; p.seqlen_q = SeqlenQ; p.seqlen_k = SeqlenK; p.heads_q = HeadsQ; p.heads_kv = HeadsKv;
  p.features = features.features;
  p.fp8 = fp8;
  std::mt19937_64 rng(std::random_device{}());
  CheckResult r = check_attention({*api, context->get(), stream, info->sm_count}, (*loaded)->function(), prepared->config, p,
                                  Layout::kContiguous, true, rng, features.sinks_bf16);
  (*api)->cuStreamDestroy(stream);
  // Modules go before the context that holds them is released.
  engine.modules().drop_context(context->get());
  drop_verify_kernels(context->get());
  const double bound = o_error_bound(p.bf16, fp8);
  const bool ok = r.passed_within(bound);
  if (json_option()) {
    llvm::json::Object out{{"spec", to_string(prepared->config.spec)}, {"shape", p.describe()}, {"head_dim", p.head_dim},
                           {"head_dim_v", p.v_dim()}, {"passed", ok},
                           {"o_rel_error", r.o_error}, {"o_bound", bound}, {"lse_error", r.lse_error},
                           {"lse_bound", kLseErrorBound}, {"unwritten", int64_t(r.unwritten)}, {"error", r.error},
                           {"features", features_json(features, r.launched)}};
    if (fp8.on) out["fp8"] = fp8_json(fp8, r.launched_fp8);
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
  } else {
    std::printf("spec        %s\nshape       %s\ndevice      %s\n", to_string(prepared->config.spec).c_str(), p.describe().c_str(),
                info->name.c_str());
    if (!r.error.empty()) std::printf("error       %s\n", r.error.c_str());
    std::printf("O error     %.3e (bound %.0e, ||O - ref|| / ||ref|| against float64)\n", r.o_error, bound);
    std::printf("LSE error   %.3e (bound %.0e)\nunwritten   %zu\nresult      %s\n", r.lse_error, kLseErrorBound, r.unwritten,
                ok ? "PASS" : "FAIL");
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace flashjit::tool
