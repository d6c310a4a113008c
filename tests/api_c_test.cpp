// The C API without a GPU: versions and the ABI check, status names, the thread-local last error,
// every struct_size rejection, null pointers (each argument of each function), launch arguments out
// of range and unsupported features set (errors naming the field), flashjit_supported's reasons,
// compile-only contexts, prewarm under each compile policy, cache bundles (round trip into a fresh
// directory; truncated, flipped, foreign and missing bundles refused with nothing imported), and
// context creation without a driver.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "driver_test_util.hpp"
#include "flashjit/flashjit.h"

namespace {

namespace fs = std::filesystem;

const char* kSpec = "dtype=bf16,head_dim=64";
const char* kSpec2 = "dtype=fp16,head_dim=64,causal=1";  // two kernels: it has a long-sequence one

std::string message() { return flashjit_last_error_message(); }
std::string field() { return flashjit_last_error_field(); }
bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// A fresh directory under the test temp dir, removed by the destructor.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    path = ::testing::TempDir() + "flashjit_api_" + name + "_" + std::to_string(getpid());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  size_t entries() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(path)) n += e.path().extension() == ".entry";
    return n;
  }
};

// A compile-only context (no driver needed) on `dir`.
flashjit_context_t compile_only_context(const std::string& dir, flashjit_compile_policy_t policy = FLASHJIT_COMPILE_POLICY_JIT,
                                        flashjit_cache_mode_t mode = FLASHJIT_CACHE_DISK) {
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = FLASHJIT_DEVICE_NONE;
  o.cache_dir = dir.c_str();
  o.compile_policy = policy;
  o.cache_mode = mode;
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_SUCCESS) << message();
  return ctx;
}

// Launch arguments that pass every check for kSpec (the addresses are never dereferenced).
flashjit_attention_args_t valid_args() {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x10000;
  a.k = 0x20000;
  a.v = 0x30000;
  a.o = 0x40000;
  a.lse = 0x50000;
  a.batch = 2;
  a.seqlen_q = 100;
  a.seqlen_k = 120;
  a.heads_q = 8;
  a.heads_kv = 2;
  a.q_strides = a.o_strides = flashjit_contiguous_bshd(100, 8, 64);
  a.k_strides = a.v_strides = flashjit_contiguous_bshd(120, 2, 64);
  return a;
}

void expect_args_error(const flashjit_attention_args_t& a, const std::string& want_field, const char* what) {
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT) << what;
  EXPECT_EQ(field(), want_field) << what << ": " << message();
  EXPECT_TRUE(starts_with(message(), want_field + ":")) << what << ": " << message();
}

// Versions, statuses, last error ---------------------------------------------------------------------

TEST(ApiC, VersionAndAbi) {
  EXPECT_EQ(flashjit_get_version(), FLASHJIT_VERSION);
  EXPECT_EQ(FLASHJIT_MAKE_VERSION(1, 2, 3), 10203u);
  unsigned major = 0, minor = 0, patch = 0;
  ASSERT_EQ(std::sscanf(FLASHJIT_VERSION_STRING, "%u.%u.%u", &major, &minor, &patch), 3);
  EXPECT_EQ(flashjit_get_version(), FLASHJIT_MAKE_VERSION(major, minor, patch)) << "the header's version is the project's";
  EXPECT_EQ(flashjit_abi_version(), FLASHJIT_ABI_VERSION);
  EXPECT_EQ(flashjit_check_abi(FLASHJIT_ABI_VERSION), FLASHJIT_SUCCESS);
  EXPECT_STREQ(flashjit_last_error_message(), "");
  EXPECT_EQ(flashjit_check_abi(FLASHJIT_ABI_VERSION + 1), FLASHJIT_ERROR_ABI_MISMATCH);
  EXPECT_EQ(field(), "header_abi_version");
  EXPECT_NE(message().find("ABI " + std::to_string(FLASHJIT_ABI_VERSION + 1)), std::string::npos) << message();
  EXPECT_NE(message().find("implements ABI " + std::to_string(FLASHJIT_ABI_VERSION)), std::string::npos) << message();
}

TEST(ApiC, EveryStatusHasItsOwnStaticName) {
  std::vector<std::string> names;
  for (flashjit_status_t s = FLASHJIT_SUCCESS; s <= FLASHJIT_ERROR_INTERNAL; ++s) {
    const char* name = flashjit_status_string(s);
    ASSERT_NE(name, nullptr);
    EXPECT_TRUE(starts_with(name, "FLASHJIT_")) << name;
    EXPECT_STRNE(name, "FLASHJIT_STATUS_UNKNOWN") << s;
    for (const std::string& earlier : names) EXPECT_NE(earlier, name);
    names.push_back(name);
  }
  EXPECT_STREQ(flashjit_status_string(FLASHJIT_SUCCESS), "FLASHJIT_SUCCESS");
  EXPECT_STREQ(flashjit_status_string(FLASHJIT_ERROR_WRONG_CONTEXT), "FLASHJIT_ERROR_WRONG_CONTEXT");
  for (flashjit_status_t s : {-1, 15, 1000, int32_t(FLASHJIT_STATUS_FORCE_32BIT)}) {
    EXPECT_STREQ(flashjit_status_string(s), "FLASHJIT_STATUS_UNKNOWN") << s;
  }
}

TEST(ApiC, EnumsAreFixedWidthAndStructLayoutsAreTheAbi) {
  EXPECT_EQ(sizeof(flashjit_status_t), 4u);
  EXPECT_EQ(sizeof(flashjit_compile_policy_t), 4u);
  EXPECT_EQ(sizeof(flashjit_cache_mode_t), 4u);
  EXPECT_EQ(sizeof(flashjit_attention_args_t), 440u);  // 256, 280 (engine extents), 304 (decode), 336 (masks), 408 (FP8): appended fields only
  EXPECT_EQ(offsetof(flashjit_attention_args_t, q_scale), 384u);
  EXPECT_EQ(offsetof(flashjit_attention_args_t, k_scale), 336u);
  EXPECT_EQ(offsetof(flashjit_attention_args_t, workspace), 280u);
  EXPECT_EQ(offsetof(flashjit_attention_args_t, attention_chunk), 304u);
  EXPECT_EQ(offsetof(flashjit_attention_args_t, alibi_batch_stride), 328u);
  EXPECT_EQ(sizeof(flashjit_context_options_t), 40u);
  EXPECT_EQ(sizeof(flashjit_context_info_t), 40u);
  EXPECT_EQ(sizeof(flashjit_kernel_info_t), 112u);  // 80 in 0.0, 96 in 0.1: appended fields only
  EXPECT_EQ(offsetof(flashjit_kernel_info_t, long_seqlen_spec), 80u);
  EXPECT_EQ(offsetof(flashjit_kernel_info_t, long_seqlen_min_uneven), 96u);
}

