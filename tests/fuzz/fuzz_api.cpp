// libFuzzer target: the spec parser and the C API's argument checking, with no GPU. The first byte
// picks what the rest of the input feeds:
//   0  spec text -> parse_spec (and the round trip parse(to_string(s)) == s), make_config,
//      flashjit_supported with a reason buffer of fuzzed size
//   1  flashjit_attention_args_t bytes (struct_size included) -> flashjit_validate_attention_args
//   2  a valid flashjit_attention_args_t with fuzzed bytes written over chosen fields -> the same
//   3  flashjit_context_options_t bytes -> flashjit_context_create (pointer fields made valid)
//   4  flashjit_attention_forward with a NULL kernel, and NULL args
//   5  cache bundle bytes -> decode_bundle, then decode_entry on each entry
// Invariants checked on every input (a violation traps, so libFuzzer reports it): every status is
// one flashjit_status_string names; every failure leaves a non-empty message; an invalid argument
// names its field; nothing crashes, leaks or reads out of bounds (ASan, UBSan).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/cache_bundle.hpp"
#include "cache/entry_format.hpp"
#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "spec/attention_spec.hpp"

namespace {

// Takes bytes off the front of the input.
struct Input {
  const uint8_t* data;
  size_t size;
  uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  std::string rest() { return std::string(reinterpret_cast<const char*>(data), size); }
};

void require(bool condition) {
  if (!condition) __builtin_trap();
}

// The invariants every API call's outcome must meet.
void check_outcome(flashjit_status_t status) {
  require(std::strcmp(flashjit_status_string(status), "FLASHJIT_STATUS_UNKNOWN") != 0);
  const std::string message = flashjit_last_error_message();
  require(status == FLASHJIT_SUCCESS ? message.empty() : !message.empty());
  if (status == FLASHJIT_ERROR_INVALID_ARGUMENT) require(*flashjit_last_error_field() != '\0');
}

const char* const kSpecs[] = {"dtype=bf16,head_dim=64", "dtype=fp16,head_dim=128,causal=1", "dtype=bf16,head_dim=256",
                              "dtype=fp16,head_dim=80,causal=1"};

void fuzz_spec(Input in) {
  const size_t reason_size = in.byte();
  const std::string text = in.rest();
  auto spec = flashjit::parse_spec(text);
  if (spec.ok()) {
    auto again = flashjit::parse_spec(flashjit::to_string(*spec));
    require(again.ok() && *again == *spec);
    (void)flashjit::make_config(*spec);
  } else {
    require(!spec.error().message.empty());
  }
  std::vector<char> reason(reason_size + 1, 'x');
  const std::string c_text(text.c_str());  // up to the first NUL, as a C caller would pass it
  const flashjit_status_t status = flashjit_supported(c_text.c_str(), reason_size ? reason.data() : nullptr, reason_size);
  check_outcome(status);
  if (reason_size) require(std::memchr(reason.data(), '\0', reason_size) != nullptr);
}

// NOTES: struct_size may claim up to the library's limit (4096 bytes), so the struct lives in a
// buffer that large: the contract is that struct_size bytes are readable.
alignas(8) unsigned char g_struct[4096 + 64];

void fuzz_raw_args(Input in) {
  const char* spec = kSpecs[in.byte() % 4];
  std::memset(g_struct, 0, sizeof(g_struct));
  const std::string bytes = in.rest();
  std::memcpy(g_struct, bytes.data(), std::min(bytes.size(), sizeof(g_struct)));
  check_outcome(flashjit_validate_attention_args(spec, reinterpret_cast<flashjit_attention_args_t*>(g_struct)));
}

void fuzz_field_overwrites(Input in) {
  const char* spec = kSpecs[in.byte() % 4];
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x100000;
  a.k = 0x200000;
  a.v = 0x300000;
  a.o = 0x400000;
  a.batch = 2;
  a.seqlen_q = a.seqlen_k = 128;
  a.heads_q = a.heads_kv = 4;
  a.q_strides = a.k_strides = a.v_strides = a.o_strides = flashjit_contiguous_bshd(128, 4, 256);
  std::memset(g_struct, 0, sizeof(g_struct));
  std::memcpy(g_struct, &a, sizeof(a));
  // (offset, length, bytes) triples over the struct, struct_size included.
  while (in.size >= 2) {
    const size_t offset = in.byte() % sizeof(a), length = 1 + in.byte() % 8;
    for (size_t i = 0; i < length && offset + i < sizeof(a); ++i) g_struct[offset + i] = in.byte();
  }
  check_outcome(flashjit_validate_attention_args(spec, reinterpret_cast<flashjit_attention_args_t*>(g_struct)));
}

void fuzz_context_options(Input in) {
  std::memset(g_struct, 0, sizeof(g_struct));
  const std::string bytes = in.rest();
  std::memcpy(g_struct, bytes.data(), std::min(bytes.size(), sizeof(g_struct)));
  auto* options = reinterpret_cast<flashjit_context_options_t*>(g_struct);
  // Pointers must be valid by contract: a real CUcontext or NULL, a C string or NULL.
  options->cu_context = nullptr;
  options->cache_dir = nullptr;
  options->cache_mode = options->cache_mode == 0 ? FLASHJIT_CACHE_MEMORY_ONLY : options->cache_mode;
  flashjit_context_t context = nullptr;
  const flashjit_status_t status = flashjit_context_create(options, &context);
  check_outcome(status);
  require((status == FLASHJIT_SUCCESS) == (context != nullptr));
  if (context) flashjit_context_destroy(context);
}

void fuzz_forward_without_kernel(Input in) {
  std::memset(g_struct, 0, sizeof(g_struct));
  const std::string bytes = in.rest();
  std::memcpy(g_struct, bytes.data(), std::min(bytes.size(), sizeof(g_struct)));
  const flashjit_status_t status =
      flashjit_attention_forward(nullptr, reinterpret_cast<flashjit_attention_args_t*>(g_struct), nullptr);
  require(status == FLASHJIT_ERROR_INVALID_ARGUMENT && std::strcmp(flashjit_last_error_field(), "kernel") == 0);
  check_outcome(flashjit_validate_attention_args(kSpecs[0], nullptr));
}

void fuzz_bundle(Input in) {
  const std::string bytes = in.rest();
  auto entries = flashjit::api::decode_bundle(bytes);
  if (!entries.ok()) {
    require(!entries.error().message.empty());
    return;
  }
  for (const auto& e : *entries) (void)flashjit::decode_entry(e.bytes, e.key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  switch (in.byte() % 6) {
    case 0: fuzz_spec(in); break;
    case 1: fuzz_raw_args(in); break;
    case 2: fuzz_field_overwrites(in); break;
    case 3: fuzz_context_options(in); break;
    case 4: fuzz_forward_without_kernel(in); break;
    case 5: fuzz_bundle(in); break;
  }
  return 0;
}
