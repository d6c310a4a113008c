// The C++ wrappers (flashjit/flashjit.hpp) without a GPU: Expected/Status carry the C status and
// the thread's message, the builders fill the C structs as the C helpers do, Context and Kernel
// are move-only owners, and the calls reach the C API (prewarm, bundles, validation, supported).
// NOTES: this file includes only the public header, as an embedding engine would; the library's
// internal flashjit:: names live in other translation units.
#include <gtest/gtest.h>

#include <vector>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <type_traits>

#include "flashjit/flashjit.hpp"

namespace {

namespace fs = std::filesystem;

static_assert(!std::is_copy_constructible_v<flashjit::Context> && std::is_nothrow_move_constructible_v<flashjit::Context>);
static_assert(!std::is_copy_constructible_v<flashjit::Kernel> && std::is_nothrow_move_constructible_v<flashjit::Kernel>);

std::string temp_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "flashjit_api_cpp_" + name + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  return dir;
}

TEST(ApiCpp, VersionAbiAndSupported) {
  EXPECT_EQ(flashjit::version(), FLASHJIT_VERSION);
  EXPECT_TRUE(flashjit::check_abi().ok());
  EXPECT_TRUE(flashjit::supported("dtype=fp16,head_dim=128,causal=1"));
  const flashjit::Status no = flashjit::supported("head_dim=12");
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error().code(), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_STREQ(no.error().code_name(), "FLASHJIT_ERROR_INVALID_SPEC");
  EXPECT_EQ(no.error().field(), "head_dim");
  EXPECT_EQ(no.error().message().rfind("head_dim: ", 0), 0u) << no.error().message();
}

TEST(ApiCpp, ExpectedHoldsAValueOrAnError) {
  flashjit::Expected<int> value = 42;
  ASSERT_TRUE(value);
  EXPECT_EQ(*value, 42);
  flashjit::Expected<std::string> error = flashjit::Error(FLASHJIT_ERROR_CACHE_IO, "disk full", "path");
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().code(), FLASHJIT_ERROR_CACHE_IO);
  EXPECT_EQ(error.error().field(), "path");
  EXPECT_TRUE(flashjit::Status::from(FLASHJIT_SUCCESS).ok());
}

