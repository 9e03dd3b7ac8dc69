// What the toolchain's own code needs of a glibc newer than a portable build's floor
// (DDPRUN_GLIBC_ROOT, cmake/portable.cmake): the programs are compiled with Debian 12's
// headers and libraries and linked against an older glibc, where these are missing. Linked
// into the shipped programs only; on a newer glibc they are still the ones the program uses.
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <sys/random.h>

extern "C" {

// glibc 2.32. libstdc++ (its headers and its archive) skips atomic reference counts while it
// is nonzero; zero says "maybe threaded", which is always right, only slower.
char __libc_single_threaded = 0;

// glibc 2.36. libstdc++'s std::random_device: 32 bits from getrandom(2) (glibc 2.25).
uint32_t arc4random() {
  uint32_t value = 0;
  while (::getrandom(&value, sizeof(value), 0) != sizeof(value) && errno == EINTR) {
  }
  return value;
}

// glibc 2.35. libgcc's unwinder finds a frame's unwind table with it: the object whose
// loaded segments hold `pc`, and its PT_GNU_EH_FRAME. Found here with dl_iterate_phdr, as the
// unwinder did before 2.35.
int _dl_find_object(void* pc, dl_find_object* result) {
  struct Search {
    uintptr_t pc;
    dl_find_object* result;
  } search{reinterpret_cast<uintptr_t>(pc), result};
  auto visit = [](dl_phdr_info* info, size_t, void* data) -> int {
    Search* s = static_cast<Search*>(data);
    uintptr_t start = UINTPTR_MAX;
    uintptr_t end = 0;
    bool holds_pc = false;
    void* eh_frame = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& segment = info->dlpi_phdr[i];
      const uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
      if (segment.p_type == PT_GNU_EH_FRAME) eh_frame = reinterpret_cast<void*>(begin);
      if (segment.p_type != PT_LOAD) continue;
      if (begin < start) start = begin;
      if (begin + segment.p_memsz > end) end = begin + segment.p_memsz;
      if (s->pc >= begin && s->pc < begin + segment.p_memsz) holds_pc = true;
    }
    if (!holds_pc) return 0;
    *s->result = dl_find_object{};
    s->result->dlfo_map_start = reinterpret_cast<void*>(start);
    s->result->dlfo_map_end = reinterpret_cast<void*>(end);
    s->result->dlfo_eh_frame = eh_frame;
    return 1;
  };
  return ::dl_iterate_phdr(visit, &search) == 1 ? 0 : -1;
}

// glibc 2.29 gave pow, log and log2 new versions (the same functions without the old SVID
// error wrapper); gRPC, Abseil and Protobuf call them. Bound to the first version, which
// every glibc has, they keep the floor at 2.28 (PyTorch's own: manylinux_2_28). The calls reach
// these through the linker's --wrap (cmake/portable.cmake): a definition named pow here would be
// the program's own pow, which the first version's reference would bind to as well.
#if defined(__x86_64__)
#define DDPRUN_GLIBC_FIRST "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define DDPRUN_GLIBC_FIRST "GLIBC_2.17"
#else
#error "portable builds know the first glibc symbol version of x86_64 and aarch64 only"
#endif
double ddprun_first_pow(double, double);
double ddprun_first_log2(double);
double ddprun_first_log(double);
__asm__(".symver ddprun_first_pow, pow@" DDPRUN_GLIBC_FIRST);
__asm__(".symver ddprun_first_log2, log2@" DDPRUN_GLIBC_FIRST);
__asm__(".symver ddprun_first_log, log@" DDPRUN_GLIBC_FIRST);
double __wrap_pow(double x, double y) { return ddprun_first_pow(x, y); }
double __wrap_log2(double x) { return ddprun_first_log2(x); }
double __wrap_log(double x) { return ddprun_first_log(x); }

}  // extern "C"
