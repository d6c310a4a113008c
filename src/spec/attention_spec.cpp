#include "spec/attention_spec.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include "common/quote.hpp"

namespace flashjit {

const char* dtype_name(DType dtype) { return dtype == DType::kFp16 ? "fp16" : dtype == DType::kBf16 ? "bf16" : "e4m3"; }

namespace {

Error bad_value(std::string_view key, std::string_view value, std::string_view allowed) {
  return Error::invalid_spec(std::string(key), "spec field '" + std::string(key) + "': value " + quote_user_text(value) +
                                                   " is not allowed; allowed: " + std::string(allowed));
}

Result<int> parse_int(std::string_view key, std::string_view value, std::string_view allowed) {
  int out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    return bad_value(key, value, allowed);
  }
  return out;
}

// What every bool key takes (README's spec table says the same).
constexpr const char* kBoolAllowed = "0, 1, false or true (any case)";

Result<bool> parse_bool(std::string_view key, std::string_view value) {
  const llvm::StringRef v(value.data(), value.size());
  if (v == "1" || v.equals_insensitive("true")) return true;
  if (v == "0" || v.equals_insensitive("false")) return false;
  return bad_value(key, value, kBoolAllowed);
}

// One row per key, in canonical order: how to read it, how to print it (empty = omitted).
struct Field {
  const char* key;
  const char* allowed;
  std::function<Status(AttentionSpec&, std::string_view)> read;
  std::function<std::string(const AttentionSpec&)> print;
};

Status set_int(int& slot, std::string_view key, std::string_view value, std::string_view allowed) {
  auto parsed = parse_int(key, value, allowed);
  if (!parsed) return parsed.take_error();
  slot = *parsed;
  return {};
}

Status set_bool(bool& slot, std::string_view key, std::string_view value) {
  auto parsed = parse_bool(key, value);
  if (!parsed) return parsed.take_error();
  slot = *parsed;
  return {};
}

// A field whose 0 means "auto" inside AttentionSpec: the text must leave the key out to say that,
// so an explicit 0 is out of range like any other value.
Status set_tile(int& slot, std::string_view key, std::string_view value, std::string_view allowed) {
  if (Status st = set_int(slot, key, value, allowed); !st) return st;
  if (slot != 0) return {};
  return Error::invalid_spec(std::string(key), "spec field '" + std::string(key) + "': value 0 is not allowed; allowed: " +
                                                   std::string(allowed) + " (leave " + std::string(key) +
                                                   " out for the default)");
}

std::string int_or_auto(int value) { return value ? std::to_string(value) : std::string(); }

// A 0/1 key printed only when on, so that every spec from before the key keeps its text (and its
// cache key).
Field printed_when_on(const char* key, bool AttentionSpec::*flag) {
  return {key, kBoolAllowed, [key, flag](AttentionSpec& s, std::string_view v) { return set_bool(s.*flag, key, v); },
          [flag](const AttentionSpec& s) { return s.*flag ? std::string("1") : std::string(); }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"dtype", "fp16, bf16, e4m3",
       [](AttentionSpec& s, std::string_view v) -> Status {
         // Any case, like the bool words.
         const llvm::StringRef word(v.data(), v.size());
         if (word.equals_insensitive("fp16") || word.equals_insensitive("f16") || word.equals_insensitive("half")) {
           s.dtype = DType::kFp16;
           return {};
         }
         if (word.equals_insensitive("bf16")) { s.dtype = DType::kBf16; return {}; }
         if (word.equals_insensitive("e4m3") || word.equals_insensitive("float8_e4m3fn")) { s.dtype = DType::kE4m3; return {}; }
         return bad_value("dtype", v, "fp16, bf16, e4m3");
       },
       [](const AttentionSpec& s) { return std::string(dtype_name(s.dtype)); }},
      {"head_dim", "a multiple of 8 in 8..576 (above 256: see head_dim_v)",
       [](AttentionSpec& s, std::string_view v) { return set_int(s.head_dim, "head_dim", v, "a multiple of 8 in 8..576"); },
       [](const AttentionSpec& s) { return std::to_string(s.head_dim); }},
      {"head_dim_v", "a multiple of 8 in 8..head_dim",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.head_dim_v, "head_dim_v", v, "a multiple of 8 in 8..head_dim"); },
       [](const AttentionSpec& s) { return int_or_auto(s.head_dim_v); }},
      {"causal", kBoolAllowed,
       [](AttentionSpec& s, std::string_view v) { return set_bool(s.causal, "causal", v); },
       [](const AttentionSpec& s) { return std::string(s.causal ? "1" : "0"); }},
      {"stages", "1..4",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.stages, "stages", v, "1..4"); },
       [](const AttentionSpec& s) { return int_or_auto(s.stages); }},
      {"consumer_wgs", "1, 2 or 3",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.consumer_wgs, "consumer_wgs", v, "1, 2 or 3"); },
       [](const AttentionSpec& s) { return int_or_auto(s.consumer_wgs); }},
      {"block_m", "64 * consumer_wgs",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.block_m, "block_m", v, "64, 128 or 192"); },
       [](const AttentionSpec& s) { return int_or_auto(s.block_m); }},
      {"block_n", "a multiple of 16 in 16..256",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.block_n, "block_n", v, "a multiple of 16 in 16..256"); },
       [](const AttentionSpec& s) { return int_or_auto(s.block_n); }},
      {"cluster", "1 or 2",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.cluster, "cluster", v, "1 or 2"); },
       [](const AttentionSpec& s) { return int_or_auto(s.cluster); }},
      {"ctas_per_sm", "1 or 2",
       [](AttentionSpec& s, std::string_view v) { return set_tile(s.ctas_per_sm, "ctas_per_sm", v, "1 or 2"); },
       [](const AttentionSpec& s) { return int_or_auto(s.ctas_per_sm); }},
      {"overlap", kBoolAllowed,
       [](AttentionSpec& s, std::string_view v) -> Status {
         bool b = false;
         if (Status st = set_bool(b, "overlap", v); !st) return st;
         s.overlap = b;
         return {};
       },
       [](const AttentionSpec& s) { return s.overlap < 0 ? std::string() : std::to_string(s.overlap); }},
      {"pingpong", kBoolAllowed,
       [](AttentionSpec& s, std::string_view v) -> Status {
         bool b = false;
         if (Status st = set_bool(b, "pingpong", v); !st) return st;
         s.pingpong = b;
         return {};
       },
       [](const AttentionSpec& s) { return s.pingpong < 0 ? std::string() : std::to_string(s.pingpong); }},
      printed_when_on("hang_trap", &AttentionSpec::hang_trap),
      // Engine inputs.
      printed_when_on("varlen", &AttentionSpec::varlen),
      printed_when_on("paged", &AttentionSpec::paged),
      printed_when_on("pack_gqa", &AttentionSpec::pack_gqa),
      printed_when_on("split_kv", &AttentionSpec::split_kv),
      // Printed only when dynamic: static is the default and keeps every earlier spec's text.
      {"scheduler", "static or dynamic",
       [](AttentionSpec& s, std::string_view v) -> Status {
         if (v == "static" || v == "dynamic") { s.dynamic_schedule = v == "dynamic"; return {}; }
         return bad_value("scheduler", v, "static or dynamic");
       },
       [](const AttentionSpec& s) { return s.dynamic_schedule ? std::string("dynamic") : std::string(); }},
      // Printed only when inline: the combine kernel is the default and keeps every earlier spec's text.
      {"combine", "kernel or inline",
       [](AttentionSpec& s, std::string_view v) -> Status {
         if (v == "kernel" || v == "inline") { s.inline_combine = v == "inline"; return {}; }
         return bad_value("combine", v, "kernel or inline");
       },
       [](const AttentionSpec& s) { return s.inline_combine ? std::string("inline") : std::string(); }},
      // Masks and score modifiers (issue 38).
      printed_when_on("window", &AttentionSpec::window),
      printed_when_on("chunk", &AttentionSpec::chunk),
      printed_when_on("softcap", &AttentionSpec::softcap),
      printed_when_on("sinks", &AttentionSpec::sinks),
      printed_when_on("alibi", &AttentionSpec::alibi),
      // FlashAttention-3's split MLA form (issue 40): Q and K each in two tensors.
      printed_when_on("qv", &AttentionSpec::qv),
      // V read from K's rows, two consumer warpgroups sharing a tile's scores (issue 40).
      printed_when_on("v_in_k", &AttentionSpec::v_in_k),
      // The same two warpgroups sharing a tile's scores, V from its own ring (issue 40).
      printed_when_on("paired", &AttentionSpec::paired),
      // v_in_k=1's two warpgroups taking the scores of alternate blocks (issue 40).
      printed_when_on("seesaw", &AttentionSpec::seesaw),
      // v_in_k=1's scores issued chunk by chunk as K lands (issue 40).
      printed_when_on("chunk_waits", &AttentionSpec::chunk_waits),
      // The hand-over's latent slots given back as soon as their P V's are done (issue 40).
      printed_when_on("early_release", &AttentionSpec::early_release),
      // The hand-over's latent slots given back in two parts, one per warpgroup (issue 40).
      printed_when_on("half_release", &AttentionSpec::half_release),
      // The head dims shared out over a cluster's two CTAs (issue 40: d512 prefill).
      printed_when_on("dim_split", &AttentionSpec::dim_split),
      // Q's first head dims in the scores warpgroup's registers (issue 40); printed when not 0.
      {"q_reg_dims", "a multiple of 16 in 0..max_q_reg_dims (with paired=1 or v_in_k=1)",
       [](AttentionSpec& s, std::string_view v) { return set_int(s.q_reg_dims, "q_reg_dims", v, "a multiple of 16 from 0"); },
       [](const AttentionSpec& s) { return int_or_auto(s.q_reg_dims); }},
      // O's type with FP8 operands (issue 39); printed with dtype=e4m3 only.
      {"out_dtype", "fp16 or bf16 (with dtype=e4m3)",
       [](AttentionSpec& s, std::string_view v) -> Status {
         const llvm::StringRef word(v.data(), v.size());
         if (word.equals_insensitive("fp16") || word.equals_insensitive("f16") || word.equals_insensitive("half")) { s.out_dtype = DType::kFp16; return {}; }
         if (word.equals_insensitive("bf16")) { s.out_dtype = DType::kBf16; return {}; }
         return bad_value("out_dtype", v, "fp16 or bf16");
       },
       [](const AttentionSpec& s) { return s.fp8_operands() ? std::string(dtype_name(s.out_dtype)) : std::string(); }},
      // The K/V cache's element type (issue 39); printed only when it differs from dtype.
      {"kv_dtype", "e4m3, or the dtype's own (fp16, bf16)",
       [](AttentionSpec& s, std::string_view v) -> Status {
         const llvm::StringRef word(v.data(), v.size());
         if (word.equals_insensitive("e4m3") || word.equals_insensitive("fp8") || word.equals_insensitive("float8_e4m3fn")) {
           s.kv_dtype = KvDType::kE4m3;
           return {};
         }
         if (word.equals_insensitive(dtype_name(s.dtype))) { s.kv_dtype = KvDType::kSame; return {}; }
         return bad_value("kv_dtype", v, std::string("e4m3, or ") + dtype_name(s.dtype) + " (the dtype's own; dtype goes first)");
       },
       [](const AttentionSpec& s) { return s.kv_fp8() ? std::string("e4m3") : std::string(); }},
  };
  return table;
}

}  // namespace

