// Numbers as the error messages print them: a device pointer or a flag word in hex ("0x1000"),
// a float in the shortest of fixed or exponent form ("30", "1e-05").
#pragma once
#include <cstdint>
#include <string>

namespace flashjit {

std::string hex_text(uint64_t value);
std::string float_text(float value);

}  // namespace flashjit
