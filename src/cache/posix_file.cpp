#include "cache/posix_file.hpp"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <llvm/Support/FileSystem.h>

namespace flashjit::posix {
namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  const ErrorCode code = err == ENOENT ? ErrorCode::kNotCompiled : ErrorCode::kCacheIo;
  return Error::make(code, what + " " + path + ": " + std::strerror(err));
}

// Closes the descriptor when it leaves scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

FileStat to_file_stat(const struct stat& st) {
  FileStat out;
  out.identity = {st.st_dev, st.st_ino};
  out.size = std::uint64_t(st.st_size);
  out.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  out.regular = S_ISREG(st.st_mode);
  out.directory = S_ISDIR(st.st_mode);
  return out;
}

Status write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot write", path, errno);
    bytes.remove_prefix(size_t(n));
  }
  return Status::Ok();
}

Status fsync_and_close(Fd& fd, const std::string& path) {
  if (::fsync(fd.get()) != 0) return io_error("cannot fsync", path, errno);
  // NOTES: close can report a deferred write error (NFS), so its result counts.
  if (::close(fd.release()) != 0) return io_error("cannot close", path, errno);
  return Status::Ok();
}

}  // namespace

Result<FileBytes> read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return Error::make(ErrorCode::kCacheIo, "not a regular file: " + path);

  FileBytes out;
  out.identity = {st.st_dev, st.st_ino};
  out.bytes.resize(size_t(st.st_size));
  size_t done = 0;
  while (done < out.bytes.size()) {
    const ssize_t n = ::read(fd.get(), out.bytes.data() + done, out.bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read", path, errno);
    if (n == 0) break;  // shrank under us: the decoder sees a short file
    done += size_t(n);
  }
  out.bytes.resize(done);
  return out;
}

Result<FileStat> stat_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return io_error("cannot stat", path, errno);
  return to_file_stat(st);
}

Result<FileStat> stat_following_links(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error("cannot stat", path, errno);
  return to_file_stat(st);
}

Status write_new_file_durably(const std::string& path, std::string_view bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return io_error("cannot create", path, errno);
  Status st = write_all(fd.get(), bytes, path);
  if (st.ok()) st = fsync_and_close(fd, path);
  if (!st.ok()) ::unlink(path.c_str());
  return st;
}

Status fsync_directory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return io_error("cannot open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return io_error("cannot fsync directory", dir, errno);
  return Status::Ok();
}

Status rename_path(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return io_error("cannot rename " + from + " to", to, errno);
  return Status::Ok();
}

Status remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", path, errno);
  return Status::Ok();
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Error::make(ErrorCode::kCacheIo, "cannot remove " + path + ": " + ec.message());
  return Status::Ok();
}

Status make_directories(const std::string& dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir, /*IgnoreExisting=*/true)) {
    return Error::make(ErrorCode::kCacheIo, "cannot create directory " + dir + ": " + ec.message());
  }
  // NOTES: followed, not lstat: a cache directory that is a symlink (~/.cache/flashjit onto another
  // disk) is a directory.
  auto st = stat_following_links(dir);
  if (!st.ok()) return st.take_error();
  if (!st->directory) return io_error("cannot use directory", dir, ENOTDIR);
  return Status::Ok();
}

Result<std::vector<std::string>> list_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return io_error("cannot list", dir, errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool touch_now(const std::string& path) {
  // NOTES: times == nullptr means "now"; it needs write access (or ownership), which a hit from
  // a read-only cache does not have: then nothing changes and the hit still counts.
  return ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0;
}

std::string unique_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (std::uint64_t(::getpid()) << 32) ^ std::uint64_t(::gettid())};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%d-%d-%016llx", int(::getpid()), int(::gettid()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

bool probe_writable(const std::string& probe_path) {
  Fd fd(::open(probe_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return false;
  ::unlink(probe_path.c_str());
  return true;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace flashjit::posix
