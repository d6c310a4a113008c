#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "cache/cache_dir.hpp"

namespace flashjit {
namespace {

// Sets (or unsets, for nullopt) environment variables, and restores them when it goes.
class EnvGuard {
 public:
  explicit EnvGuard(std::map<std::string, std::optional<std::string>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

struct Resolved {
  std::string dir;
  CacheDirSource source;
};

Resolved resolve(std::optional<std::string> explicit_dir) {
  CacheDirSource source = CacheDirSource::kNone;
  std::string dir = resolve_cache_dir(std::move(explicit_dir), &source);
  return {dir, source};
}

TEST(CacheDir, PrecedenceExplicitThenEnvThenXdgThenHome) {
  EnvGuard env({{"FLASHJIT_CACHE_DIR", "/env/fj"}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}});
  Resolved r = resolve("/explicit");
  EXPECT_EQ(r.dir, "/explicit");
  EXPECT_EQ(r.source, CacheDirSource::kExplicit);

  r = resolve(std::nullopt);
  EXPECT_EQ(r.dir, "/env/fj");
  EXPECT_EQ(r.source, CacheDirSource::kFlashjitEnv);

  ::unsetenv("FLASHJIT_CACHE_DIR");
  r = resolve(std::nullopt);
  EXPECT_EQ(r.dir, "/xdg/flashjit");
  EXPECT_EQ(r.source, CacheDirSource::kXdgCacheHome);

  ::unsetenv("XDG_CACHE_HOME");
  r = resolve(std::nullopt);
  EXPECT_EQ(r.dir, "/home/u/.cache/flashjit");
  EXPECT_EQ(r.source, CacheDirSource::kHome);
  EXPECT_EQ(resolve_cache_dir(std::nullopt), "/home/u/.cache/flashjit");
  EXPECT_STREQ(cache_dir_source_name(r.source), "HOME");
}

TEST(CacheDir, EmptyValuesAndRelativeXdgAreSkipped) {
  EnvGuard env({{"FLASHJIT_CACHE_DIR", ""}, {"XDG_CACHE_HOME", "relative/cache"}, {"HOME", "/home/v"}});
  Resolved r = resolve(std::string());  // an empty explicit dir counts as not given
  EXPECT_EQ(r.dir, "/home/v/.cache/flashjit");
  EXPECT_EQ(r.source, CacheDirSource::kHome);

  ::setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(resolve(std::nullopt).source, CacheDirSource::kHome);
}

TEST(CacheDir, WithoutHomeFallsBackToThePasswordDatabase) {
  EnvGuard env({{"FLASHJIT_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", std::nullopt}, {"HOME", std::nullopt}});
  Resolved r = resolve(std::nullopt);
  if (r.source == CacheDirSource::kNone) {
    EXPECT_TRUE(r.dir.empty());
  } else {
    EXPECT_EQ(r.source, CacheDirSource::kHome);
    EXPECT_TRUE(r.dir.ends_with("/.cache/flashjit")) << r.dir;
  }
}

}  // namespace
}  // namespace flashjit