TEST(ApiCpp, ArgsBuilderMatchesTheCHelpers) {
  const auto args = flashjit::AttentionArgs::contiguous(0x1000, 0x2000, 0x3000, 0x4000, 2, 100, 300, 8, 2, 128)
                        .lse(0x5000)
                        .softmax_scale(0.125f);
  const flashjit_attention_args_t& c = args.c();
  EXPECT_EQ(c.struct_size, sizeof(flashjit_attention_args_t));
  EXPECT_EQ(c.q, 0x1000u);
  EXPECT_EQ(c.o, 0x4000u);
  EXPECT_EQ(c.lse, 0x5000u);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_strides.row, 8 * 128);
  EXPECT_EQ(c.k_strides.batch, 300 * 2 * 128);
  EXPECT_EQ(c.window_left, -1);
  EXPECT_EQ(c.window_right, -1);
  EXPECT_FLOAT_EQ(c.softmax_scale, 0.125f);
  EXPECT_EQ(c.flags, 0u);
  // The features' setters fill the C fields; a spec without the key refuses them by name.
  auto featured = args;
  featured.window(127, 0).attention_chunk(8192).softcap(50.0f).sinks(0x6000, FLASHJIT_DTYPE_BF16).alibi(0x7000, 16);
  const flashjit_attention_args_t& f = featured.c();
  EXPECT_EQ(f.window_left, 127);
  EXPECT_EQ(f.window_right, 0);
  EXPECT_EQ(f.attention_chunk, 8192);
  EXPECT_FLOAT_EQ(f.softcap, 50.0f);
  EXPECT_EQ(f.sinks, 0x6000u);
  EXPECT_EQ(f.sinks_dtype, FLASHJIT_DTYPE_BF16);
  EXPECT_EQ(f.alibi_slopes, 0x7000u);
  EXPECT_EQ(f.alibi_batch_stride, 16);
  EXPECT_EQ(featured.sinks(0).c().sinks_dtype, 0) << "no sinks: dtype 0";
  const flashjit::Status no_key = flashjit::validate("dtype=bf16,head_dim=128", featured);
  ASSERT_FALSE(no_key);
  EXPECT_EQ(no_key.error().field(), "args.window_left");
  EXPECT_NE(no_key.error().message().find("needs spec key window=1"), std::string::npos) << no_key.error().message();
  auto with_pdl = args;
  EXPECT_EQ(with_pdl.pdl().c().flags, FLASHJIT_ATTENTION_FLAG_PDL);
  EXPECT_TRUE(flashjit::validate("dtype=bf16,head_dim=128", with_pdl));
  EXPECT_EQ(with_pdl.pdl(false).c().flags, 0u);
  // FP8 scales: the setters fill the C fields; a 16-bit spec refuses them by name, an FP8 cache takes them.
  auto scaled = args;
  scaled.kv_scales(0x8000, 0x8100, 2, 1).q_scale(0x8200, 2, 1);
  EXPECT_EQ(scaled.c().k_scale, 0x8000u);
  EXPECT_EQ(scaled.c().v_scale, 0x8100u);
  EXPECT_EQ(scaled.c().k_scale_batch_stride, 2);
  EXPECT_EQ(scaled.c().v_scale_head_stride, 1);
  EXPECT_EQ(scaled.c().q_scale, 0x8200u);
  EXPECT_EQ(scaled.c().q_scale_head_stride, 1);
  const flashjit::Status no_fp8 = flashjit::validate("dtype=bf16,head_dim=128", scaled);
  ASSERT_FALSE(no_fp8);
  EXPECT_EQ(no_fp8.error().field(), "args.k_scale");
  auto cache_scaled = args;
  cache_scaled.kv_scales(0x8000, 0x8100);
  cache_scaled.c().k_strides.row = cache_scaled.c().v_strides.row = 2 * 128;  // e4m3: the same element strides, one byte each
  EXPECT_TRUE(flashjit::validate("dtype=bf16,head_dim=128,kv_dtype=e4m3", cache_scaled))
      << flashjit::validate("dtype=bf16,head_dim=128,kv_dtype=e4m3", cache_scaled).error().message();
  EXPECT_TRUE(flashjit::validate("dtype=bf16,head_dim=128", args)) << flashjit::validate("dtype=bf16,head_dim=128", args).error().message();
  const flashjit::Status wrong_dim = flashjit::validate("dtype=bf16,head_dim=64", args);
  ASSERT_FALSE(wrong_dim);
  EXPECT_EQ(wrong_dim.error().field(), "args.head_dim");
}

// The engine inputs through the builder: a paged step validates for its spec, and a bad page in
// the (host) block table is named by the metadata check.
TEST(ApiCpp, EngineInputsThroughTheBuilder) {
  const std::vector<int32_t> cu_seqlens_q{0, 1, 17}, seqused_k{40, 16};
  std::vector<int32_t> table{3, 5, 7, -1, 2, -1, -1, -1};  // 16-key pages, 4 entries a sequence
  flashjit::AttentionArgs args;
  args.pointers(0x1000, 0x2000, 0x3000, 0x4000)
      .shape(2, 16, 64, 8, 2)
      .strides({0, 8 * 128, 128}, {16 * 2 * 128, 2 * 128, 128}, {16 * 2 * 128, 2 * 128, 128}, {0, 8 * 128, 128})
      .varlen_queries(reinterpret_cast<uint64_t>(cu_seqlens_q.data()), 20)
      .seqused_k(reinterpret_cast<uint64_t>(seqused_k.data()))
      .pages(reinterpret_cast<uint64_t>(table.data()), 4, 16, 8);
  const std::string spec = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1";
  EXPECT_EQ(args.c().total_q, 20);
  EXPECT_EQ(args.c().num_pages, 8);
  EXPECT_TRUE(flashjit::validate(spec, args)) << flashjit::validate(spec, args).error().message();
  EXPECT_TRUE(flashjit::check_engine_metadata_host(spec, args));
  table[4] = 8;  // sequence 1's first page: outside the 8-page pool
  const flashjit::Status bad = flashjit::check_engine_metadata_host(spec, args);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field(), "args.block_table[4]");
  EXPECT_FALSE(flashjit::validate("dtype=bf16,head_dim=128,causal=1", args));  // a dense spec takes none of them
}

