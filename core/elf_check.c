/* core/elf_check.c — checks a plugin file before dlopen maps it: an ELF
 * shared object for this build whose headers and loaded segments all lie
 * inside the file. Reads with pread only and depends on nothing else in
 * libtorc, so a fuzz harness can compile it alone.
 */
#define _XOPEN_SOURCE 700 /* pread */
#include "elf_check.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "torc/checked.h"

/* The ELF flavour of this build: class and the header types to read. */
#if UINTPTR_MAX > 0xffffffffu
#define ELF_CLASS ELFCLASS64
#define ELF_BITS 64
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Shdr shdr_t;
#else
#define ELF_CLASS ELFCLASS32
#define ELF_BITS 32
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Shdr shdr_t;
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ELF_DATA ELFDATA2MSB
#else
#define ELF_DATA ELFDATA2LSB
#endif

/* The e_machine of this build; 0 where unknown (then not checked). */
#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
#define ELF_MACHINE_NAME "x86-64"
#elif defined(__i386__)
#define ELF_MACHINE EM_386
#define ELF_MACHINE_NAME "x86"
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
#define ELF_MACHINE_NAME "AArch64"
#elif defined(__arm__)
#define ELF_MACHINE EM_ARM
#define ELF_MACHINE_NAME "ARM"
#elif defined(__powerpc64__)
#define ELF_MACHINE EM_PPC64
#define ELF_MACHINE_NAME "POWER (ppc64)"
#elif defined(__riscv)
#define ELF_MACHINE EM_RISCV
#define ELF_MACHINE_NAME "RISC-V"
#elif defined(__s390x__)
#define ELF_MACHINE EM_S390
#define ELF_MACHINE_NAME "s390x"
#else
#define ELF_MACHINE 0
#define ELF_MACHINE_NAME "this machine"
#endif

/* Program headers read per pread. */
#define PH_CHUNK 32