Result<AttentionSpec> parse_spec(std::string_view text) {
  AttentionSpec spec;
  llvm::SmallVector<llvm::StringRef, 16> parts;
  llvm::StringRef(text.data(), text.size()).trim().split(parts, ',', -1, /*KeepEmpty=*/false);
  if (parts.empty()) return Error::invalid_spec("spec", "empty spec; expected key=value pairs such as dtype=bf16,head_dim=128");
  std::vector<bool> seen(fields().size(), false);
  for (llvm::StringRef part : parts) {
    auto [key_ref, value_ref] = part.split('=');
    std::string_view key(key_ref.trim().data(), key_ref.trim().size());
    std::string_view value(value_ref.trim().data(), value_ref.trim().size());
    if (!part.contains('=')) {
      return Error::invalid_spec(shorten_user_text(key), "spec item " + quote_user_text(std::string_view(part.data(), part.size())) +
                                                             " is not key=value");
    }
    // NOTES: named as the spec itself: an empty key would give the error an empty field name.
    if (key.empty()) {
      return Error::invalid_spec("spec", "spec item " + quote_user_text(std::string_view(part.data(), part.size())) +
                                             " has no key; expected key=value");
    }
    size_t index = 0;
    while (index < fields().size() && key != fields()[index].key) ++index;
    if (index == fields().size()) {
      std::string keys;
      for (const Field& f : fields()) keys += (keys.empty() ? "" : ", ") + std::string(f.key);
      return Error::invalid_spec(shorten_user_text(key), "unknown spec field " + quote_user_text(key) + "; known: " + keys);
    }
    if (seen[index]) return Error::invalid_spec(std::string(key), "spec field '" + std::string(key) + "' given twice");
    seen[index] = true;
    if (Status st = fields()[index].read(spec, value); !st) return st.take_error();
  }
  if (Status st = validate_spec(spec); !st) return st.take_error();
  return spec;
}