TEST(ApiC, LastErrorIsClearedBySuccessAndIsPerThread) {
  EXPECT_EQ(flashjit_supported("head_dim=300", nullptr, 0), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(field(), "head_dim");
  // Another thread's errors and successes leave this thread's error alone, and vice versa.
  std::string other_field, other_message_at_start;
  std::thread([&] {
    other_message_at_start = flashjit_last_error_message();
    EXPECT_EQ(flashjit_supported("dtype=fp32", nullptr, 0), FLASHJIT_ERROR_INVALID_SPEC);
    other_field = flashjit_last_error_field();
  }).join();
  EXPECT_EQ(other_message_at_start, "") << "a new thread starts with no error";
  EXPECT_EQ(other_field, "dtype");
  EXPECT_EQ(field(), "head_dim") << "still this thread's own";
  std::thread([] { EXPECT_EQ(flashjit_supported(kSpec, nullptr, 0), FLASHJIT_SUCCESS); }).join();
  EXPECT_EQ(field(), "head_dim");
  EXPECT_EQ(flashjit_supported(kSpec, nullptr, 0), FLASHJIT_SUCCESS);
  EXPECT_STREQ(flashjit_last_error_message(), "");
  EXPECT_STREQ(flashjit_last_error_field(), "");

  // Many threads at once, each with its own field.
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        flashjit_attention_args_t a = valid_args();
        const bool strides = (t + i) % 2 == 0;
        if (strides) a.k_strides.row = -8; else a.seqlen_q = -1;
        (void)flashjit_validate_attention_args(kSpec, &a);
        const std::string want = strides ? "args.k_strides.row" : "args.seqlen_q";
        if (flashjit_last_error_field() != want) mismatches++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, 0);
}

// struct_size -----------------------------------------------------------------------------------------

TEST(ApiC, ContextOptionsStructSizeIsChecked) {
  TempDir dir("struct_size");
  flashjit_context_t ctx = nullptr;
  for (uint32_t size : {0u, 4u, 39u}) {
    flashjit_context_options_t o;
    flashjit_context_options_init(&o);
    o.struct_size = size;
    EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_EQ(field(), "options.struct_size");
    EXPECT_NE(message().find("smaller than"), std::string::npos) << message();
    EXPECT_NE(message().find("sizeof(flashjit_context_options_t)"), std::string::npos) << message();
  }
  for (uint32_t size : {4097u, 1u << 20, 0xffffffffu}) {
    flashjit_context_options_t o;
    flashjit_context_options_init(&o);
    o.struct_size = size;
    EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_EQ(field(), "options.struct_size");
    EXPECT_NE(message().find("absurd"), std::string::npos) << message();
  }
  // A newer caller's larger struct: fine while the fields this library does not know are zero.
  struct Newer {
    flashjit_context_options_t known;
    uint64_t newer_field;
  } newer{};
  flashjit_context_options_init(&newer.known);
  newer.known.struct_size = sizeof(newer);
  newer.known.device = FLASHJIT_DEVICE_NONE;
  newer.known.cache_dir = dir.path.c_str();
  ASSERT_EQ(flashjit_context_create(&newer.known, &ctx), FLASHJIT_SUCCESS) << message();
  flashjit_context_destroy(ctx);
  newer.newer_field = 1;
  EXPECT_EQ(flashjit_context_create(&newer.known, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "options.struct_size");
  EXPECT_NE(message().find("newer flashjit.h"), std::string::npos) << message();
  EXPECT_EQ(ctx, nullptr);
}

TEST(ApiC, AttentionArgsStructSizeIsChecked) {
  for (uint32_t size : {0u, 8u, 255u}) {
    flashjit_attention_args_t a = valid_args();
    a.struct_size = size;
    EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(field(), "args.struct_size");
  }
  flashjit_attention_args_t absurd = valid_args();
  absurd.struct_size = 100000;
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &absurd), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.struct_size");
  struct Newer {
    flashjit_attention_args_t known;
    int64_t future_feature;
  } newer{};
  newer.known = valid_args();
  newer.known.struct_size = sizeof(newer);
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &newer.known), FLASHJIT_SUCCESS) << message();
  newer.future_feature = -1;
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &newer.known), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.struct_size");
}

TEST(ApiC, InfoStructSizeIsChecked) {
  TempDir dir("info_size");
  flashjit_context_t ctx = compile_only_context(dir.path);
  flashjit_context_info_t info{};
  info.struct_size = 3;
  EXPECT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "info.struct_size");
  info.struct_size = 5000;
  EXPECT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "info.struct_size");
  flashjit_context_destroy(ctx);
}

// Null pointers ---------------------------------------------------------------------------------------

