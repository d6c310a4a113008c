// The on-disk form of one cache entry: pure functions from a kernel to bytes and back.
//
// Layout (integers little endian, strings as u32 length + bytes):
//   magic            8 bytes  kEntryMagic
//   format version   u32      kEntryFormatVersion
//   key              string   64 hex chars, must equal the key the file is looked up by
//   spec text        string
//   kernel name      string
//   NVRTC version    string   (format 2; format 1 entries have none and still decode)
//   ptxas report     5 x i32  registers, spill store, spill load, stack frame, static smem
//                   u32 + n strings  warnings
//   compile ms       f64      (IEEE-754 bits as u64)
//   cubin length     u64
//   cubin            bytes
//   checksum         32 bytes SHA-256 over every byte before it (cubin included)
// Invariant: decode_entry accepts exactly what encode_entry produced for that key (or format 1's
// encoder did); anything else
// (truncated, zeroed, one bit flipped, another key, another format version, extra bytes) is an error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "compile/compiled_kernel.hpp"

namespace flashjit {

inline constexpr std::string_view kEntryMagic{"FJCUBIN\0", 8};
inline constexpr std::uint32_t kEntryFormatVersion = 2;
// NOTES: still read: the key schema did not change, so an entry written before the NVRTC version
// was recorded holds the same kernel; only `cache list` cannot say which NVRTC compiled it.
inline constexpr std::uint32_t kEntryFormatVersionWithoutNvrtc = 1;
inline constexpr std::size_t kEntryChecksumBytes = 32;
inline constexpr std::size_t kEntryVersionOffset = 8;  // where the format version sits

std::string encode_entry(std::string_view key, const CompiledKernel& kernel);

// Errors are kCacheIo and say what is wrong ("bad magic", "checksum mismatch", ...).
Result<CompiledKernel> decode_entry(std::string_view bytes, std::string_view expected_key);

}  // namespace flashjit
