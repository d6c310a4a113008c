// Tables of argument changes the C API must refuse: each case changes a copy of some valid
// arguments and expects flashjit_validate_attention_args to fail naming `field`, with `says` in
// its message. Shared by the tests of the engine, split-KV and scheduler fields.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "flashjit/flashjit.h"

namespace flashjit {

struct ArgsRefusal {
  const char* spec;
  const char* field;
  const char* says;
  std::function<void(flashjit_attention_args_t&)> set;
};

// `valid_for(spec)`: the arguments each case starts from (valid for that spec).
inline void expect_each_refused(const std::function<flashjit_attention_args_t(const char* spec)>& valid_for,
                                std::initializer_list<ArgsRefusal> cases) {
  for (const ArgsRefusal& c : cases) {
    flashjit_attention_args_t a = valid_for(c.spec);
    c.set(a);
    EXPECT_EQ(flashjit_validate_attention_args(c.spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT) << c.spec << ": " << c.field;
    EXPECT_EQ(std::string(flashjit_last_error_field()), c.field) << c.spec << ": " << flashjit_last_error_message();
    EXPECT_NE(std::string(flashjit_last_error_message()).find(c.says), std::string::npos) << flashjit_last_error_message();
  }
}

inline void expect_each_refused(const flashjit_attention_args_t& valid, std::initializer_list<ArgsRefusal> cases) {
  expect_each_refused([&](const char*) { return valid; }, cases);
}

}  // namespace flashjit
