/* _dl_find_object (glibc 2.35) for the static unwinder of GCC 12 and newer (libgcc_eh, linked by
 * -static-libgcc), which asks it for the .eh_frame_hdr of the object holding a frame's address. Taken
 * from glibc, it would make the binaries need glibc 2.35 and keep the wheel off manylinux_2_34 (RHEL 9,
 * Amazon Linux 2023: glibc 2.34). This one walks the loaded objects with dl_iterate_phdr, as the
 * unwinder of GCC 11 and older did on every glibc. Hidden: it serves this binary's unwinder only.
 * Compiled only where <dlfcn.h> declares the function (glibc 2.35+ headers); older headers mean an
 * older libgcc_eh, which never asks for it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#ifdef DLFO_STRUCT_HAS_EH_DBASE

struct lookup {
  uintptr_t address;
  struct dl_find_object* result;
};

/* dl_iterate_phdr's callback: 1 (stop) for the object one of whose loaded segments holds the address. */
static int find_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct lookup* lookup = data;
  uintptr_t start = UINTPTR_MAX, end = 0;
  const void* eh_frame_hdr = 0;
  int holds = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* segment = &info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + segment->p_vaddr;
    if (segment->p_type == PT_LOAD) {
      const uintptr_t past = begin + segment->p_memsz;
      if (lookup->address >= begin && lookup->address < past) holds = 1;
      if (begin < start) start = begin;
      if (past > end) end = past;
    } else if (segment->p_type == PT_GNU_EH_FRAME) {
      eh_frame_hdr = (const void*)begin;
    }
  }
  if (!holds) return 0;
  memset(lookup->result, 0, sizeof(*lookup->result));
  lookup->result->dlfo_map_start = (void*)start;
  lookup->result->dlfo_map_end = (void*)end;
  lookup->result->dlfo_eh_frame = (void*)eh_frame_hdr;
  /* dlfo_link_map stays null: the unwinder reads only dlfo_eh_frame (x86-64 has no dlfo_eh_dbase). */
  return 1;
}

__attribute__((visibility("hidden"))) int _dl_find_object(void* address, struct dl_find_object* result) {
  struct lookup lookup = {(uintptr_t)address, result};
  return dl_iterate_phdr(find_object, &lookup) ? 0 : -1;
}

#endif
