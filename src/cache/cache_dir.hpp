// Where the disk cache lives. Precedence, first non-empty wins:
//   1. the explicit directory (the tool's --cache-dir, or the API's option)
//   2. $FLASHJIT_CACHE_DIR
//   3. $XDG_CACHE_HOME/flashjit   (only when XDG_CACHE_HOME is absolute, as the XDG spec requires)
//   4. $HOME/.cache/flashjit      (HOME from the environment, else the password database)
// When none applies the result is empty and the source kNone: the cache runs in memory only.
#pragma once
#include <optional>
#include <string>

namespace flashjit {

enum class CacheDirSource { kExplicit, kFlashjitEnv, kXdgCacheHome, kHome, kNone };

const char* cache_dir_source_name(CacheDirSource source);  // "explicit", "FLASHJIT_CACHE_DIR", ...

// Reads the environment; creates nothing.
std::string resolve_cache_dir(std::optional<std::string> explicit_dir, CacheDirSource* source = nullptr);

}  // namespace flashjit
