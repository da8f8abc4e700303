# examples/local.mk — examples shipped in the tarball. The plugin template
# is built by its own plain Makefile against an installed torc (never by
# this build); tests/test_template.sh builds it from a copy.
EXTRA_DIST += \
	examples/plugin-template/README.md \
	examples/plugin-template/Makefile \
	examples/plugin-template/template.c

# A residual CNN from the module API, built and run by `make check`.
check_PROGRAMS += examples/residual/residual
TESTS += examples/residual/residual
examples_residual_residual_SOURCES = examples/residual/residual.c
examples_residual_residual_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
CLEANFILES += residual.ckpt.safetensors
