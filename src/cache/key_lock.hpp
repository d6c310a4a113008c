// A best-effort, bounded, advisory lock on one file (flock), so that processes sharing a cache
// directory usually compile a key once instead of once each.
// Invariants: correctness never depends on it (publishing is atomic without it); acquiring never
// fails a call (no lock file, no permission, NFS without flock: simply not held); it never waits
// longer than the timeout; the lock file is never taken for an entry. The holder removes the lock
// file when it releases it, so lock files exist only while a compile runs (they used to stay beside
// every entry); a waiter that locked a removed file sees it and takes the new one.
#pragma once
#include <chrono>
#include <string>

namespace flashjit {

class KeyLock {
 public:
  KeyLock() = default;  // not held
  KeyLock(KeyLock&& other) noexcept;
  KeyLock& operator=(KeyLock&& other) noexcept;
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;
  ~KeyLock();  // releases

  // Creates path when missing, then tries to lock it until the timeout passes.
  static KeyLock acquire(const std::string& path, std::chrono::milliseconds timeout);

  bool held() const { return fd_ >= 0; }

 private:
  KeyLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void release();
  int fd_ = -1;
  std::string path_;
};

}  // namespace flashjit
