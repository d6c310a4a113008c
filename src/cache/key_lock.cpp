#include "cache/key_lock.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
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

}  // namespace

KeyLock::KeyLock(KeyLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

KeyLock& KeyLock::operator=(KeyLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

KeyLock::~KeyLock() { release(); }

void KeyLock::release() {
  // Closing the descriptor drops the flock.
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

KeyLock KeyLock::acquire(const std::string& path, std::chrono::milliseconds timeout) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    logger().debug("cache: no lock file {} (errno {}); compiling without it", path, errno);
    return {};
  }
  // Poll with a growing pause: flock has no timeout of its own, and a holder may hang.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    const Try outcome = try_lock(fd);
    if (outcome == Try::kLocked) return KeyLock(fd);
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
