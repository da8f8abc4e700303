/* tests/plugins/missing_dep_lib.c — the library missing_dep.so links
 * against. Built as libtorc_missing_dep.so with the soname
 * libtorc_missing_dep.so.1, a file that exists nowhere at run time. */
int torc_missing_dep_answer(void);

int torc_missing_dep_answer(void) { return 42; }
