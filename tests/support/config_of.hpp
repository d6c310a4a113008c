// A spec's resolved configuration for the CPU tests, the spec text named where it does not parse or
// resolve.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "config/kernel_config.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit {

inline KernelConfig config_of(const std::string& text) {
  auto spec = parse_spec(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.error().message;
  if (!spec.ok()) return {};
  auto config = make_config(*spec);
  EXPECT_TRUE(config.ok()) << text << ": " << config.error().message;
  return config.ok() ? *config : KernelConfig{};
}

}  // namespace flashjit