TEST(ApiC, EveryNullPointerArgumentIsNamed) {
  TempDir dir("nulls");
  flashjit_context_t ctx = compile_only_context(dir.path);
  flashjit_kernel_t kernel = nullptr;
  flashjit_context_info_t context_info{};
  context_info.struct_size = sizeof(context_info);
  flashjit_kernel_info_t kernel_info{};
  kernel_info.struct_size = sizeof(kernel_info);
  const flashjit_attention_args_t args = valid_args();
  const char* specs[] = {kSpec};
  const char* null_specs[] = {kSpec, nullptr};
  const std::string bundle = dir.path + "/bundle";
  size_t imported = 0;
  auto check = [&](const char* what, flashjit_status_t status, const char* want) {
    EXPECT_EQ(status, FLASHJIT_ERROR_INVALID_ARGUMENT) << what;
    EXPECT_EQ(field(), want) << what;
    EXPECT_EQ(message(), std::string(want) + ": must not be NULL") << what;
  };
  check("context_create(out)", flashjit_context_create(nullptr, nullptr), "context");
  check("context_describe(context)", flashjit_context_describe(nullptr, &context_info), "context");
  check("context_describe(info)", flashjit_context_describe(ctx, nullptr), "info");
  check("kernel_get(kernel)", flashjit_kernel_get(ctx, kSpec, nullptr), "kernel");
  check("kernel_get(context)", flashjit_kernel_get(nullptr, kSpec, &kernel), "context");
  check("kernel_get(spec)", flashjit_kernel_get(ctx, nullptr, &kernel), "spec");
  check("kernel_describe(kernel)", flashjit_kernel_describe(nullptr, &kernel_info), "kernel");
  check("attention_forward(kernel)", flashjit_attention_forward(nullptr, &args, nullptr), "kernel");
  check("attention_forward(kernel, args)", flashjit_attention_forward(nullptr, nullptr, nullptr), "kernel");
  const char* launch_spec = "unset";
  check("kernel_launch_spec(spec)", flashjit_kernel_launch_spec(nullptr, &args, nullptr), "spec");
  check("kernel_launch_spec(kernel)", flashjit_kernel_launch_spec(nullptr, &args, &launch_spec), "kernel");
  EXPECT_EQ(launch_spec, nullptr) << "reset on failure";
  check("validate(spec)", flashjit_validate_attention_args(nullptr, &args), "spec");
  check("validate(args)", flashjit_validate_attention_args(kSpec, nullptr), "args");
  check("supported(spec)", flashjit_supported(nullptr, nullptr, 0), "spec");
  check("prewarm(context)", flashjit_prewarm(nullptr, specs, 1), "context");
  check("prewarm(specs)", flashjit_prewarm(ctx, nullptr, 1), "specs");
  check("prewarm(specs[1])", flashjit_prewarm(ctx, null_specs, 2), "specs[1]");
  check("cache_export(context)", flashjit_cache_export(nullptr, specs, 1, bundle.c_str()), "context");
  check("cache_export(specs)", flashjit_cache_export(ctx, nullptr, 1, bundle.c_str()), "specs");
  check("cache_export(path)", flashjit_cache_export(ctx, specs, 1, nullptr), "path");
  check("cache_import(context)", flashjit_cache_import(nullptr, bundle.c_str(), &imported), "context");
  check("cache_import(path)", flashjit_cache_import(ctx, nullptr, &imported), "path");
  // Releasing nothing is a no-op; describe's info pointer is checked after the handle.
  EXPECT_EQ(flashjit_context_destroy(nullptr), FLASHJIT_SUCCESS);
  EXPECT_EQ(flashjit_kernel_release(nullptr), FLASHJIT_SUCCESS);
  // Null output handles are reset on failure.
  kernel = reinterpret_cast<flashjit_kernel_t>(0x1);
  EXPECT_EQ(flashjit_kernel_get(ctx, nullptr, &kernel), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kernel, nullptr);
  // A count of zero, or absurd, is refused before the array is read.
  EXPECT_EQ(flashjit_prewarm(ctx, specs, 0), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "count");
  EXPECT_EQ(flashjit_prewarm(ctx, specs, size_t(1) << 40), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "count");
  flashjit_context_destroy(ctx);
}

// Launch arguments ------------------------------------------------------------------------------------

TEST(ApiC, ValidArgumentsPass) {
  flashjit_attention_args_t a = valid_args();
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_SUCCESS) << message();
  a.head_dim = 64;  // explicit and equal to the kernel's
  a.lse = 0;        // no LSE
  a.softmax_scale = 0.5f;
  a.softcap = -0.0f;  // still off
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_SUCCESS) << message();
  // Strides beyond 2^31 elements are legal (a large KV pool); only lengths are 32-bit.
  a.k_strides.batch = a.v_strides.batch = int64_t(1) << 34;
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_SUCCESS) << message();
}

