#include "cache/cache_dir.hpp"

#include <cstdlib>
#include <pwd.h>
#include <unistd.h>

#include "cache/posix_file.hpp"

namespace flashjit {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> home_dir() {
  if (auto home = env("HOME")) return home;
  // NOTES: services often run without HOME set; the password database still knows the home.
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir) return std::string(pw->pw_dir);
  return std::nullopt;
}

std::string resolve(std::optional<std::string> explicit_dir, CacheDirSource* source) {
  if (explicit_dir && !explicit_dir->empty()) {
    *source = CacheDirSource::kExplicit;
    return *explicit_dir;
  }
  if (auto dir = env("FLASHJIT_CACHE_DIR")) {
    *source = CacheDirSource::kFlashjitEnv;
    return *dir;
  }
  if (auto xdg = env("XDG_CACHE_HOME"); xdg && xdg->front() == '/') {
    *source = CacheDirSource::kXdgCacheHome;
    return posix::join_path(*xdg, "flashjit");
  }
  if (auto home = home_dir()) {
    *source = CacheDirSource::kHome;
    return posix::join_path(posix::join_path(*home, ".cache"), "flashjit");
  }
  *source = CacheDirSource::kNone;
  return {};
}

}  // namespace

const char* cache_dir_source_name(CacheDirSource source) {
  switch (source) {
    case CacheDirSource::kExplicit: return "explicit";
    case CacheDirSource::kFlashjitEnv: return "FLASHJIT_CACHE_DIR";
    case CacheDirSource::kXdgCacheHome: return "XDG_CACHE_HOME";
    case CacheDirSource::kHome: return "HOME";
    case CacheDirSource::kNone: return "none";
  }
  return "?";
}

std::string resolve_cache_dir(std::optional<std::string> explicit_dir, CacheDirSource* source) {
  CacheDirSource ignored;
  return resolve(std::move(explicit_dir), source ? source : &ignored);
}

}  // namespace flashjit
