// Small POSIX file helpers for the disk store: whole-file read, durable write, directory fsync,
// unique temporary names, listing, stamps. No cache policy lives here.
// Errors: a missing file or directory is kNotCompiled (a cache miss); any other failure is kCacheIo
// and the message names the path and strerror.
#pragma once
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/status.hpp"

namespace flashjit::posix {

// Which file a read saw, so a later rename can check it still names the same file.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct FileBytes {
  std::string bytes;
  FileIdentity identity;
};

struct FileStat {
  FileIdentity identity;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;  // since the Unix epoch
  bool regular = false;
  bool directory = false;
};

Result<FileBytes> read_file(const std::string& path);
// The path itself (lstat): a symlink is neither regular nor a directory.
Result<FileStat> stat_path(const std::string& path);
// What the path leads to (stat): a symlink to a directory is a directory.
Result<FileStat> stat_following_links(const std::string& path);

// Creates path (O_EXCL: it must not exist), writes all bytes, fsyncs and closes it. On failure the
// partial file is removed.
Status write_new_file_durably(const std::string& path, std::string_view bytes);

// Best effort: the rename is already atomic; this makes it durable across a power cut.
Status fsync_directory(const std::string& dir);

Status rename_path(const std::string& from, const std::string& to);
Status remove_file(const std::string& path);  // a missing file is not an error
Status remove_tree(const std::string& path);  // a file or a directory and all in it; missing is not an error
// Creates dir and its parents when missing; an existing directory, or a symlink to one, is fine.
Status make_directories(const std::string& dir);

// Names in dir, without "." and "..".
Result<std::vector<std::string>> list_directory(const std::string& dir);

// Sets the modification time to now. Returns false (and changes nothing) when not permitted.
bool touch_now(const std::string& path);

// "<pid>-<tid>-<16 random hex>": unique across processes and threads of one host.
std::string unique_suffix();

// True when probe_path (a new name in the directory to test) can be created, and then removes it.
bool probe_writable(const std::string& probe_path);

std::string join_path(const std::string& dir, const std::string& name);

}  // namespace flashjit::posix