static int fail(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t why_size, const char *fmt, ...) {
  if (why != NULL && why_size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Reads exactly n bytes at off; 0 on success, -1 (errno set, or 0 at a
 * short file) otherwise. */
static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  unsigned char *p = buf;
  while (n > 0) {
    if (off > (uint64_t)INT64_MAX) {
      errno = 0;
      return -1;
    }
    ssize_t got = pread(fd, p, n, (off_t)off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return -1;
    }
    p += got;
    n -= (size_t)got;
    off += (uint64_t)got;
  }
  return 0;
}

static const char *kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

static const char *type_name(unsigned type) {
  switch (type) {
  case ET_NONE: return "an ELF file of no type";
  case ET_REL: return "a relocatable object (.o)";
  case ET_EXEC: return "an executable";
  case ET_CORE: return "a core dump";
  default: return "an ELF file of an unknown type";
  }
}

/* A few machines' names, for the message about a foreign one. */
static const char *machine_name(unsigned m) {
  switch (m) {
  case EM_386: return " (x86)";
  case EM_X86_64: return " (x86-64)";
  case EM_ARM: return " (ARM)";
  case EM_AARCH64: return " (AArch64)";
  case EM_PPC64: return " (POWER)";
  case EM_S390: return " (s390)";
#ifdef EM_RISCV
  case EM_RISCV: return " (RISC-V)";
#endif
  default: return "";
  }
}

static int io_fail(char *why, size_t why_size, const char *what) {
  if (errno != 0)
    return fail(why, why_size, "reading its %s failed: %s", what,
                strerror(errno));
  return fail(why, why_size, "it ended while reading its %s: the file is "
                             "truncated", what);
}

int torc__elf_check_fd(int fd, char *why, size_t why_size) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return fail(why, why_size, "cannot stat it: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(why, why_size, "it is %s, not a file", kind_of(st.st_mode));
  if (st.st_size < 0)
    return fail(why, why_size, "its size (%lld) is negative",
                (long long)st.st_size);
  uint64_t size = (uint64_t)st.st_size;

  ehdr_t eh;
  if (size < sizeof eh)
    return fail(why, why_size,
                "it is %llu bytes long, shorter than an ELF header (%zu "
                "bytes)",
                (unsigned long long)size, sizeof eh);
  if (read_at(fd, &eh, sizeof eh, 0) != 0)
    return io_fail(why, why_size, "ELF header");
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return fail(why, why_size,
                "it does not start with the ELF magic bytes (0x7f 'E' 'L' "
                "'F')");
  if (eh.e_ident[EI_CLASS] != ELF_CLASS)
    return fail(why, why_size, "it is a %s ELF file but this torc is %d-bit",
                eh.e_ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                : eh.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                     : "invalid-class",
                ELF_BITS);
  if (eh.e_ident[EI_DATA] != ELF_DATA)
    return fail(why, why_size, "it is a %s ELF file but this machine is %s",
                eh.e_ident[EI_DATA] == ELFDATA2LSB   ? "little-endian"
                : eh.e_ident[EI_DATA] == ELFDATA2MSB ? "big-endian"
                                                     : "invalid byte order",
                ELF_DATA == ELFDATA2LSB ? "little-endian" : "big-endian");
  if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT)
    return fail(why, why_size, "its ELF version (%u) is not %u",
                (unsigned)eh.e_version, (unsigned)EV_CURRENT);
  if (eh.e_type != ET_DYN)
    return fail(why, why_size, "it is %s (ELF type %u), not a shared object",
                type_name(eh.e_type), (unsigned)eh.e_type);
  if (ELF_MACHINE != 0 && eh.e_machine != ELF_MACHINE)
    return fail(why, why_size,
                "it is built for ELF machine %u%s but this torc runs on %s "
                "(machine %u)",
                (unsigned)eh.e_machine, machine_name(eh.e_machine),
                ELF_MACHINE_NAME, (unsigned)ELF_MACHINE);
  if (eh.e_ehsize < sizeof eh)
    return fail(why, why_size, "its ELF header size (%u) is below %zu",
                (unsigned)eh.e_ehsize, sizeof eh);

  /* Program headers: the table inside the file, each PT_LOAD's bytes too. */
  if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM)
    return fail(why, why_size, "it has %s program headers",
                eh.e_phnum == 0 ? "no" : "an extended count of");
  if (eh.e_phentsize != sizeof(phdr_t))
    return fail(why, why_size, "its program headers are %u bytes each, not "
                               "%zu",
                (unsigned)eh.e_phentsize, sizeof(phdr_t));
  uint64_t ph_bytes, ph_end;
  if (torc_checked_mul(eh.e_phnum, sizeof(phdr_t), &ph_bytes) ||
      torc_checked_add(eh.e_phoff, ph_bytes, &ph_end) || ph_end > size)
    return fail(why, why_size,
                "it is %llu bytes long but its %u program headers at offset "
                "%llu reach past its end: the file is truncated or corrupt",
                (unsigned long long)size, (unsigned)eh.e_phnum,
                (unsigned long long)eh.e_phoff);
  int loads = 0;
  phdr_t ph[PH_CHUNK];
  for (unsigned i = 0; i < eh.e_phnum; i += PH_CHUNK) {
    unsigned n = eh.e_phnum - i < PH_CHUNK ? eh.e_phnum - i : PH_CHUNK;
    /* i * sizeof(phdr_t) <= ph_bytes, which fitted above. */
    if (read_at(fd, ph, n * sizeof(phdr_t),
                (uint64_t)eh.e_phoff + (uint64_t)i * sizeof(phdr_t)) != 0)
      return io_fail(why, why_size, "program headers");
    for (unsigned j = 0; j < n; j++) {
      if (ph[j].p_type != PT_LOAD)
        continue;
      loads++;
      uint64_t end;
      if (torc_checked_add(ph[j].p_offset, ph[j].p_filesz, &end))
        return fail(why, why_size,
                    "its segment %u's offset (%llu) plus size (%llu) "
                    "overflows: the file is corrupt",
                    i + j, (unsigned long long)ph[j].p_offset,
                    (unsigned long long)ph[j].p_filesz);
      if (end > size)
        return fail(why, why_size,
                    "it is %llu bytes long but its segment %u ends at byte "
                    "%llu: the file is truncated",
                    (unsigned long long)size, i + j,
                    (unsigned long long)end);
    }
  }
  if (loads == 0)
    return fail(why, why_size, "it has no loadable segment (PT_LOAD)");

  /* Section headers: not needed to load, but a table past the end is as
   * sure a sign of a cut file. With e_shnum == 0 and e_shoff set, the
   * count is in the first entry (extended numbering): that entry must
   * fit. */
  if (eh.e_shoff != 0) {
    if (eh.e_shentsize != sizeof(shdr_t))
      return fail(why, why_size, "its section headers are %u bytes each, "
                                 "not %zu",
                  (unsigned)eh.e_shentsize, sizeof(shdr_t));
    uint64_t sh_bytes, sh_end;
    uint64_t count = eh.e_shnum != 0 ? eh.e_shnum : 1;
    if (torc_checked_mul(count, sizeof(shdr_t), &sh_bytes) ||
        torc_checked_add(eh.e_shoff, sh_bytes, &sh_end) || sh_end > size)
      return fail(why, why_size,
                  "it is %llu bytes long but its section headers at offset "
                  "%llu reach past its end: the file is truncated or "
                  "corrupt",
                  (unsigned long long)size, (unsigned long long)eh.e_shoff);
  }
  return 0;
}
