#include "api/struct_size.hpp"

namespace flashjit::api {

ApiStatus check_struct_size(const char* name, const char* type_name, uint32_t struct_size, uint32_t min_size,
                            uint32_t known_size) {
  // NOTES: nothing is built before a check fails: this runs on the launch path, which never allocates.
  if (struct_size >= min_size && struct_size <= kMaxStructSize) return {};
  const std::string field = std::string(name) + ".struct_size";
  const std::string fix = "; set it to sizeof(" + std::string(type_name) + ")";
  if (struct_size < min_size) {
    return invalid_argument(field, field + ": " + std::to_string(struct_size) + " is smaller than the smallest " +
                                       type_name + " this library knows (" + std::to_string(min_size) + " bytes)" + fix);
  }
  return invalid_argument(field, field + ": " + std::to_string(struct_size) + " is absurd (this library's " +
                                     type_name + " is " + std::to_string(known_size) + " bytes, and no flashjit struct "
                                     "will exceed " + std::to_string(kMaxStructSize) + "); is it initialised?" + fix);
}

ApiStatus check_unknown_tail_zero(const char* name, const char* type_name, const void* data, uint32_t struct_size,
                                  uint32_t known_size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (uint32_t i = known_size; i < struct_size; ++i) {
    if (bytes[i] == 0) continue;
    const std::string field = std::string(name) + ".struct_size";
    return invalid_argument(field, field + ": " + std::to_string(struct_size) + " bytes, and byte " + std::to_string(i) +
                                       " is set; this library's " + type_name + " ends at " +
                                       std::to_string(known_size) + " bytes, so that is a field from a newer "
                                       "flashjit.h which this library cannot honour (leave it zero or upgrade)");
  }
  return {};
}

}  // namespace flashjit::api
