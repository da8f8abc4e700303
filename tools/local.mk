# tools/local.mk — the `torc` command.
bin_PROGRAMS += tools/torc
tools_torc_SOURCES = tools/torc.c
tools_torc_LDADD = libtorc.la