TEST(ApiC, LengthsOutOfRangeAreNamed) {
  const int64_t too_long = int64_t(1) << 31;
  const struct {
    const char* field;
    int64_t flashjit_attention_args_t::*member;
    std::vector<int64_t> bad;
  } cases[] = {
      {"args.batch", &flashjit_attention_args_t::batch, {0, -1, 65536, too_long, std::numeric_limits<int64_t>::min()}},
      {"args.seqlen_q", &flashjit_attention_args_t::seqlen_q, {0, -5, too_long, too_long + 7, int64_t(1) << 62}},
      {"args.seqlen_k", &flashjit_attention_args_t::seqlen_k, {0, -1, too_long, std::numeric_limits<int64_t>::max()}},
      {"args.heads_q", &flashjit_attention_args_t::heads_q, {0, -8, 65536, too_long}},
      {"args.heads_kv", &flashjit_attention_args_t::heads_kv, {0, -2, 3, 16, too_long}},
  };
  for (const auto& c : cases) {
    for (int64_t value : c.bad) {
      flashjit_attention_args_t a = valid_args();
      a.*(c.member) = value;
      expect_args_error(a, c.field, (std::string(c.field) + " = " + std::to_string(value)).c_str());
    }
  }
  // Each field in range, but more tiles (query blocks x heads x batch) than one grid dimension holds.
  flashjit_attention_args_t a = valid_args();
  a.batch = 65535;
  a.heads_q = 65535;
  a.heads_kv = 1;
  expect_args_error(a, "args.batch", "65535 x 65535 tiles");
  EXPECT_NE(message().find("2^31"), std::string::npos) << message();
  a.batch = 32768;  // 32768 x 65535 one-block tiles: below 2^31
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &a), FLASHJIT_SUCCESS) << message();
  // With clusters the query blocks are padded to pairs, and it is the padded count the grid holds:
  // 16385 x 65535 single query blocks fit, their 2 x 16385 x 65535 padded tiles do not.
  const char* pairs = "dtype=bf16,head_dim=128,cluster=2";
  a.seqlen_q = 1;
  a.q_strides = a.o_strides = flashjit_contiguous_bshd(1, 8, 128);
  a.k_strides = a.v_strides = flashjit_contiguous_bshd(120, 2, 128);
  a.batch = 16384;
  EXPECT_EQ(flashjit_validate_attention_args(pairs, &a), FLASHJIT_SUCCESS) << message();
  a.batch = 16385;
  EXPECT_EQ(flashjit_validate_attention_args(pairs, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.batch") << message();
  // d256 causal at auto runs its cluster kernel from 8192 where the device's SM count decides
  // (flashjit_kernel_info_t), so validation without a GPU applies both kernels' checks there:
  // 448 x 65535 heads of 73 query blocks fit the grid, padded to 74 they do not.
  const char* d256 = "dtype=bf16,head_dim=256,causal=1";
  a.batch = 448;
  a.heads_q = 65535;
  a.heads_kv = 1;
  for (int64_t seqlen : {int64_t(8191), int64_t(9300)}) {
    a.seqlen_q = a.seqlen_k = seqlen;
    a.q_strides = a.o_strides = flashjit_contiguous_bshd(seqlen, 65535, 256);
    a.k_strides = a.v_strides = flashjit_contiguous_bshd(seqlen, 1, 256);
    const flashjit_status_t expected = seqlen >= 8192 ? FLASHJIT_ERROR_INVALID_ARGUMENT : FLASHJIT_SUCCESS;
    EXPECT_EQ(flashjit_validate_attention_args(d256, &a), expected) << seqlen << ": " << message();
    EXPECT_EQ(flashjit_validate_attention_args("dtype=bf16,head_dim=256,causal=1,cluster=1", &a), FLASHJIT_SUCCESS) << message();
  }
  EXPECT_EQ(field(), "") << "the last call succeeded";
}

TEST(ApiC, StridesOutOfRangeAreNamed) {
  const char* tensors[] = {"q", "k", "v", "o"};
  const char* parts[] = {"batch", "row", "head"};
  for (int t = 0; t < 4; ++t) {
    for (int p = 0; p < 3; ++p) {
      for (int64_t value : {int64_t(0), int64_t(-8), int64_t(-1) << 40, int64_t(12), int64_t(65), int64_t(1) << 39,
                            std::numeric_limits<int64_t>::max()}) {
        flashjit_attention_args_t a = valid_args();
        flashjit_tensor_strides_t* all[] = {&a.q_strides, &a.k_strides, &a.v_strides, &a.o_strides};
        int64_t* slots[] = {&all[t]->batch, &all[t]->row, &all[t]->head};
        *slots[p] = value;
        const std::string want = std::string("args.") + tensors[t] + "_strides." + parts[p];
        expect_args_error(a, want, (want + " = " + std::to_string(value)).c_str());
      }
    }
  }
}

TEST(ApiC, PointersAndScaleAreChecked) {
  for (auto [name, member] : {std::pair{"args.q", &flashjit_attention_args_t::q}, std::pair{"args.k", &flashjit_attention_args_t::k},
                              std::pair{"args.v", &flashjit_attention_args_t::v}, std::pair{"args.o", &flashjit_attention_args_t::o}}) {
    for (uint64_t value : {uint64_t(0), uint64_t(0x10008), uint64_t(0x10001)}) {
      flashjit_attention_args_t a = valid_args();
      a.*member = value;
      expect_args_error(a, name, name);
    }
  }
  flashjit_attention_args_t a = valid_args();
  a.lse = 0x50002;
  expect_args_error(a, "args.lse", "lse misaligned");
  for (float scale : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), -0.125f}) {
    a = valid_args();
    a.softmax_scale = scale;
    expect_args_error(a, "args.softmax_scale", "scale");
  }
  a = valid_args();
  a.head_dim = 128;
  expect_args_error(a, "args.head_dim", "head_dim mismatch");
  EXPECT_NE(message().find("kernel's head_dim 64"), std::string::npos) << message();
}

TEST(ApiC, UndefinedFlagsAreNamed) {
  flashjit_attention_args_t a = valid_args();
  a.flags = 4;
  expect_args_error(a, "args.flags", "flags");
}

