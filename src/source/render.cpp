#include "source/render.hpp"

#include "launch/attention_launch.hpp"
#include "source/embedded_templates.hpp"
#include "source/wgmma_shapes.hpp"

namespace flashjit {
namespace {

void add_constant(std::string& out, const char* type, const char* name, long long value) {
  out += "constexpr ";
  out += type;
  out += ' ';
  out += name;
  out += " = ";
  out += std::to_string(value);
  out += ";\n";
}

// The per-variant constants the templates read (kBlockM, kStages, ...).
std::string render_constants(const KernelConfig& c) {
  const AttentionSpec& s = c.spec;
  std::string out = "// ---- variant constants (rendered from the spec) ----\n";
  if (s.hang_trap) out += "#define FLASHJIT_HANG_TRAP 1\n";
  add_constant(out, "int", "kHeadDim", s.head_dim);
  add_constant(out, "int", "kHeadDimV", s.head_dim_v);
  add_constant(out, "int", "kBlockM", s.block_m);
  add_constant(out, "int", "kBlockN", s.block_n);
  add_constant(out, "int", "kStages", s.stages);
  add_constant(out, "int", "kConsumerWGs", s.consumer_wgs);
  add_constant(out, "int", "kThreads", c.threads);
  add_constant(out, "int", "kCtasPerSm", s.ctas_per_sm);
  add_constant(out, "int", "kQKChunks", c.qk_chunks);
  add_constant(out, "int", "kVChunks", c.v_chunks);
  add_constant(out, "int", "kQKSteps", c.qk_k_steps);
  add_constant(out, "int", "kVCols", c.v_cols);
  add_constant(out, "int", "kOParts", c.o_parts);
  add_constant(out, "int", "kQTileBytes", c.q_tile_bytes);
  add_constant(out, "int", "kQBuffers", c.q_buffers);
  add_constant(out, "bool", "kStageOInKV", c.stage_o_in_kv);
  add_constant(out, "int", "kKTileBytes", c.k_tile_bytes);
  add_constant(out, "int", "kVTileBytes", c.v_tile_bytes);
  add_constant(out, "unsigned", "kProducerRegs", c.producer_regs);
  add_constant(out, "unsigned", "kConsumerRegs", c.consumer_regs);
  add_constant(out, "unsigned", "kFirstConsumerRegs", c.first_consumer_regs);
  // q_reg_dims: Q's first k16 steps in the scores warpgroup's registers (paired consumers).
  add_constant(out, "int", "kQRegSteps", c.q_reg_steps);
  add_constant(out, "bool", "kCausal", s.causal ? 1 : 0);
  add_constant(out, "int", "kCluster", s.cluster);
  add_constant(out, "bool", "kPingpong", s.pingpong);
  add_constant(out, "bool", "kVarlen", s.varlen);
  add_constant(out, "bool", "kPaged", s.paged);
  add_constant(out, "bool", "kPackGQA", s.pack_gqa);
  add_constant(out, "bool", "kSplitKV", s.split_kv);
  add_constant(out, "bool", "kDynamicSchedule", s.dynamic_schedule);
  add_constant(out, "bool", "kInlineCombine", s.inline_combine);
  add_constant(out, "int", "kTileWordBytes", tile_word_bytes(s));
  add_constant(out, "bool", "kKvFp8", s.kv_fp8());
  add_constant(out, "bool", "kFp8Operands", s.fp8_operands());
  // qv=1: the 64-column chunks of Q's and K's tiles that come from qv and V (the rest from q and k).
  add_constant(out, "int", "kQvChunks", s.qv ? s.head_dim_v / 64 : 0);
  // v_in_k=1: V read from K's ring slot; two consumer warpgroups share a tile, each half of O.
  add_constant(out, "bool", "kVInK", s.v_in_k);
  // v_in_k=1 or paired=1: two consumer warpgroups share a tile, each half of O.
  add_constant(out, "bool", "kPairedO", s.pairs_o());
  // dim_split=1: the CTAs of a cluster that share out the head dims (each kQKChunks and kVChunks of
  // them) and add their partial scores; 1 otherwise.
  add_constant(out, "int", "kDimSplit", s.dim_split ? 2 : 1);
  add_constant(out, "int", "kKvStagingSlots", c.kv_staging_slots);
  add_constant(out, "int", "kKvStagingBytes", c.kv_staging_bytes);
  // The size of the parameters as the host was compiled (attention_params.cuh): a check that the
  // library and the templates it embeds agree.
  add_constant(out, "int", "kParamsBytes", sizeof(KernelParams));
  return out;
}

// The kernel's mask type (templates/kernel_mask.cuh): the causal flag alone, or with a sliding
// window and attention chunks.
std::string render_mask_type(const AttentionSpec& s) {
  return std::string("using Mask = ") + (s.masks_window_or_chunk() ? "WindowChunkMask" : "CausalMask") + ";\n";
}

// The kernel's score modifier (templates/kernel_score_mod.cuh): none, the softcap, ALiBi, or both.
std::string render_score_mod_type(const AttentionSpec& s) {
  const char* type = s.softcap ? (s.alibi ? "SoftcapAlibi" : "Softcap") : (s.alibi ? "Alibi" : "NoScoreMod");
  return std::string("using ScoreMod = ") + type + ";\n";
}

// The kernel's finalize step (templates/kernel_finalize.cuh): plain, or with learnable sinks.
std::string render_finalize_type(const AttentionSpec& s) {
  return std::string("using Finalize = ") + (s.sinks ? "SinkFinalize" : "PlainFinalize") + ";\n";
}

// The paired consumers' schedule (templates/attention_fwd.cuh, defined after the consumer): P
// handed from the first warpgroup to the second (HandOverPairs), or the two taking alternate blocks
// (SeesawPairs, seesaw=1). Declared here, ahead of the kernel that uses it.
std::string render_paired_consumers_type(const AttentionSpec& s) {
  const char* type = s.seesaw ? "SeesawPairs" : "HandOverPairs";
  return std::string("struct ") + type + ";\nusing PairedConsumers = " + type + ";\n";
}

// When v_in_k=1's scores may start on a K block (templates/attention_fwd.cuh: KWaits): once the
// slot has landed (SlotWaits), or chunk by chunk (ChunkWaits, chunk_waits=1).
std::string render_k_waits_type(const AttentionSpec& s) {
  const char* type = s.chunk_waits ? "ChunkWaits" : "SlotWaits";
  return std::string("struct ") + type + ";\nusing KWaits = " + type + ";\n";
}

// When the hand-over gives a latent slot back (templates/attention_fwd.cuh: SlotRelease): after the
// next block's scores (ReleaseAfterScores), as soon as its P V's are done (ReleaseEarly,
// early_release=1), or each warpgroup's part as soon as its P V is (ReleaseHalves, half_release=1).
std::string render_slot_release_type(const AttentionSpec& s) {
  const char* type = s.half_release ? "ReleaseHalves" : s.early_release ? "ReleaseEarly" : "ReleaseAfterScores";
  return std::string("struct ") + type + ";\nusing SlotRelease = " + type + ";\n";
}

}  // namespace

std::string_view embedded_template(std::string_view name) {
  for (size_t i = 0; i < kNumEmbeddedTemplates; ++i) {
    if (name == kEmbeddedTemplates[i].name) return kEmbeddedTemplates[i].text;
  }
  return {};
}

std::string render_attention_source(const KernelConfig& config) {
  // Order matters: constants, PTX wrappers, the parameters, the visibility rule, the score
  // modifiers and finalize step, the mask types and the one this variant uses, the score modifier
  // types and the one this variant uses, the tile deal, the
  // shared-memory tile layout, the wgmma shapes this variant uses, the split merge (called by the
  // kernel with combine=inline; small, and only parsed elsewhere), the paired consumers' schedule,
  // the kernel.
  std::string out = "// flashjit attention forward: " + to_string(config.spec) + "\n";
  out += render_constants(config);
  out += embedded_template("ptx.cuh");
  out += embedded_template("attention_params.cuh");
  out += embedded_template("visibility.cuh");
  out += embedded_template("score_mod.cuh");
  out += embedded_template("kernel_mask.cuh");
  out += render_mask_type(config.spec);
  out += embedded_template("kernel_score_mod.cuh");
  out += render_score_mod_type(config.spec);
  out += embedded_template("kernel_finalize.cuh");
  out += render_finalize_type(config.spec);
  out += embedded_template("tile_schedule.cuh");
  out += embedded_template("tile_layout.cuh");
  out += render_wgmma_shapes(config);
  out += embedded_template("split_merge.cuh");
  out += render_paired_consumers_type(config.spec);
  out += render_k_waits_type(config.spec);
  out += render_slot_release_type(config.spec);
  out += embedded_template("attention_fwd.cuh");
  // The second kernel of a split-KV launch: merges the splits' partials (same Params).
  if (config.spec.split_kv) out += embedded_template("split_combine.cuh");
  return out;
}

}  // namespace flashjit
