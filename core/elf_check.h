/* core/elf_check.h — the check core/plugin.c runs on a plugin file before
 * dlopen: is it a whole shared object for this machine? Internal to libtorc
 * (and to the fuzz harness, which compiles elf_check.c on its own).
 */
#ifndef TORC_ELF_CHECK_H
#define TORC_ELF_CHECK_H

#include <stddef.h>

/* Checks the open file `fd` (read with pread only, so its offset is
 * unchanged): a regular file holding an ELF shared object (ET_DYN) of this
 * build's class, byte order and machine, whose program header table,
 * section header table and every PT_LOAD segment's bytes lie inside the
 * file. dlopen maps the segments and touches their pages, so a file cut
 * short would otherwise end the process with SIGBUS. Returns 0 if the file
 * passes; otherwise -1 with one sentence (no trailing period) in `why`,
 * e.g. "it is 4096 bytes long but its segment 2 ends at byte 18880: the
 * file is truncated". Safe on any bytes; sets no torc error. */
int torc__elf_check_fd(int fd, char *why, size_t why_size);

#endif /* TORC_ELF_CHECK_H */
