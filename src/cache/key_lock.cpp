#include "cache/key_lock.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <string>
#include <utility>

#include "common/log.hpp"

namespace flashjit {
namespace {

enum class Try { kLocked, kBusy, kUnsupported };

Try try_lock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Try::kLocked;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? Try::kBusy : Try::kUnsupported;
  }
}

// True while path still names the file fd has open: the previous holder removes the file as it
// releases it, and a lock on a removed file excludes nobody.
bool still_named(int fd, const std::string& path) {
  struct stat opened {}, named {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

}  // namespace

KeyLock::KeyLock(KeyLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

KeyLock& KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

KeyLock::~KeyLock() { release(); }

void KeyLock::release() {
  if (fd_ < 0) return;
  // Removed while still locked, then closed (which drops the flock): a waiter on this file finds
  // it no longer named and starts again on a new one.
  ::unlink(path_.c_str());
  ::close(std::exchange(fd_, -1));
}

KeyLock KeyLock::acquire(const std::string& path, std::chrono::milliseconds timeout) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    // NOTES: errno is read before the logger is called: its first use opens files of its own.
    const int open_errno = errno;
    logger().debug("cache: no lock file {} ({}); compiling without it", path, std::strerror(open_errno));
    return {};
  }
  // Poll with a growing pause: flock has no timeout of its own, and a holder may hang.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    Try outcome = try_lock(fd);
    if (outcome == Try::kLocked) {
      if (still_named(fd, path)) return KeyLock(fd, path);
      // The holder removed it as it finished: take the file now at path instead.
      ::close(fd);
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return {};
      continue;
    }
    if (outcome == Try::kUnsupported || std::chrono::steady_clock::now() >= deadline) {
      logger().debug("cache: lock {} not taken ({}); compiling without it", path,
                     outcome == Try::kUnsupported ? "unsupported" : "timed out");
      ::close(fd);
      return {};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace flashjit