std::string to_string(const AttentionSpec& spec) {
  std::string out;
  for (const Field& f : fields()) {
    std::string value = f.print(spec);
    if (value.empty()) continue;
    if (!out.empty()) out += ',';
    out += f.key;
    out += '=';
    out += value;
  }
  return out;
}

Status validate_spec(const AttentionSpec& s) {
  auto fail = [](const char* key, int value, const char* allowed) {
    return Error::invalid_spec(key, "spec field '" + std::string(key) + "': value " + std::to_string(value) +
                                        " is not allowed; allowed: " + allowed);
  };
  if (s.head_dim < 8 || s.head_dim > 576 || s.head_dim % 8 != 0) return fail("head_dim", s.head_dim, "a multiple of 8 in 8..576");
  // NOTES: above 256 Q K^T takes more k steps (Mistral Small 4's 320/256); O's accumulator is the
  // P V GEMM's N, at most 256 (wgmma's largest), so a V wider than 256 (Gemma 4's 512/512, MLA's
  // absorbed 576/512) is computed in two column parts, each its own tile (o_parts in config/).
  const int v_dim = s.effective_head_dim_v();
  if (v_dim > 256 && (v_dim > 512 || v_dim % 128 != 0)) {
    return fail("head_dim_v", v_dim, "at most 256, or 384 or 512 (two column parts of O) with head_dim at least as large");
  }
  if (s.head_dim > 256 || v_dim > 256) {
    auto fail_large = [](const char* field, int value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + std::to_string(value) +
                                            " is not allowed with head_dim above 256; allowed: " + allowed);
    };
    if ((s.head_dim > 320 || v_dim > 256) && !s.pairs_o() && !s.dim_split) {  // one consumer warpgroup: Q's tile and O's part fit
      if (s.consumer_wgs > 1) return fail_large("consumer_wgs", s.consumer_wgs, "1 (a 64-row tile: Q's and the K/V blocks' shared memory)");
    }
    if (s.cluster == 2) return fail_large("cluster", 2, "1");
    if (s.ctas_per_sm == 2) return fail_large("ctas_per_sm", 2, "1");
    if (s.dynamic_schedule) return Error::invalid_spec("scheduler", "spec field 'scheduler': value dynamic is not allowed with head_dim above 256; allowed: static");
    // NOTES: the inline merge above 256 needs both halves of O's columns in one CTA: v_in_k and paired
    // (O in column parts splits them over two CTAs, dim_split over a cluster, and has no split_kv).
    if (s.inline_combine && v_dim > 256 && !s.pairs_o()) {
      return Error::invalid_spec("combine", "spec field 'combine': value inline is not allowed with head_dim_v above 256; allowed: kernel, or inline with v_in_k=1 or paired=1");
    }
    // NOTES: the FP8 cache above 256 (MLA's e4m3 latent cache): the staging slots take K's rows
    // and V's part (kVCols columns from the part's first); FP8 operands' transposed V does not
    // come in parts.
    if (s.fp8_operands()) return fail_large("head_dim", s.head_dim, "at most 256 with FP8 operands (dtype=e4m3)");
  }
  // NOTES: V's head dim apart from Q's and K's (issue 40: DeepSeek's 192/128 prefill), at most
  // head_dim: O's 16-bit slices are staged in the Q buffer (or a K/V slot), which holds head_dim
  // columns.
  if (s.head_dim_v != 0 && (s.head_dim_v < 8 || s.head_dim_v > s.head_dim || s.head_dim_v % 8 != 0)) {
    return fail("head_dim_v", s.head_dim_v, ("a multiple of 8 in 8.." + std::to_string(s.head_dim) + " (at most head_dim)").c_str());
  }
  // NOTES: qv=1 loads each 64-column chunk of Q's and K's tiles from one tensor: qv's and V's
  // chunks first, then q's and k's (the producer's load_q and load_tile).
  if (s.qv) {
    if (s.head_dim_v == 0 || s.head_dim_v % 64 != 0 || s.head_dim_v >= s.head_dim || (s.head_dim - s.head_dim_v) % 64 != 0) {
      return Error::invalid_spec("qv", "spec field 'qv': value 1 is not allowed with head_dim=" + std::to_string(s.head_dim) +
                                           " and head_dim_v=" + std::to_string(v_dim) +
                                           "; allowed: head_dim_v a multiple of 64 below head_dim, head_dim - head_dim_v a multiple of 64 "
                                           "(FlashAttention-3's MLA: head_dim=576,head_dim_v=512)");
    }
    if (s.kv_fp8() || s.fp8_operands()) return Error::invalid_spec("qv", "spec field 'qv': value 1 is not allowed with FP8 (kv_dtype=e4m3 or dtype=e4m3); allowed: 0");
  }
  // NOTES: v_in_k=1 reads V from K's ring slot (no V ring) and splits O between two consumer
  // warpgroups on the same 64 rows, the first one computing the scores and handing P to the second
  // through shared memory (templates/attention_fwd.cuh: the paired consumers); paired=1 is the
  // same split with V in its own ring. Q's 64 rows, the P tile and two 64-key stages of K's 576
  // columns fill the 227 KB (512/512 paired: two 32-key stages of K and V). With qv=1 the K tile's
  // first head_dim_v columns are loaded from V's own map (chunk_map), so V is in K's slot there too:
  // v_in_k=1 takes FlashAttention-3's split form as it is (paired=1 does not: V has its own ring).
  if (s.v_in_k && s.paired) {
    return Error::invalid_spec("paired", "spec field 'paired': value 1 is not allowed with v_in_k=1; allowed: 0 (v_in_k=1 pairs the warpgroups itself)");
  }
  if (s.pairs_o()) {
    const char* key = s.v_in_k ? "v_in_k" : "paired";
    auto fail_paired = [key](const char* field, const std::string& value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + value +
                                            " is not allowed with " + key + "=1; allowed: " + allowed);
    };
    if (v_dim != 384 && v_dim != 512) {
      return fail_paired("head_dim_v", std::to_string(v_dim), "384 or 512 (O split between two consumer warpgroups; MLA's latent: 512)");
    }
    if (s.kv_fp8() || s.fp8_operands()) {
      return Error::invalid_spec(key, std::string("spec field '") + key + "': value 1 is not allowed with FP8 (kv_dtype=e4m3 or dtype=e4m3); allowed: 0");
    }
    if (s.qv && s.paired) return fail_paired("qv", "1", "0 (paired=1 loads V into its own ring; v_in_k=1 takes qv=1)");
    // NOTES: a latent cache is an engine's input (packed or paged K/V); the dense check and
    // benchmarks have no form with V in K's rows, so no dense kernel would ever be run.
    if (s.v_in_k && !s.varlen && !s.paged) {
      return Error::invalid_spec("v_in_k", "spec field 'v_in_k': value 1 is not allowed without varlen=1 or paged=1; allowed: 0 (V in K's rows is an engine's latent cache)");
    }
    if (s.consumer_wgs != 0 && s.consumer_wgs != 2) return fail_paired("consumer_wgs", std::to_string(s.consumer_wgs), "2 (the two halves of O)");
    if (s.block_m != 0 && s.block_m != 64) return fail_paired("block_m", std::to_string(s.block_m), "64 (both consumer warpgroups take the tile's 64 rows)");
    if (s.pingpong == 1) return fail_paired("pingpong", "1", "0 (the warpgroups hand P on instead of taking turns)");
    if (s.block_n != 0 && s.block_n != 64 && s.block_n != 32) return fail_paired("block_n", std::to_string(s.block_n), "32 or 64 (P one tile of 128-byte rows)");
  }
  // NOTES: seesaw=1 hands each block's P over in its K slot's columns past V (the rotary chunk,
  // read only by that block's scores), so it needs a chunk of K beyond V's 512 columns, and two
  // 64-key slots, one for each warpgroup's block of a pair.
  if (s.seesaw) {
    auto fail_seesaw = [](const char* field, const std::string& value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + value + " is not allowed with seesaw=1; allowed: " + allowed);
    };
    if (!s.v_in_k) return Error::invalid_spec("seesaw", "spec field 'seesaw': value 1 is not allowed without v_in_k=1; allowed: 0 (the seesaw is v_in_k=1's schedule)");
    if (v_dim != 512 || s.head_dim <= 512) {
      return fail_seesaw("head_dim", std::to_string(s.head_dim) + " (head_dim_v " + std::to_string(v_dim) + ")",
                         "head_dim_v 512 with head_dim above 512 (MLA's 576/512: P crosses in K's columns past V)");
    }
    if (s.block_n != 0 && s.block_n != 64) return fail_seesaw("block_n", std::to_string(s.block_n), "64");
    if (s.stages != 0 && s.stages != 2) return fail_seesaw("stages", std::to_string(s.stages), "2 (a slot for each warpgroup's block of a pair)");
  }
  if (s.chunk_waits && !s.v_in_k) {
    return Error::invalid_spec("chunk_waits", "spec field 'chunk_waits': value 1 is not allowed without v_in_k=1; allowed: 0 (the waits are on "
                                              "v_in_k=1's K slots)");
  }
  // NOTES: the early release splits the hand-over's scores around its chunk waits; the seesaw
  // releases half slots on its own terms.
  if (s.early_release && (!s.chunk_waits || s.seesaw)) {
    return Error::invalid_spec("early_release", std::string("spec field 'early_release': value 1 is not allowed ") +
                                                    (s.seesaw ? "with seesaw=1" : "without chunk_waits=1") +
                                                    "; allowed: 0 (the early release is chunk_waits=1's hand-over schedule: "
                                                    "chunk_waits=1 with seesaw=0)");
  }
  if (s.half_release && !s.early_release) {
    return Error::invalid_spec("half_release", "spec field 'half_release': value 1 is not allowed without early_release=1; allowed: 0 "
                                               "(the parts are early_release=1's releases)");
  }
  // q_reg_dims: the hand-over's first warpgroup (paired=1, v_in_k=1) computes every score, so Q's
  // registers are its alone; the seesaw's two warpgroups both compute scores and have none to spare.
  if (s.q_reg_dims != 0) {
    auto fail_regs = [&s](const std::string& allowed) {
      return Error::invalid_spec("q_reg_dims", "spec field 'q_reg_dims': value " + std::to_string(s.q_reg_dims) +
                                                   " is not allowed; allowed: " + allowed);
    };
    if (!s.pairs_o() || s.seesaw) return fail_regs("0 without paired=1 or v_in_k=1, and with seesaw=1 (Q in the registers of the one warpgroup that computes the scores)");
    const int most = max_q_reg_dims(s);
    if (s.q_reg_dims < 0 || s.q_reg_dims % 16 != 0 || s.q_reg_dims > s.head_dim || (s.block_n != 0 && s.q_reg_dims > most)) {
      return fail_regs("a multiple of 16 in 0.." +
                       (s.block_n != 0 ? std::to_string(most) + " at head_dim=" + std::to_string(s.head_dim) + ", head_dim_v=" +
                                             std::to_string(v_dim) + ", block_n=" + std::to_string(s.block_n) +
                                             " (4 registers a thread each 16 head dims, beside S, P and half of O in 256)"
                                       : std::to_string(s.head_dim / 16 * 16) + " (head_dim)"));
    }
  }
  // NOTES: dim_split=1 gives each CTA of a cluster half of every head dim, a 64-column chunk
  // multiple, and one wgmma N of O (at most 256); both CTAs walk the same tile (one tile a
  // cluster, no persistent walk, no dynamic take), two consumer warpgroups of 64 rows each, and
  // add their partial scores before the mask and the softmax, which both then run alike.
  if (s.dim_split) {
    auto fail_split = [](const char* field, const std::string& value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + value + " is not allowed with dim_split=1; allowed: " + allowed);
    };
    if ((s.head_dim != 384 && s.head_dim != 512) || v_dim != s.head_dim) {
      return fail_split("head_dim", std::to_string(s.head_dim) + " (head_dim_v " + std::to_string(v_dim) + ")",
                        "384 or 512 with head_dim_v the same (each CTA takes half: 192 or 256 columns)");
    }
    if (s.pairs_o() || s.seesaw) return fail_split(s.v_in_k ? "v_in_k" : "paired", "1", "0 (the two CTAs split the head dims instead)");
    if (s.qv) return fail_split("qv", "1", "0");
    if (s.kv_fp8() || s.fp8_operands()) {
      return Error::invalid_spec("dim_split", "spec field 'dim_split': value 1 is not allowed with FP8 (kv_dtype=e4m3 or dtype=e4m3); allowed: 0");
    }
    if (s.split_kv) return fail_split("split_kv", "1", "0 (a prefill kernel: O in parts takes the decode)");
    if (s.consumer_wgs != 0 && s.consumer_wgs != 2) return fail_split("consumer_wgs", std::to_string(s.consumer_wgs), "2 (64 rows each, as at head dim 256)");
    if (s.block_m != 0 && s.block_m != 128) return fail_split("block_m", std::to_string(s.block_m), "128");
    if (s.block_n != 0 && s.block_n != 32 && s.block_n != 48 && s.block_n != 64) {
      return fail_split("block_n", std::to_string(s.block_n), "32, 48 or 64 (the ring and the peer's scores fit the shared memory)");
    }
  }
  if (s.stages != 0 && (s.stages < 1 || s.stages > 4)) return fail("stages", s.stages, "1..4");
  if (s.consumer_wgs != 0 && (s.consumer_wgs < 1 || s.consumer_wgs > 3)) return fail("consumer_wgs", s.consumer_wgs, "1, 2 or 3");
  if (s.block_m != 0 && s.block_m != 64 && s.block_m != 128 && s.block_m != 192) {
    return fail("block_m", s.block_m, "64, 128 or 192 (64 rows per consumer warpgroup)");
  }
  // NOTES: v_in_k=1 and paired=1 (above) put two consumer warpgroups on one 64-row tile: block_m 64, consumer_wgs 2.
  if (s.block_m != 0 && s.consumer_wgs != 0 && s.block_m != 64 * s.consumer_wgs && !s.pairs_o()) {
    return fail("block_m", s.block_m, ("64 * consumer_wgs = " + std::to_string(64 * s.consumer_wgs)).c_str());
  }
  if (s.cluster != 0 && s.cluster != 1 && s.cluster != 2) return fail("cluster", s.cluster, "1 or 2");
  if (s.ctas_per_sm != 0 && s.ctas_per_sm != 1 && s.ctas_per_sm != 2) return fail("ctas_per_sm", s.ctas_per_sm, "1 or 2");
  // NOTES: two CTAs of 128 + 128 * consumer_wgs threads share the SM's 64K registers: 128 a thread
  // at entry, which holds one consumer warpgroup's accumulators but not two or three.
  if (s.ctas_per_sm == 2 && s.consumer_wgs > 1) {
    return fail("ctas_per_sm", 2, "1 with consumer_wgs=2 or 3 (two CTAs an SM leave registers for one consumer warpgroup)");
  }
  // NOTES: ... and a head dim above 192 needs more than 128 for O's accumulator (ptxas: C7602).
  if (s.ctas_per_sm == 2 && s.head_dim > 192) {
    return fail("ctas_per_sm", 2, "1 above head_dim 192 (two CTAs an SM leave 128 registers a thread at entry, too few for its O)");
  }
  // NOTES: two CTAs an SM leave the producer 24 registers, too few for the paged producer's warps
  // (each thread holds a block's page, read ahead); the one-thread producer they had instead lost
  // to one CTA with the warps by 1.5 % in geomean over ten paged decode cells, 9 % at batch 1
  // (bench/NOTES.md, version 62b), and no default used it since.
  if (s.ctas_per_sm == 2 && s.paged) return fail("ctas_per_sm", 2, "1 with paged=1 (two CTAs an SM leave the paged producer too few registers)");
  // NOTES: the softmax always overlaps the previous block's PV GEMM (FlashAttention-3); the serial
  // step (S, softmax, PV one block at a time) won at no shape the tuner timed (bench/NOTES.md,
  // version 32) and left the kernel.
  if (s.overlap == 0) return fail("overlap", 0, "1 (the softmax always overlaps the previous block's PV GEMM)");
  if (s.pingpong == 1 && s.consumer_wgs == 1) return fail("pingpong", 1, "0 with consumer_wgs=1 (pingpong needs two or more consumer warpgroups)");
  if (s.block_n != 0 && (s.block_n < 16 || s.block_n > 256 || s.block_n % 16 != 0)) {
    return fail("block_n", s.block_n, "a multiple of 16 in 16..256");
  }
  // NOTES: a cluster's two CTAs share K/V blocks of one sequence; with lengths read on the device
  // a neighbouring query block may be another sequence's (or none).
  if ((s.varlen || s.paged) && s.cluster == 2) return fail("cluster", s.cluster, "1 with varlen=1 or paged=1");
  // NOTES: packed heads and split partials store O row by row (and index the workspace) by packed
  // query rows: the varlen layout.
  if (s.pack_gqa && !s.varlen) return fail("pack_gqa", 1, "0 without varlen=1 (packed heads need packed queries)");
  if (s.split_kv && !s.varlen) return fail("split_kv", 1, "0 without varlen=1 (split partials need packed queries)");
  if (s.inline_combine && !s.split_kv) {
    return Error::invalid_spec("combine", "spec field 'combine': value inline is not allowed; allowed: kernel without split_kv=1 (there are no splits to merge)");
  }
  // NOTES: the dynamic scheduler's producer takes each tile from the counter and publishes it
  // beside Q; it needs more registers than the static deal's 24-32 (config/: register_split), which
  // two CTAs an SM and three consumer warpgroups do not have, and a cluster has
  // one CTA per tile (nothing to schedule). Two Q buffers are checked with the tiles (config/).
  if (s.dynamic_schedule) {
    auto fail_scheduler = [](const char* why) {
      return Error::invalid_spec("scheduler", std::string("spec field 'scheduler': value dynamic is not allowed; allowed: static ") + why);
    };
    if (s.ctas_per_sm == 2) return fail_scheduler("with ctas_per_sm=2 (no registers for the dynamic producer)");
    if (s.consumer_wgs == 3) return fail_scheduler("with consumer_wgs=3 (no registers for the dynamic producer)");
    if (s.cluster == 2) return fail_scheduler("with cluster=2 (one CTA per tile)");
  }
  // NOTES: a cluster's two CTAs load the union of their block ranges; with a window or chunks the
  // ranges differ at both ends, which the cluster's shared walk does not take yet.
  if (s.masks_window_or_chunk() && s.cluster == 2) {
    return fail("cluster", 2, s.window ? "1 with window=1 (the two CTAs' windows differ at both ends)" : "1 with chunk=1 (the two CTAs' chunks differ at both ends)");
  }
  // NOTES: FP8 operands (dtype=e4m3): the k32 steps of the FP8 GEMMs, V transposed by the producer
  // warpgroup (FP8 wgmma takes K-major operands only), which needs the same registers as the FP8
  // cache's; O in out_dtype.
  if (s.fp8_operands()) {
    auto fail_fp8 = [](const char* field, int value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + std::to_string(value) +
                                            " is not allowed with dtype=e4m3; allowed: " + allowed);
    };
    if (s.head_dim % 32 != 0) return fail_fp8("head_dim", s.head_dim, "a multiple of 32 (the FP8 GEMMs' k32 steps)");
    if (s.kv_fp8()) return Error::invalid_spec("kv_dtype", "spec field 'kv_dtype': value e4m3 is not allowed with dtype=e4m3; allowed: leave it out (K and V are e4m3 already)");
    if (s.cluster == 2) return fail_fp8("cluster", 2, "1");
    if (s.ctas_per_sm == 2) return fail_fp8("ctas_per_sm", 2, "1 (no registers for the producer's transpose of V)");
    if (s.consumer_wgs == 3) return fail_fp8("consumer_wgs", 3, "1 or 2 (no registers for the producer's transpose of V)");
    if (s.block_n != 0 && s.block_n % 32 != 0) return fail_fp8("block_n", s.block_n, "a multiple of 32 (the FP8 P V GEMM's k32 steps)");
    if (s.dynamic_schedule) return Error::invalid_spec("scheduler", "spec field 'scheduler': value dynamic is not allowed with dtype=e4m3; allowed: static");
    // NOTES: the softcap's tanh and ALiBi's bias take the descaled score; not with FP8 operands yet.
    if (s.softcap) return Error::invalid_spec("softcap", "spec field 'softcap': value 1 is not allowed with dtype=e4m3; allowed: 0 (not with FP8 operands yet)");
    if (s.alibi) return Error::invalid_spec("alibi", "spec field 'alibi': value 1 is not allowed with dtype=e4m3; allowed: 0 (not with FP8 operands yet)");
  }
  if (!s.fp8_operands() && s.out_dtype != DType::kBf16) {
    return Error::invalid_spec("out_dtype", "spec field 'out_dtype': value fp16 is not allowed; allowed: leave it out (O is dtype's; out_dtype goes with dtype=e4m3)");
  }
  // NOTES: the FP8 cache's producer warpgroup loads and widens K/V itself (no TMA multicast, no
  // dynamic take broadcast beyond one warp) and needs more registers than two CTAs an SM or three
  // consumer warpgroups leave it (config/: register_split).
  if (s.kv_fp8()) {
    auto fail_kv = [](const char* field, int value, const char* allowed) {
      return Error::invalid_spec(field, std::string("spec field '") + field + "': value " + std::to_string(value) +
                                            " is not allowed with kv_dtype=e4m3; allowed: " + allowed);
    };
    if (s.head_dim % 16 != 0) return fail_kv("head_dim", s.head_dim, "a multiple of 16 (K/V rows are widened 16 bytes at a time)");
    if (s.cluster == 2) return fail_kv("cluster", 2, "1 (the FP8 cache's producer widens K/V for its own CTA)");
    if (s.ctas_per_sm == 2) return fail_kv("ctas_per_sm", 2, "1 (no registers for the FP8 cache's producer)");
    if (s.consumer_wgs == 3) return fail_kv("consumer_wgs", 3, "1 or 2 (no registers for the FP8 cache's producer)");
    if (s.dynamic_schedule) {
      return Error::invalid_spec("scheduler", "spec field 'scheduler': value dynamic is not allowed with kv_dtype=e4m3; allowed: static");
    }
  }
  return {};
}

// The scores warpgroup's 256 registers a thread: half of O (head_dim_v / 4), S (block_n / 2) and
// P (block_n / 4), Q's registers (4 each 16 head dims) and about 32 for the rest (measured peaks:
// 576/512 at 64-key blocks 246 with 192 dims, 512/512 at 32-key blocks 234 with 256, 384/384 234
// with all 384; 512/512 with 320 spilled 16 bytes). ALiBi's row registers beside a window's or
// chunk's bounds take 4 more (576/512's early release with both spilled 16 bytes at 192, none at 176),
// and 4 more again where the split launch merges inline (combine=inline: its early release spilled
// 16 bytes at 176, none at 160). A compile of every spec at its most found no other spill
// (bench/NOTES.md, 2026-12-07).
int max_q_reg_dims(const AttentionSpec& s) {
  if (s.block_n == 0) return 0;
  const bool alibi_beside_bounds = s.alibi && s.masks_window_or_chunk();
  const int rest = alibi_beside_bounds ? (s.inline_combine ? 40 : 36) : 32;
  const int steps = (256 - rest - s.effective_head_dim_v() / 4 - 3 * s.block_n / 4) / 4;
  return std::max(0, std::min(steps, s.head_dim / 16)) * 16;
}

}  // namespace flashjit
