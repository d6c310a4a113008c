#include "compile/ptxas_report.hpp"

#include <algorithm>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

namespace flashjit {
namespace {

// The integer right before `unit` in `line` ("Used 168 registers" -> 168), or -1.
int number_before(llvm::StringRef line, llvm::StringRef unit) {
  size_t at = line.find(unit);
  if (at == llvm::StringRef::npos) return -1;
  llvm::StringRef head = line.substr(0, at).rtrim();
  size_t start = head.find_last_not_of("0123456789");
  llvm::StringRef digits = head.substr(start == llvm::StringRef::npos ? 0 : start + 1);
  int value = -1;
  if (digits.empty() || digits.getAsInteger(10, value)) return -1;
  return value;
}

}  // namespace

PtxasReport parse_ptxas_report(std::string_view log_text, std::string_view kernel_name) {
  // NOTES: the log holds one block per function ("Compiling entry function 'X'", then "Function
  // properties for X", then "Used N registers"); warnings like C7508 stand apart at the top.
  PtxasReport report;
  llvm::SmallVector<llvm::StringRef, 32> lines;
  llvm::StringRef(log_text.data(), log_text.size()).split(lines, '\n');
  bool in_kernel = kernel_name.empty();
  const llvm::StringRef name(kernel_name.data(), kernel_name.size());
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.contains("(C75")) report.warnings.push_back(line.str());
    if (line.contains("Compiling entry function") || line.contains("Function properties for")) {
      in_kernel = name.empty() || line.contains(("'" + name.str() + "'")) || line.endswith(name);
      continue;
    }
    // Spills and stack count in every function of the module (a split_kv module's combine kernel
    // too): the zero-spill rule holds for all of them. The rest is the named kernel's.
    if (int v = number_before(line, " bytes stack frame"); v >= 0) report.stack_frame_bytes = std::max(report.stack_frame_bytes, v);
    if (int v = number_before(line, " bytes spill stores"); v >= 0) report.spill_store_bytes += v;
    if (int v = number_before(line, " bytes spill loads"); v >= 0) report.spill_load_bytes += v;
    if (!in_kernel) continue;
    if (int v = number_before(line, " registers"); v >= 0 && line.contains("Used")) report.registers = v;
    if (int v = number_before(line, " bytes smem"); v >= 0) report.static_smem_bytes = v;
  }
  return report;
}

}  // namespace flashjit
