// flashjit source: the CUDA source a spec renders to and the NVRTC options it compiles with, for
// reading the kernel a spec gets and for inspecting its PTX or SASS with the CUDA toolkit.
#include <cstdio>

#include "config/kernel_config.hpp"
#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<std::string> Spec("spec", cl::desc("The kernel spec (tile fields left at auto take the table's values)"), cl::Required,
                                 cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(source_command()));

int run_source() {
  // 1. Spec -> config (parse errors exit 2 naming the field).
  auto spec = parse_spec(Spec);
  if (!spec) return fail(spec.error());
  auto config = make_config(*spec);
  if (!config) return fail(config.error());
  // 2. Config -> the exact compile request the engine would hash and compile.
  const CompileRequest request = make_compile_request(*config);
  std::printf("// flashjit source: %s\n// kernel: %s\n// nvrtc options:", request.spec_text.c_str(), request.kernel_name.c_str());
  for (const std::string& option : request.options) std::printf(" %s", option.c_str());
  std::printf("\n%s", request.source.c_str());
  return kExitOk;
}

}  // namespace flashjit::tool