// MASKS AND SCORES: a value that is not off, on a kernel whose spec lacks its key, is refused by
// the core's check (launch/feature_args.cpp; every field's message: FeatureArgs.*SpecKey*) as the
// caller sees it: the status names the field as the caller spells it, the message the value, the
// key, the kernel's spec and what the field may hold without the key.
TEST(ApiC, FeatureValuesNeedTheirSpecKey) {
  struct Case {
    const char* field;
    const char* value;  // as the message prints it
    const char* key;
    const char* off;
    void (*set)(flashjit_attention_args_t&);
  } cases[] = {
      {"args.softcap", "30", "softcap=1", "0 (off)", [](flashjit_attention_args_t& a) { a.softcap = 30.0f; }},
      {"args.window_left", "0", "window=1", "-1 (off)", [](flashjit_attention_args_t& a) { a.window_left = 0; }},
      {"args.window_left", "127", "window=1", "-1 (off)", [](flashjit_attention_args_t& a) { a.window_left = 127; }},
      {"args.window_right", "0", "window=1", "-1 (off)", [](flashjit_attention_args_t& a) { a.window_right = 0; }},
      {"args.attention_chunk", "8192", "chunk=1", "0 (off)", [](flashjit_attention_args_t& a) { a.attention_chunk = 8192; }},
      {"args.sinks", "0x1000", "sinks=1", "0 (null)", [](flashjit_attention_args_t& a) { a.sinks = 0x1000, a.sinks_dtype = FLASHJIT_DTYPE_FP32; }},
      {"args.sinks_dtype", "bf16", "sinks=1", "0 (no sinks)", [](flashjit_attention_args_t& a) { a.sinks_dtype = FLASHJIT_DTYPE_BF16; }},
      {"args.alibi_slopes", "0x1000", "alibi=1", "0 (null)", [](flashjit_attention_args_t& a) { a.alibi_slopes = 0x1000; }},
      {"args.alibi_batch_stride", "32", "alibi=1", "0 (off)", [](flashjit_attention_args_t& a) { a.alibi_batch_stride = 32; }},
  };
  for (const Case& c : cases) {
    flashjit_attention_args_t a = valid_args();
    c.set(a);
    expect_args_error(a, c.field, c.field);
    const std::string head = std::string(c.field) + ": " + c.value + " needs spec key " + c.key + " (this kernel's spec is " + kSpec + ",";
    const std::string tail = std::string("); allowed without it: ") + c.off;
    EXPECT_TRUE(starts_with(message(), head)) << message();
    EXPECT_TRUE(message().size() > tail.size() && message().compare(message().size() - tail.size(), tail.size(), tail) == 0) << message();
  }
  // A struct filled from zero has window 0, which is a window: the init helper is the way to get "off".
  flashjit_attention_args_t zeroed = valid_args();
  zeroed.window_left = zeroed.window_right = 0;
  EXPECT_EQ(flashjit_validate_attention_args(kSpec, &zeroed), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.window_left");
  EXPECT_NE(message().find("allowed without it: -1 (off)"), std::string::npos) << message();
}

// What the API layer refuses whatever the spec: the bad input, named by field.
TEST(ApiC, FeatureValuesOutOfRangeAreNamed) {
  struct Case {
    const char* field;
    void (*set)(flashjit_attention_args_t&);
  } cases[] = {
      {"args.window_left", [](flashjit_attention_args_t& a) { a.window_left = -2; }},
      {"args.window_right", [](flashjit_attention_args_t& a) { a.window_right = -7; }},
      {"args.attention_chunk", [](flashjit_attention_args_t& a) { a.attention_chunk = -1; }},
      {"args.softcap", [](flashjit_attention_args_t& a) { a.softcap = -1.0f; }},
      {"args.softcap", [](flashjit_attention_args_t& a) { a.softcap = std::nanf(""); }},
      {"args.softcap", [](flashjit_attention_args_t& a) { a.softcap = std::numeric_limits<float>::infinity(); }},
      {"args.sinks_dtype", [](flashjit_attention_args_t& a) { a.sinks_dtype = FLASHJIT_DTYPE_FP16; }},
      {"args.sinks_dtype", [](flashjit_attention_args_t& a) { a.sinks_dtype = 7; }},
      {"args.sinks_dtype", [](flashjit_attention_args_t& a) { a.sinks = 0x1000; }},  // no dtype
      {"args.alibi_batch_stride", [](flashjit_attention_args_t& a) { a.alibi_batch_stride = -8; }},
  };
  for (const Case& c : cases) {
    for (const char* spec : {kSpec, "dtype=bf16,head_dim=64,causal=1"}) {
      flashjit_attention_args_t a = valid_args();
      c.set(a);
      EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT) << c.field;
      EXPECT_EQ(field(), c.field) << message();
      EXPECT_TRUE(starts_with(message(), std::string(c.field) + ":")) << message();
      EXPECT_NE(message().find("allowed"), std::string::npos) << message();
      EXPECT_EQ(message().find("needs spec key"), std::string::npos) << "the range, not the key: " << message();
    }
  }
}

// With the key compiled in, the value passes the API layer. Skips while the spec parser does not
// know the keys (the kernel's support lands separately).
TEST(ApiC, FeatureValuesPassWithTheirSpecKey) {
  struct Case {
    const char* key;
    void (*set)(flashjit_attention_args_t&);
  } cases[] = {
      {"window", [](flashjit_attention_args_t& a) { a.window_left = 127, a.window_right = 0; }},
      {"chunk", [](flashjit_attention_args_t& a) { a.attention_chunk = 8192; }},
      {"softcap", [](flashjit_attention_args_t& a) { a.softcap = 50.0f; }},
      {"sinks", [](flashjit_attention_args_t& a) { a.sinks = 0x1000, a.sinks_dtype = FLASHJIT_DTYPE_BF16; }},
      {"alibi", [](flashjit_attention_args_t& a) { a.alibi_slopes = 0x1000; }},
  };
  int ran = 0;
  for (const Case& c : cases) {
    const std::string spec = std::string(kSpec) + "," + c.key + "=1";
    char reason[256] = "";
    if (flashjit_supported(spec.c_str(), reason, sizeof(reason)) != FLASHJIT_SUCCESS) continue;
    ++ran;
    flashjit_attention_args_t a = valid_args();
    c.set(a);
    EXPECT_EQ(flashjit_validate_attention_args(spec.c_str(), &a), FLASHJIT_SUCCESS) << spec << ": " << message();
    // Another feature's value still needs its own key.
    a.softcap = c.key == std::string("softcap") ? 50.0f : 0.0f;
    a.window_left = c.key == std::string("window") ? 127 : -1;
    a.attention_chunk = c.key == std::string("chunk") ? 4 : 64;
    if (c.key != std::string("chunk")) {
      EXPECT_EQ(flashjit_validate_attention_args(spec.c_str(), &a), FLASHJIT_ERROR_INVALID_ARGUMENT) << spec;
      EXPECT_EQ(field(), "args.attention_chunk") << message();
    }
  }
  if (ran == 0) {
    char reason[256] = "";
    flashjit_supported("dtype=bf16,head_dim=64,window=1", reason, sizeof(reason));
    GTEST_SKIP() << "the spec parser does not know the feature keys yet (" << reason << ")";
  }
}

