// struct_size: how the C API's structs stay compatible across versions (rule in flashjit.h).
// An input struct is read into a local copy whose fields the caller did not pass keep their "off"
// values; bytes the caller passed beyond what this library knows must be zero. An output struct is
// written up to the smaller of the two sizes.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "api/api_status.hpp"

namespace flashjit::api {

// Larger than any struct flashjit will ever declare: a struct_size beyond it is a caller bug
// (an uninitialised field), refused before reading a byte past the known layout.
inline constexpr uint32_t kMaxStructSize = 4096;

// Checks struct_size alone. `name` is how messages call the struct ("options", "args").
ApiStatus check_struct_size(const char* name, const char* type_name, uint32_t struct_size, uint32_t min_size,
                            uint32_t known_size);

// Bytes [known_size, struct_size) of a larger struct from a newer header must all be zero.
ApiStatus check_unknown_tail_zero(const char* name, const char* type_name, const void* data, uint32_t struct_size,
                                  uint32_t known_size);

// Reads *in (struct_size bytes) over `out`, which holds the defaults for fields the caller's
// older layout lacks. min_size: the first published layout's size.
template <class T>
ApiStatus read_input_struct(const char* name, const char* type_name, const T* in, uint32_t min_size, T* out) {
  const uint32_t size = in->struct_size;
  if (ApiStatus st = check_struct_size(name, type_name, size, min_size, sizeof(T)); !st.ok()) return st;
  if (size > sizeof(T)) {
    if (ApiStatus st = check_unknown_tail_zero(name, type_name, in, size, sizeof(T)); !st.ok()) return st;
  }
  std::memcpy(static_cast<void*>(out), in, size < sizeof(T) ? size : sizeof(T));
  out->struct_size = sizeof(T);
  return {};
}

// Writes `value` into the caller's struct, up to its struct_size.
template <class T>
ApiStatus write_output_struct(const char* name, const char* type_name, T* out, uint32_t min_size, const T& value) {
  const uint32_t size = out->struct_size;
  if (ApiStatus st = check_struct_size(name, type_name, size, min_size, sizeof(T)); !st.ok()) return st;
  T copy = value;
  copy.struct_size = size;  // the caller's, unchanged
  std::memcpy(static_cast<void*>(out), &copy, size < sizeof(T) ? size : sizeof(T));
  return {};
}

}  // namespace flashjit::api
