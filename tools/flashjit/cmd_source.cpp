// flashjit source: the CUDA source a spec renders to, the NVRTC options it compiles with and the
// nvcc options that compile the same text, for reading the kernel a spec gets and for inspecting
// its PTX or SASS with the CUDA toolkit. Like the engine, it takes the cache directory's tuning
// record for a spec left at auto; it writes nothing, not even the directory. A spec with a
// long-sequence kernel (config/length_choice.hpp) says so; --all-kernels prints both.
#include <cstdio>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "cache/cache_dir.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "runtime/tuning.hpp"
#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<std::string> Spec("spec", cl::desc("The kernel spec (tile fields left at auto take the tuning record's or the table's values)"),
                                 cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(source_command()));
static cl::opt<bool> AllKernels("all-kernels", cl::desc("A spec with a long-sequence kernel: print both (its own first); "
                                                        "--json gives an array"),
                                cl::cat(tool_category()), cl::sub(source_command()));

namespace {

// NVRTC's options as nvcc takes them. NOTES: the target as one -gencode (compute_90a to sm_90a),
// the one NVRTC compiles for and the one -cubin allows; --no-cache is NVRTC's own result cache.
std::vector<std::string> nvcc_options(const std::vector<std::string>& nvrtc) {
  const std::string arch_flag = std::string("--gpu-architecture=") + kTargetArch;
  const std::string arch = std::string(kTargetArch).substr(3);  // "90a"
  std::vector<std::string> out;
  for (const std::string& option : nvrtc) {
    if (option == "--no-cache") continue;
    out.push_back(option == arch_flag ? "-gencode=arch=compute_" + arch + ",code=sm_" + arch : option);
  }
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The spec the engine compiles for `asked`: a tuning record's winner where one applies
// (Engine::prepare), else asked. record_path says where the winner came from.
AttentionSpec spec_to_render(const AttentionSpec& asked, std::string* record_path) {
  if (!has_auto_tiles(asked)) return asked;
  const std::string dir = resolve_cache_dir(cache_dir_flag());
  auto tuned = load_tuned_spec(dir, asked);
  if (!tuned) return asked;
  *record_path = tuning_record_path(dir, asked);
  return *tuned;
}

// One kernel of the spec: its compile request, and which of the spec's kernels it is.
struct KernelSource {
  CompileRequest request;
  std::string role;  // "main" (every launch, or the shorter ones) or "long" (long sequences)
};

llvm::json::Object kernel_json(const KernelSource& k, bool tuned, const std::string& other_spec) {
  llvm::json::Array options, nvcc;
  for (const std::string& o : k.request.options) options.push_back(o);
  for (const std::string& o : nvcc_options(k.request.options)) nvcc.push_back(o);
  llvm::json::Object out{{"spec", k.request.spec_text}, {"kernel", k.request.kernel_name}, {"role", k.role},
                         {"options", std::move(options)}, {"nvcc_options", std::move(nvcc)}, {"tuned", tuned},
                         {"source", k.request.source}};
  // The spec's other kernel, so that a reader of one knows there is another (null: none).
  out["other_kernel_spec"] = other_spec.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(other_spec);
  return out;
}

void print_text(const KernelSource& k, const std::string& asked, const std::string& record_path, const std::string& other) {
  const CompileRequest& request = k.request;
  std::printf("// flashjit source: %s\n", request.spec_text.c_str());
  if (!record_path.empty()) std::printf("// tuned: flashjit tune's winner for %s, from the tuning record %s\n", asked.c_str(), record_path.c_str());
  if (!other.empty() && k.role == "main") {
    std::printf("// %s has two kernels: this one, and for long sequences %s (flashjit source --all-kernels prints both)\n",
                asked.c_str(), other.c_str());
  }
  if (k.role == "long") std::printf("// the long-sequence kernel of %s (its other kernel: %s)\n", asked.c_str(), other.c_str());
  std::printf("// kernel: %s\n// nvrtc options: %s\n", request.kernel_name.c_str(), joined(request.options).c_str());
  std::printf("// nvcc options: %s\n", joined(nvcc_options(request.options)).c_str());
  std::printf("//   e.g. nvcc <nvcc options> -cubin -o k.cubin k.cu && cuobjdump --dump-sass k.cubin\n");
  std::printf("%s", request.source.c_str());
}

}  // namespace

int run_source() {
  // 1. Spec -> config (parse errors exit 2 naming the field), with the tuning record's winner.
  if (Spec.getNumOccurrences() == 0) return missing_spec("source");
  auto spec = parse_spec(Spec);
  if (!spec) return fail(spec.error());
  std::string record_path;
  auto config = make_config(spec_to_render(*spec, &record_path));
  if (!config) return fail(config.error());
  // 2. Config -> the exact compile request the engine would hash and compile; and the
  // long-sequence kernel's, where the spec has one (a tuned spec has none: Engine::family_specs).
  std::vector<KernelSource> kernels{{make_compile_request(*config), "main"}};
  if (record_path.empty()) {
    if (auto variant = long_sequence_variant(*spec)) {
      auto long_config = make_config(variant->spec);
      if (!long_config) return fail(long_config.error());
      kernels.push_back({make_compile_request(*long_config), "long"});
    }
  }
  const bool tuned = !record_path.empty();
  auto other_of = [&](size_t i) { return kernels.size() == 2 ? kernels[1 - i].request.spec_text : std::string(); };
  const size_t shown = AllKernels ? kernels.size() : 1;
  if (json_option()) {
    if (!AllKernels) {
      llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(kernel_json(kernels[0], tuned, other_of(0)))) << "\n";
    } else {
      llvm::json::Array all;
      for (size_t i = 0; i < shown; ++i) all.push_back(kernel_json(kernels[i], tuned, other_of(i)));
      llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(all))) << "\n";
    }
    return kExitOk;
  }
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) std::printf("\n");
    print_text(kernels[i], to_string(*spec), record_path, other_of(i));
  }
  return kExitOk;
}

}  // namespace flashjit::tool