TEST(ApiC, ValidateReportsSpecErrorsToo) {
  const flashjit_attention_args_t a = valid_args();
  EXPECT_EQ(flashjit_validate_attention_args("head_dim=7", &a), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(field(), "head_dim");
}

// Specs -----------------------------------------------------------------------------------------------

TEST(ApiC, SupportedSaysWhyNot) {
  char reason[256] = "untouched";
  EXPECT_EQ(flashjit_supported(kSpec, reason, sizeof(reason)), FLASHJIT_SUCCESS);
  EXPECT_STREQ(reason, "");
  EXPECT_EQ(flashjit_supported("dtype=bf16,head_dim=128,causal=1", reason, sizeof(reason)), FLASHJIT_SUCCESS);
  const struct {
    const char* spec;
    const char* field;
  } bad[] = {{"head_dim=300", "head_dim"}, {"head_dim=100", "head_dim"}, {"dtype=fp8", "dtype"},
             {"head_dim=128,stages=9", "stages"}, {"colour=blue", "colour"}, {"", "spec"}};
  for (const auto& b : bad) {
    EXPECT_EQ(flashjit_supported(b.spec, reason, sizeof(reason)), FLASHJIT_ERROR_INVALID_SPEC) << b.spec;
    EXPECT_TRUE(starts_with(reason, std::string(b.field) + ": ")) << b.spec << " -> " << reason;
    EXPECT_EQ(field(), b.field) << b.spec;
  }
  // Truncated to the buffer, always NUL-terminated; no buffer at all is fine.
  char tiny[8];
  std::memset(tiny, 'x', sizeof(tiny));
  EXPECT_EQ(flashjit_supported("head_dim=300", tiny, sizeof(tiny)), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(std::string(tiny), "head_di");
  EXPECT_EQ(flashjit_supported("head_dim=300", nullptr, 0), FLASHJIT_ERROR_INVALID_SPEC);
  char one[1] = {'x'};
  EXPECT_EQ(flashjit_supported("head_dim=300", one, 1), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(one[0], '\0');
  EXPECT_EQ(flashjit_supported("head_dim=300", nullptr, 10), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "reason");
}

// A spec item with no key is named as the spec (the field was empty); dtype takes any case, as the
// bool keys do.
TEST(ApiC, SupportedNamesTheSpecForAnItemWithoutAKeyAndTakesDtypeInAnyCase) {
  char reason[256];
  for (const char* spec : {"=bf16", "head_dim=64, =1"}) {
    EXPECT_EQ(flashjit_supported(spec, reason, sizeof(reason)), FLASHJIT_ERROR_INVALID_SPEC) << spec;
    EXPECT_EQ(field(), "spec") << spec << ": " << message();
    EXPECT_TRUE(starts_with(reason, "spec: ")) << reason;
  }
  for (const char* spec : {"dtype=BF16", "dtype=Fp16", "dtype=HALF", "dtype=F16"}) {
    EXPECT_EQ(flashjit_supported(spec, reason, sizeof(reason)), FLASHJIT_SUCCESS) << spec << ": " << reason;
  }
}

// Contexts without a GPU ------------------------------------------------------------------------------

TEST(ApiC, CompileOnlyContextNeedsNoDriverAndCannotLoad) {
  TempDir dir("compile_only");
  flashjit_context_t ctx = compile_only_context(dir.path);
  ASSERT_NE(ctx, nullptr);
  flashjit_context_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_SUCCESS);
  EXPECT_EQ(info.device, FLASHJIT_DEVICE_NONE);
  EXPECT_EQ(info.cu_context, nullptr);
  EXPECT_EQ(std::string(info.cache_dir), dir.path);
  EXPECT_EQ(info.cache_mode, FLASHJIT_CACHE_DISK);
  EXPECT_EQ(info.cache_writable, 1);
  EXPECT_EQ(info.compile_policy, FLASHJIT_COMPILE_POLICY_JIT);
  flashjit_kernel_t kernel = nullptr;
  EXPECT_EQ(flashjit_kernel_get(ctx, kSpec, &kernel), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "context");
  EXPECT_NE(message().find("no device"), std::string::npos) << message();
  flashjit_context_destroy(ctx);

  flashjit_context_t memory = compile_only_context(dir.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY, FLASHJIT_CACHE_MEMORY_ONLY);
  ASSERT_EQ(flashjit_context_describe(memory, &info), FLASHJIT_SUCCESS);
  EXPECT_EQ(info.cache_mode, FLASHJIT_CACHE_MEMORY_ONLY);
  EXPECT_STREQ(info.cache_dir, "");
  EXPECT_EQ(info.compile_policy, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  flashjit_context_destroy(memory);
}

TEST(ApiC, BadEnumsInOptionsAreNamed) {
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = FLASHJIT_DEVICE_NONE;
  o.compile_policy = 7;
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "options.compile_policy");
  o.compile_policy = FLASHJIT_COMPILE_POLICY_JIT;
  o.cache_mode = -1;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "options.cache_mode");
  o.cache_mode = FLASHJIT_CACHE_DISK;
  o.device = -5;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "options.device");
}

// Without a driver (a missing libcuda, forced in a child process so it holds on GPU machines too).
int context_without_driver_role(int, char**) {
  flashjit_context_t ctx = nullptr;
  const flashjit_status_t status = flashjit_context_create(nullptr, &ctx);  // NULL options: device 0
  std::printf("status=%s\nmessage=%s\n", flashjit_status_string(status), flashjit_last_error_message());
  return status == FLASHJIT_ERROR_DRIVER_UNAVAILABLE && ctx == nullptr ? 0 : 1;
}
FLASHJIT_REGISTER_CHILD_ROLE(api_context_without_driver, context_without_driver_role);

