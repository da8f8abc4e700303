# tools/local.mk — the `torc` command.
bin_PROGRAMS += tools/torc
tools_torc_SOURCES = tools/torc.c tools/conformance.c tools/conformance.h \
	tools/conformance_ops.c tools/conformance_internal.h \
	tools/train_cmd.c tools/commands.h
tools_torc_LDADD = libtorc.la -lm
