#include "runtime/tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <unistd.h>

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/SHA256.h>
#include <llvm/ADT/StringRef.h>

#include "cache/cache_key.hpp"
#include "common/log.hpp"
#include "compile/nvrtc_compiler.hpp"

namespace flashjit {
namespace {

constexpr const char* kTunedDir = "tuned";
constexpr int kRecordVersion = 1;
constexpr const char* kMagic = "flashjit-tuning";

std::string record_key(const AttentionSpec& base) {
  llvm::SHA256 hash;
  for (const std::string& part : {to_string(base), nvrtc_version(), std::string(kCacheSchema)}) {
    hash.update(std::to_string(part.size()) + ":");
    hash.update(part);
  }
  std::string hex;
  for (uint8_t byte : hash.final()) {
    char buf[3];
    std::snprintf(buf, sizeof(buf), "%02x", byte);
    hex += buf;
  }
  return hex;
}

void warn_once(const std::string& path, const std::string& problem) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(path).second) logger().warn("tuning record {} ignored: {}", path, problem);
}

}  // namespace

bool has_auto_tiles(const AttentionSpec& s) {
  return s.stages == 0 && s.consumer_wgs == 0 && s.block_m == 0 && s.block_n == 0 && s.cluster == 0 && s.overlap < 0 &&
         s.pingpong < 0;
}

std::string tuning_record_path(const std::string& cache_dir, const AttentionSpec& base) {
  return cache_dir + "/" + kTunedDir + "/" + record_key(base) + ".tuned";
}

Status save_tuning_record(const std::string& cache_dir, const AttentionSpec& base, const TuningRecord& record) {
  const std::string dir = cache_dir + "/" + kTunedDir;
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    return Error::make(ErrorCode::kCacheIo, "cannot create " + dir + ": " + ec.message());
  }
  // NOTES: a line-based text, not JSON: llvm/Support/JSON.h does not build with clang 14 in C++20
  // against libstdc++ 12, and the fuzz build compiles this library with clang.
  const std::string text = std::string(kMagic) + " " + std::to_string(kRecordVersion) + "\nbase_spec=" + record.base_spec +
                           "\nwinner_spec=" + record.winner_spec + "\nkernel_us=" + std::to_string(record.kernel_us) +
                           "\nshape=" + record.shape + "\nnvrtc=" + nvrtc_version() + "\n";
  // Publish atomically: a reader sees the old record, the new one, or none.
  const std::string path = tuning_record_path(cache_dir, base);
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Error::make(ErrorCode::kCacheIo, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Error::make(ErrorCode::kCacheIo, "cannot publish " + path);
  }
  return {};
}

std::optional<AttentionSpec> load_tuned_spec(const std::string& cache_dir, const AttentionSpec& base) {
  if (cache_dir.empty()) return std::nullopt;
  const std::string path = tuning_record_path(cache_dir, base);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;  // no record: the usual case
  // "flashjit-tuning 1" then key=value lines.
  std::string line, header, base_line, winner_line;
  std::getline(in, header);
  bool has_base = false, has_winner = false;
  while (std::getline(in, line)) {
    llvm::StringRef l(line);
    if (l.consume_front("base_spec=")) { base_line = l.str(); has_base = true; }
    else if (l.consume_front("winner_spec=")) { winner_line = l.str(); has_winner = true; }
  }
  if (header != std::string(kMagic) + " " + std::to_string(kRecordVersion) || !has_base || !has_winner) {
    warn_once(path, "not a version " + std::to_string(kRecordVersion) + " record");
    return std::nullopt;
  }
  const llvm::StringRef base_text(base_line), winner_text(winner_line);
  if (base_text != to_string(base)) {
    warn_once(path, "it is for '" + base_text.str() + "'");
    return std::nullopt;
  }
  auto winner = parse_spec(std::string_view(winner_text.data(), winner_text.size()));
  if (!winner) {
    warn_once(path, winner.error().message);
    return std::nullopt;
  }
  // The winner may only choose tiles and pipeline: the problem fields must be the base's.
  if (winner->dtype != base.dtype || winner->head_dim != base.head_dim || winner->causal != base.causal ||
      winner->hang_trap != base.hang_trap || (base.head_dim_v && winner->head_dim_v != base.head_dim_v)) {
    warn_once(path, "its winner '" + winner_text.str() + "' is another problem");
    return std::nullopt;
  }
  return *winner;
}

std::vector<std::size_t> confirm_candidates(const std::vector<double>& first_round_ms, std::size_t keep) {
  std::vector<std::size_t> ran;
  for (std::size_t i = 0; i < first_round_ms.size(); ++i)
    if (first_round_ms[i] >= 0) ran.push_back(i);
  std::stable_sort(ran.begin(), ran.end(), [&](std::size_t a, std::size_t b) { return first_round_ms[a] < first_round_ms[b]; });
  if (ran.size() > keep) ran.resize(keep);
  return ran;
}

std::optional<std::size_t> confirmed_winner(const std::vector<double>& summed_ms) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < summed_ms.size(); ++i)
    if (summed_ms[i] >= 0 && (!best || summed_ms[i] < summed_ms[*best])) best = i;
  return best;
}

}  // namespace flashjit
