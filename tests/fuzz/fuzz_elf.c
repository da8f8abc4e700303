/* tests/fuzz/fuzz_elf.c — libFuzzer harness of the plugin loader's ELF
 * check (core/elf_check.c), which decides from a file's bytes whether it
 * is a shared object this machine can load before anything dlopen-s it:
 * the input goes into a memfd and the check reads it from there. Fuzzed
 * bytes are never dlopen-ed.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) {
    perror("fuzz: memfd_create");
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
    perror("fuzz: memfd write");
    abort();
  }
  char why[256];
  memset(why, 'x', sizeof why);
  int rc = torc__elf_check_fd(fd, why, sizeof why);
  /* A refusal must come with a reason, a NUL-terminated one. */
  if (rc != 0 && memchr(why, '\0', sizeof why) == NULL) {
    fprintf(stderr, "fuzz: the ELF check refused without a terminated "
                    "reason\n");
    abort();
  }
  return 0;
}
