# tools/local.mk — the `torc` command.
bin_PROGRAMS += tools/torc
tools_torc_SOURCES = tools/torc.c tools/conformance.c tools/conformance.h \
	tools/train_cmd.c tools/commands.h
tools_torc_LDADD = libtorc.la -lm
