/* Stands in for libtinfo, which LLVM Support links for one question: does a terminal take colours
 * (llvm::sys::Process::FileDescriptorHasColors)? flashjit prints nothing in colour, and a NEEDED
 * libtinfo.so.6 is not allowed in a manylinux wheel (python/tests/wheel_manylinux_check.sh), so the answer
 * is always "no terminal description": LLVM then takes the terminal for one without colours, as it
 * does where no terminfo database is installed. Linked only where LLVM Support refers to these. */
#define FLASHJIT_HIDDEN __attribute__((visibility("hidden")))

struct term;

FLASHJIT_HIDDEN struct term* set_curterm(struct term* terminal) {
  (void)terminal;
  return 0; /* no terminal was current */
}

FLASHJIT_HIDDEN int setupterm(const char* name, int fd, int* errret) {
  (void)name;
  (void)fd;
  if (errret) *errret = -1; /* "the terminfo database could not be found" */
  return -1;                /* ERR */
}

FLASHJIT_HIDDEN int tigetnum(const char* capability) {
  (void)capability;
  return -1; /* absent */
}

FLASHJIT_HIDDEN int del_curterm(struct term* terminal) {
  (void)terminal;
  return -1; /* ERR: there is none */
}
