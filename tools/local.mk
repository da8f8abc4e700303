# tools/local.mk — the `torc` command.
bin_PROGRAMS += tools/torc
tools_torc_SOURCES = tools/torc.c tools/commands.h tools/cli.c tools/cli.h \
	tools/plugins_cmd.c tools/test_backend_cmd.c tools/describe_cmd.c \
	tools/help_cmd.c tools/conformance.c tools/conformance.h \
	tools/conformance_ops.c tools/conformance_internal.h \
	tools/train_cmd.c tools/memory_cmd.c tools/onnx_test_cmd.c \
	tools/export_cmd.c tools/generate_cmd.c
tools_torc_LDADD = libtorc.la -lm
# bin/../lib, where the installed libtorc is (configure.ac).
tools_torc_LDFLAGS = $(TORC_ORIGIN_RPATH)
