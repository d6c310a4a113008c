#include "common/number_text.hpp"

#include <cstdio>

namespace flashjit {

std::string hex_text(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string float_text(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", double(value));
  return text;
}

}  // namespace flashjit
