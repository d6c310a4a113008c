// Prewarm's plan (runtime/prewarm_plan.hpp): every kernel of every family is one job, costliest
// first, so that the pool's cores finish together (issue 22: `prewarm --defaults` had one core idle
// while the other compiled the last family's two kernels). Renders and compiles nothing.
#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "runtime/prewarm_plan.hpp"
#include "runtime/tuning.hpp"

namespace flashjit {
namespace {

Engine memory_engine() {
  EngineOptions o;
  o.memory_only = true;
  o.use_tuning = false;
  return Engine(o);
}

TEST(PrewarmPlan, OneJobPerKernelOfEveryFamilyCostliestFirst) {
  const Engine engine = memory_engine();
  const std::vector<AttentionSpec> specs = default_prewarm_specs();
  const std::vector<PrewarmJob> plan = plan_prewarm(engine, specs);
  // Every kernel prepare_family would prepare, once, with its family's spec and position.
  size_t kernels = 0;
  std::set<std::pair<size_t, size_t>> seen;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto variant = long_sequence_variant(specs[i]);
    kernels += variant ? 2 : 1;
  }
  ASSERT_EQ(plan.size(), kernels);
  EXPECT_EQ(plan.size(), 32u) << "the default set's kernel count changed: update README's and NOTES' compile figures";
  for (const PrewarmJob& job : plan) {
    EXPECT_TRUE(seen.insert({job.spec_index, job.kernel_index}).second);
    ASSERT_LT(job.spec_index, specs.size());
    if (job.kernel_index == 0) EXPECT_EQ(job.spec, specs[job.spec_index]);
    else EXPECT_EQ(job.spec, long_sequence_variant(specs[job.spec_index])->spec);
    EXPECT_GT(job.cost, 0);
  }
  // Costliest first: the head-dim-256 causal kernels lead, a head-dim-64 kernel without the mask ends.
  for (size_t j = 1; j < plan.size(); ++j) EXPECT_GE(plan[j - 1].cost, plan[j].cost) << j;
  const AttentionSpec first = make_config(plan.front().spec)->spec, last = make_config(plan.back().spec)->spec;
  EXPECT_EQ(first.head_dim, 256);
  EXPECT_TRUE(first.causal);
  EXPECT_EQ(last.head_dim, 64);
  EXPECT_FALSE(last.causal);
}

// gpt-oss, Gemma and Llama 4's engine specs join the default set where the parser has their keys,
// and are listed as skipped, with the parser's reason, where it does not: the default prewarm
// never fails on them.
TEST(PrewarmPlan, DefaultSetAddsTheModelsFeatureSpecsOrSaysWhyNot) {
  const std::vector<std::string> texts = feature_prewarm_spec_texts();
  ASSERT_EQ(texts.size(), 5u);
  auto has = [](const std::string& text, const char* part) { return (text + ",").find(std::string(part) + ",") != std::string::npos; };
  EXPECT_TRUE(has(texts[0], "head_dim=64") && has(texts[0], "window=1") && has(texts[0], "sinks=1"));
  EXPECT_TRUE(has(texts[1], "head_dim=64") && has(texts[1], "sinks=1") && !has(texts[1], "window=1"));
  EXPECT_TRUE(has(texts[2], "head_dim=128") && has(texts[2], "window=1") && has(texts[2], "softcap=1"));
  EXPECT_TRUE(has(texts[3], "head_dim=256") && has(texts[3], "window=1") && has(texts[3], "softcap=1"));
  EXPECT_TRUE(has(texts[4], "head_dim=128") && has(texts[4], "chunk=1"));
  for (const std::string& text : texts) EXPECT_TRUE(has(text, "varlen=1") && has(text, "paged=1") && has(text, "causal=1")) << text;
  const DefaultPrewarmSet set = default_prewarm_set();
  const std::vector<AttentionSpec> base = default_prewarm_specs();
  ASSERT_GE(set.specs.size(), base.size());
  EXPECT_EQ(std::vector<AttentionSpec>(set.specs.begin(), set.specs.begin() + base.size()), base);
  EXPECT_EQ(set.specs.size() - base.size() + set.skipped.size(), texts.size());
  size_t parsed = 0;
  for (const std::string& text : texts) {
    if (auto spec = parse_spec(text); spec && make_config(*spec)) {
      ++parsed;
      continue;
    }
    const bool listed = std::any_of(set.skipped.begin(), set.skipped.end(), [&](const std::string& s) { return s.rfind(text + ": ", 0) == 0; });
    EXPECT_TRUE(listed) << text << " neither parsed nor listed as skipped";
  }
  EXPECT_EQ(set.specs.size(), base.size() + parsed);
  const Engine engine = memory_engine();
  EXPECT_EQ(plan_prewarm(engine, set.specs).size() >= 32u, true);
}

TEST(PrewarmPlan, CostGrowsWithTheTilesTheMaskAndTheCluster) {
  auto cost = [](const char* text) { return estimated_compile_cost(*parse_spec(text)); };
  EXPECT_LT(cost("dtype=bf16,head_dim=64"), cost("dtype=bf16,head_dim=128"));
  EXPECT_LT(cost("dtype=bf16,head_dim=128"), cost("dtype=bf16,head_dim=128,causal=1"));
  EXPECT_LT(cost("dtype=bf16,head_dim=128,causal=1"), cost("dtype=bf16,head_dim=256,causal=1"));
  EXPECT_LT(cost("dtype=bf16,head_dim=256,causal=1,cluster=1"), cost("dtype=bf16,head_dim=256,causal=1,cluster=2"));
  AttentionSpec bad = *parse_spec("dtype=bf16,head_dim=128");
  bad.block_n = 1000;
  EXPECT_EQ(estimated_compile_cost(bad), 0);  // does not resolve: its job fails at once
}

TEST(PrewarmPlan, ATunedSpecIsOneKernel) {
  char pattern[] = "/tmp/flashjit-plan-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const AttentionSpec base = *parse_spec("dtype=bf16,head_dim=256,causal=1");
  ASSERT_TRUE(long_sequence_variant(base).has_value());
  const std::string winner = "dtype=bf16,head_dim=256,causal=1,stages=2,consumer_wgs=2,block_m=128,block_n=64,cluster=1,ctas_per_sm=1,overlap=1,pingpong=1";
  ASSERT_TRUE(save_tuning_record(dir, base, {to_string(base), winner, 1.0, ""}).ok());
  EngineOptions o;
  o.cache_dir = dir;
  const Engine engine(o);
  const std::vector<PrewarmJob> plan = plan_prewarm(engine, {base});
  ASSERT_EQ(plan.size(), 1u);  // as prepare_family: the winner runs throughout
  EXPECT_EQ(plan[0].spec, base);
  o.use_tuning = false;
  EXPECT_EQ(plan_prewarm(Engine(o), {base}).size(), 2u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashjit
