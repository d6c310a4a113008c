/* arc4random (glibc 2.36) for the static libstdc++ of GCC 12 and newer, whose std::random_device may
 * draw from it: its random.o comes into every binary that links the C++ runtime statically (through
 * the old-ABI string and std::logic_error), whether or not a random_device is made. Taken from glibc,
 * it would make the binaries need glibc 2.36 and keep the wheel off manylinux_2_34. This one reads
 * the kernel's generator as glibc's does (getrandom, Linux 3.17), else /dev/urandom, and, like
 * glibc's, ends the process rather than return something not random. Hidden: it serves this binary's
 * libstdc++ only. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

static int fill_from_urandom(void* buffer, size_t size) {
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < size) {
    const ssize_t got = read(fd, (char*)buffer + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += (size_t)got;
  }
  close(fd);
  return done == size ? 0 : -1;
}

__attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value;
  for (;;) {
    const ssize_t got = getrandom(&value, sizeof(value), 0);
    if (got == (ssize_t)sizeof(value)) return value;
    if (got < 0 && errno == EINTR) continue;
    break; /* ENOSYS (a kernel older than 3.17) or a seccomp filter */
  }
  if (fill_from_urandom(&value, sizeof(value)) == 0) return value;
  abort();
}