TEST(ApiC, ContextWithoutADriverSaysTheDriverIsUnavailable) {
  auto run = flashjit::testing::run_child_role("api_context_without_driver", {{"FLASHJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("FLASHJIT_ERROR_DRIVER_UNAVAILABLE"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("a context for device 0 needs the CUDA driver"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("libcuda"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("FLASHJIT_DEVICE_NONE"), std::string::npos) << run.output;
}

// Prewarm ---------------------------------------------------------------------------------------------

TEST(ApiC, PrewarmCompilesUnderJitAndRefusesAtOnceUnderCacheOnly) {
  TempDir dir("prewarm");
  const char* specs[] = {kSpec, kSpec2};
  // Cache only on an empty directory: NOT_COMPILED, and nothing was compiled (no entry appears).
  flashjit_context_t cache_only = compile_only_context(dir.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(flashjit_prewarm(cache_only, specs, 2), FLASHJIT_ERROR_NOT_COMPILED);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(message().find("2 of 2 specs failed"), std::string::npos) << message();
  EXPECT_NE(message().find("not in the cache"), std::string::npos) << message();
  EXPECT_LT(seconds, 5.0);
  EXPECT_EQ(dir.entries(), 0u);
  flashjit_context_destroy(cache_only);

  // JIT: all three kernels compiled and published (kSpec2's long-sequence kernel too).
  flashjit_context_t jit = compile_only_context(dir.path);
  ASSERT_EQ(flashjit_prewarm(jit, specs, 2), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(dir.entries(), 3u);
  flashjit_context_destroy(jit);

  // Cache only again (a new engine: nothing in memory): disk hits.
  cache_only = compile_only_context(dir.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  EXPECT_EQ(flashjit_prewarm(cache_only, specs, 2), FLASHJIT_SUCCESS) << message();
  // One spec missing out of three: the status is NOT_COMPILED and the message names that one.
  const char* mixed[] = {kSpec, "dtype=bf16,head_dim=96", kSpec2};
  EXPECT_EQ(flashjit_prewarm(cache_only, mixed, 3), FLASHJIT_ERROR_NOT_COMPILED);
  EXPECT_NE(message().find("1 of 3 specs failed: specs[1] 'dtype=bf16,head_dim=96'"), std::string::npos) << message();
  flashjit_context_destroy(cache_only);
}

// Prewarming is for storing: a context whose directory could not be used (it fell back to memory)
// fails with CACHE_IO naming the directory (it returned success), and prewarm_report says per spec
// what was compiled, found and stored.
TEST(ApiC, PrewarmFailsWhenNothingCanBeStoredAndReportsWhatWasStored) {
  TempDir dir("prewarm_store");
  const std::string file = dir.path + "/a-file";
  std::ofstream(file) << "not a directory";
  const char* specs[] = {kSpec, kSpec2};
  flashjit_prewarm_result_t results[2];
  for (auto& r : results) {
    std::memset(&r, 0x55, sizeof(r));
    r.struct_size = sizeof(r);
  }
  flashjit_context_t unusable = compile_only_context(file + "/cache");
  EXPECT_EQ(flashjit_prewarm(unusable, specs, 1), FLASHJIT_ERROR_CACHE_IO);
  EXPECT_NE(message().find("not stored"), std::string::npos) << message();
  EXPECT_NE(message().find(file), std::string::npos) << message();
  EXPECT_EQ(flashjit_prewarm_report(unusable, specs, 2, results), FLASHJIT_ERROR_CACHE_IO);
  EXPECT_NE(message().find("2 of 2 specs failed"), std::string::npos) << message();
  for (const auto& r : results) {
    EXPECT_EQ(r.status, FLASHJIT_ERROR_CACHE_IO);
    EXPECT_EQ(r.stored, 0);
    EXPECT_EQ(r.compiled + r.hits, r.kernels);
    EXPECT_NE(std::string(r.message).find("not stored"), std::string::npos) << r.message;
  }
  EXPECT_EQ(results[0].kernels, 1);
  EXPECT_EQ(results[1].kernels, 2);
  flashjit_context_destroy(unusable);

  // A usable directory: compiled and stored, then (a new engine) hits, stored.
  const std::string good = dir.path + "/good";
  flashjit_context_t ctx = compile_only_context(good);
  ASSERT_EQ(flashjit_prewarm_report(ctx, specs, 2, results), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(message(), "");
  EXPECT_EQ(results[1].status, FLASHJIT_SUCCESS);
  EXPECT_EQ(results[1].kernels, 2);
  EXPECT_EQ(results[1].compiled, 2);
  EXPECT_EQ(results[1].stored, 2);
  EXPECT_STREQ(results[1].message, "");
  flashjit_context_destroy(ctx);
  ctx = compile_only_context(good, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  ASSERT_EQ(flashjit_prewarm_report(ctx, specs, 2, results), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(results[0].hits, 1);
  EXPECT_EQ(results[0].compiled, 0);
  EXPECT_EQ(results[0].stored, 1);
  flashjit_context_destroy(ctx);

  // Memory only by choice: prewarming into memory succeeds, nothing stored.
  flashjit_context_t memory = compile_only_context("", FLASHJIT_COMPILE_POLICY_JIT, FLASHJIT_CACHE_MEMORY_ONLY);
  ASSERT_EQ(flashjit_prewarm_report(memory, specs, 1, results), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(results[0].stored, 0);
  EXPECT_EQ(results[0].kernels, 1);
  flashjit_context_destroy(memory);

  // A results struct smaller than the first published one is refused by name.
  results[0].struct_size = 8;
  EXPECT_EQ(flashjit_prewarm_report(ctx = compile_only_context(good), specs, 1, results), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "results[0].struct_size") << message();
  flashjit_context_destroy(ctx);
}

// A cache directory that is a symlink to a directory is used as one (the context fell back to
// memory only: the last component was checked with lstat).
TEST(ApiC, ASymlinkedCacheDirectoryIsUsed) {
  TempDir dir("symlinked");
  fs::create_directory(dir.path + "/real");
  fs::create_directory_symlink(dir.path + "/real", dir.path + "/link");
  flashjit_context_t ctx = compile_only_context(dir.path + "/link");
  flashjit_context_info_t info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(info.cache_mode, FLASHJIT_CACHE_DISK);
  EXPECT_EQ(info.cache_writable, 1);
  EXPECT_EQ(std::string(info.cache_dir), dir.path + "/link");
  flashjit_context_destroy(ctx);
}

TEST(ApiC, PrewarmRefusesABadSpecBeforeCompilingAnything) {
  TempDir dir("prewarm_bad");
  flashjit_context_t ctx = compile_only_context(dir.path);
  const char* specs[] = {kSpec, "dtype=bf16,head_dim=300"};
  EXPECT_EQ(flashjit_prewarm(ctx, specs, 2), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(field(), "specs[1].head_dim");
  EXPECT_TRUE(starts_with(message(), "specs[1].head_dim: specs[1] 'dtype=bf16,head_dim=300'")) << message();
  EXPECT_EQ(dir.entries(), 0u);
  flashjit_context_destroy(ctx);
}

// Cache bundles ---------------------------------------------------------------------------------------

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(ApiC, ExportedBundleImportsIntoAFreshDirectory) {
  TempDir source("bundle_source"), target("bundle_target"), files("bundle_files");
  const std::string bundle = files.path + "/kernels.fjbundle";
  const char* specs[] = {kSpec, kSpec2, kSpec};  // a duplicate is stored once
  flashjit_context_t exporter = compile_only_context(source.path);
  ASSERT_EQ(flashjit_cache_export(exporter, specs, 3, bundle.c_str()), FLASHJIT_SUCCESS) << message();
  flashjit_context_destroy(exporter);
  ASSERT_TRUE(fs::exists(bundle));

  // The target knows nothing yet: cache-only prewarm fails.
  flashjit_context_t importer = compile_only_context(target.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  EXPECT_EQ(flashjit_prewarm(importer, specs, 2), FLASHJIT_ERROR_NOT_COMPILED);
  size_t imported = 99;
  ASSERT_EQ(flashjit_cache_import(importer, bundle.c_str(), &imported), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(imported, 3u) << "kSpec, kSpec2 and kSpec2's long-sequence kernel";
  EXPECT_EQ(target.entries(), 3u) << "published to the directory";
  EXPECT_EQ(flashjit_prewarm(importer, specs, 2), FLASHJIT_SUCCESS) << message();
  // Importing again changes nothing.
  EXPECT_EQ(flashjit_cache_import(importer, bundle.c_str(), &imported), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(target.entries(), 3u);
  flashjit_context_destroy(importer);
  // A later process (a fresh engine) finds them on disk.
  flashjit_context_t later = compile_only_context(target.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  EXPECT_EQ(flashjit_prewarm(later, specs, 2), FLASHJIT_SUCCESS) << message();
  flashjit_context_destroy(later);
  // A memory-only context imports into memory.
  flashjit_context_t memory = compile_only_context(target.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY, FLASHJIT_CACHE_MEMORY_ONLY);
  EXPECT_EQ(flashjit_prewarm(memory, specs, 1), FLASHJIT_ERROR_NOT_COMPILED);
  EXPECT_EQ(flashjit_cache_import(memory, bundle.c_str(), nullptr), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_prewarm(memory, specs, 2), FLASHJIT_SUCCESS) << message();
  flashjit_context_destroy(memory);
}

TEST(ApiC, CorruptBundlesAreRefusedAndImportNothing) {
  TempDir source("corrupt_source"), target("corrupt_target"), files("corrupt_files");
  const std::string good = files.path + "/good.fjbundle", bad = files.path + "/bad.fjbundle";
  const char* specs[] = {kSpec, kSpec2};
  flashjit_context_t exporter = compile_only_context(source.path);
  ASSERT_EQ(flashjit_cache_export(exporter, specs, 2, good.c_str()), FLASHJIT_SUCCESS) << message();
  flashjit_context_destroy(exporter);
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 1000u);

  flashjit_context_t importer = compile_only_context(target.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  auto expect_refused = [&](const std::string& corrupt, const char* what, const char* says) {
    write_bytes(bad, corrupt);
    size_t imported = 99;
    EXPECT_EQ(flashjit_cache_import(importer, bad.c_str(), &imported), FLASHJIT_ERROR_INVALID_BUNDLE) << what;
    EXPECT_EQ(imported, 0u) << what;
    EXPECT_EQ(field(), "path") << what;
    EXPECT_NE(message().find("nothing imported"), std::string::npos) << what << ": " << message();
    EXPECT_NE(message().find(says), std::string::npos) << what << ": " << message();
  };
  // Truncated at many points, from the magic to the last checksum byte.
  for (size_t cut : {size_t(0), size_t(4), size_t(8), size_t(20), size_t(100), bytes.size() / 2, bytes.size() - 33,
                     bytes.size() - 1}) {
    expect_refused(bytes.substr(0, cut), ("truncated to " + std::to_string(cut)).c_str(), cut < 8 ? "not a flashjit" : "");
  }
  // One bit flipped: header, key, entry body, checksum.
  for (size_t at : {size_t(9), size_t(12), size_t(20), size_t(200), bytes.size() / 2, bytes.size() - 40, bytes.size() - 1}) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x10);
    expect_refused(flipped, ("bit flip at " + std::to_string(at)).c_str(), "");
  }
  expect_refused(bytes + "extra", "trailing bytes", "checksum");
  expect_refused("FJCUBIN" + bytes.substr(7), "another magic", "not a flashjit cache bundle");
  EXPECT_EQ(target.entries(), 0u) << "nothing of any corrupt bundle was imported";
  EXPECT_EQ(flashjit_prewarm(importer, specs, 1), FLASHJIT_ERROR_NOT_COMPILED);

  // A missing file or a directory is a cache I/O error, not a bundle error.
  const std::string missing = files.path + "/missing.fjbundle";
  EXPECT_EQ(flashjit_cache_import(importer, missing.c_str(), nullptr), FLASHJIT_ERROR_CACHE_IO);
  EXPECT_EQ(field(), "path");
  EXPECT_EQ(flashjit_cache_import(importer, files.path.c_str(), nullptr), FLASHJIT_ERROR_CACHE_IO);
  flashjit_context_destroy(importer);
}

TEST(ApiC, ExportFailsCleanlyUnderCacheOnlyAndForAnUnwritablePath) {
  TempDir dir("export_fail");
  const char* specs[] = {"dtype=fp16,head_dim=192"};
  flashjit_context_t cache_only = compile_only_context(dir.path, FLASHJIT_COMPILE_POLICY_CACHE_ONLY);
  const std::string bundle = dir.path + "/k.fjbundle";
  EXPECT_EQ(flashjit_cache_export(cache_only, specs, 1, bundle.c_str()), FLASHJIT_ERROR_NOT_COMPILED);
  EXPECT_FALSE(fs::exists(bundle));
  flashjit_context_destroy(cache_only);
  flashjit_context_t jit = compile_only_context(dir.path);
  const std::string unwritable = dir.path + "/no/such/dir/k.fjbundle";
  EXPECT_EQ(flashjit_cache_export(jit, specs, 1, unwritable.c_str()), FLASHJIT_ERROR_CACHE_IO);
  EXPECT_EQ(field(), "path");
  EXPECT_EQ(flashjit_cache_export(jit, specs, 1, ""), FLASHJIT_ERROR_INVALID_ARGUMENT);
  flashjit_context_destroy(jit);
}

}  // namespace