TEST(ApiCpp, SplitKvDecodeThroughTheBuilder) {
  const std::vector<int32_t> cu_seqlens_q{0, 1, 2}, seqused_k{4000, 16};
  flashjit::AttentionArgs args;
  args.pointers(0x1000, 0x2000, 0x3000, 0x4000)
      .shape(2, 1, 4096, 32, 8)
      .strides({0, 32 * 128, 128}, {4096 * 8 * 128, 8 * 128, 128}, {4096 * 8 * 128, 8 * 128, 128}, {0, 32 * 128, 128})
      .varlen_queries(reinterpret_cast<uint64_t>(cu_seqlens_q.data()), 2)
      .seqused_k(reinterpret_cast<uint64_t>(seqused_k.data()));
  const std::string spec = "dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1";
  args.split_kv(0x100000, 0, 16);
  uint64_t bytes = 0;
  ASSERT_TRUE(flashjit::workspace_size(spec, args, &bytes));
  EXPECT_EQ(bytes, uint64_t(16 * 2 * 32) * 129 * 4);
  EXPECT_FALSE(flashjit::validate(spec, args));  // workspace_bytes 0: too small
  args.split_kv(0x100000, bytes, 16, 512);
  EXPECT_TRUE(flashjit::validate(spec, args)) << flashjit::validate(spec, args).error().message();
}

TEST(ApiCpp, CompileOnlyContextPrewarmsExportsAndImports) {
  const std::string source = temp_dir("source"), target = temp_dir("target");
  auto context = flashjit::Context::create(flashjit::ContextOptions().device(FLASHJIT_DEVICE_NONE).cache_dir(source));
  ASSERT_TRUE(context) << context.error().message();
  auto info = context->describe();
  ASSERT_TRUE(info);
  EXPECT_EQ(std::string(info->cache_dir), source);
  EXPECT_EQ(info->device, FLASHJIT_DEVICE_NONE);
  ASSERT_TRUE(context->prewarm({"dtype=bf16,head_dim=64"}));
  const std::string bundle = source + "/k.fjbundle";
  ASSERT_TRUE(context->export_cache({"dtype=bf16,head_dim=64"}, bundle));

  auto importer =
      flashjit::Context::create(flashjit::ContextOptions().device(FLASHJIT_DEVICE_NONE).cache_dir(target).cache_only());
  ASSERT_TRUE(importer);
  const flashjit::Status missing = importer->prewarm({"dtype=bf16,head_dim=64"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), FLASHJIT_ERROR_NOT_COMPILED);
  auto imported = importer->import_cache(bundle);
  ASSERT_TRUE(imported) << imported.error().message();
  EXPECT_EQ(*imported, 1u);
  EXPECT_TRUE(importer->prewarm({"dtype=bf16,head_dim=64"}));
  // A kernel needs a device: the error comes back as an Expected.
  auto kernel = importer->kernel("dtype=bf16,head_dim=64");
  ASSERT_FALSE(kernel);
  EXPECT_EQ(kernel.error().field(), "context");
  fs::remove_all(source);
  fs::remove_all(target);
}

TEST(ApiCpp, ContextIsMoveOnlyAndReleasesOnce) {
  auto made = flashjit::Context::create(flashjit::ContextOptions().device(FLASHJIT_DEVICE_NONE).memory_only());
  ASSERT_TRUE(made);
  flashjit::Context a = std::move(*made);
  ASSERT_TRUE(a);
  flashjit::Context b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_TRUE(b);
  flashjit::Context c;
  c = std::move(b);
  EXPECT_TRUE(c);
  flashjit_context_t raw = c.release();
  EXPECT_FALSE(c);
  EXPECT_EQ(flashjit_context_destroy(raw), FLASHJIT_SUCCESS);
  flashjit::Kernel empty;
  EXPECT_FALSE(empty);
  const flashjit::Status launched = empty.forward(flashjit::AttentionArgs(), nullptr);
  ASSERT_FALSE(launched);
  EXPECT_EQ(launched.error().field(), "kernel");
}

TEST(ApiCpp, DeviceContextWithoutDriverIsAnError) {
  // Without a driver (this machine) device 0 fails; with one, it either works or names the device.
  auto context = flashjit::Context::create(flashjit::ContextOptions().device(0).memory_only());
  if (context) GTEST_SKIP() << "a usable GPU is present";
  const flashjit_status_t code = context.error().code();
  EXPECT_TRUE(code == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || code == FLASHJIT_ERROR_UNSUPPORTED_DEVICE) << context.error().message();
}

}  // namespace
