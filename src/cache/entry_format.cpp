#include "cache/entry_format.hpp"

#include <bit>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

namespace flashjit {
namespace {

std::string sha256_bytes(std::string_view data) {
  const auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(llvm::StringRef(data.data(), data.size())));
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

Error malformed(std::string what) { return Error::make(ErrorCode::kCacheIo, "cache entry " + what); }

// ---- writing ----

class Writer {
 public:
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i32(int v) { u32(std::uint32_t(v)); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void bytes(std::string_view s) { out_.append(s); }
  void str(std::string_view s) {
    u32(std::uint32_t(s.size()));
    bytes(s);
  }
  std::string take() { return std::move(out_); }
  const std::string& view() const { return out_; }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// ---- reading: every read is bounds-checked; a failed read latches and the rest return zeros ----

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == data_.size(); }

  std::uint64_t uint(int n) {
    if (!take(n)) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t(std::uint8_t(data_[pos_ - n + i])) << (8 * i);
    return v;
  }
  int i32() { return int(std::int32_t(std::uint32_t(uint(4)))); }
  double f64() { return std::bit_cast<double>(uint(8)); }
  std::string bytes(std::uint64_t n) {
    if (!take(n)) return {};
    return std::string(data_.substr(pos_ - n, n));
  }
  std::string str() { return bytes(uint(4)); }

 private:
  bool take(std::uint64_t n) {
    if (!ok_ || n > data_.size() - pos_) return ok_ = false;
    pos_ += n;
    return true;
  }
  std::string_view data_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

void write_report(Writer& w, const PtxasReport& r) {
  w.i32(r.registers);
  w.i32(r.spill_store_bytes);
  w.i32(r.spill_load_bytes);
  w.i32(r.stack_frame_bytes);
  w.i32(r.static_smem_bytes);
  w.u32(std::uint32_t(r.warnings.size()));
  for (const std::string& warning : r.warnings) w.str(warning);
}

PtxasReport read_report(Reader& r) {
  PtxasReport report;
  report.registers = r.i32();
  report.spill_store_bytes = r.i32();
  report.spill_load_bytes = r.i32();
  report.stack_frame_bytes = r.i32();
  report.static_smem_bytes = r.i32();
  // NOTES: each warning takes at least its 4-byte length, so a bogus count stops at the first
  // failed read instead of reserving memory for it.
  const std::uint64_t count = r.uint(4);
  for (std::uint64_t i = 0; i < count && r.ok(); ++i) report.warnings.push_back(r.str());
  return report;
}

bool report_in_range(const PtxasReport& r) {
  return r.registers >= 0 && r.spill_store_bytes >= 0 && r.spill_load_bytes >= 0 && r.stack_frame_bytes >= 0 &&
         r.static_smem_bytes >= 0;
}

// Magic, version and checksum: the envelope, checked before any field is parsed.
Status check_envelope(std::string_view bytes) {
  const std::size_t minimum = kEntryMagic.size() + 4 + kEntryChecksumBytes;
  if (bytes.size() < minimum) return malformed("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes.substr(0, kEntryMagic.size()) != kEntryMagic) return malformed("has a bad magic (not a flashjit entry)");
  Reader version(bytes.substr(kEntryVersionOffset, 4));
  if (const auto v = version.uint(4); v != kEntryFormatVersion && v != kEntryFormatVersionWithoutNvrtc) {
    return malformed("has format version " + std::to_string(v) + ", expected " + std::to_string(kEntryFormatVersion) +
                     " (or " + std::to_string(kEntryFormatVersionWithoutNvrtc) + ")");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kEntryChecksumBytes);
  if (sha256_bytes(body) != bytes.substr(body.size())) return malformed("checksum mismatch (corrupt or truncated)");
  return Status::Ok();
}

}  // namespace

std::string encode_entry(std::string_view key, const CompiledKernel& kernel) {
  Writer w;
  w.bytes(kEntryMagic);
  w.u32(kEntryFormatVersion);
  w.str(key);
  w.str(kernel.spec_text);
  w.str(kernel.kernel_name);
  w.str(kernel.nvrtc_version);
  write_report(w, kernel.report);
  w.f64(kernel.compile_ms);
  w.u64(kernel.cubin.size());
  w.bytes(kernel.cubin);
  const std::string checksum = sha256_bytes(w.view());
  w.bytes(checksum);
  return w.take();
}

Result<CompiledKernel> decode_entry(std::string_view bytes, std::string_view expected_key) {
  // Check the envelope: a damaged or foreign file stops here.
  if (Status st = check_envelope(bytes); !st.ok()) return st.take_error();

  // Parse the fields between the version and the checksum.
  const std::size_t fields_begin = kEntryVersionOffset + 4;
  const bool has_nvrtc = Reader(bytes.substr(kEntryVersionOffset, 4)).uint(4) == kEntryFormatVersion;
  Reader r(bytes.substr(fields_begin, bytes.size() - kEntryChecksumBytes - fields_begin));
  const std::string key = r.str();
  CompiledKernel kernel;
  kernel.spec_text = r.str();
  kernel.kernel_name = r.str();
  if (has_nvrtc) kernel.nvrtc_version = r.str();
  kernel.report = read_report(r);
  kernel.compile_ms = r.f64();
  kernel.cubin = r.bytes(r.uint(8));

  // Check what was parsed: complete, nothing left over, sane values, and the right key.
  if (!r.ok()) return malformed("has a field running past its end");
  if (!r.at_end()) return malformed("has trailing bytes after the cubin");
  if (kernel.cubin.empty()) return malformed("has an empty cubin");
  if (!report_in_range(kernel.report)) return malformed("has a negative ptxas count");
  if (key != expected_key) {
    return malformed("holds key " + key.substr(0, 16) + "..., expected " + std::string(expected_key.substr(0, 16)) + "...");
  }
  return kernel;
}

}  // namespace flashjit
