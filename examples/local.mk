# examples/local.mk — examples shipped in the tarball. The plugin template
# is built by its own plain Makefile against an installed torc (never by
# this build); tests/test_template.sh builds it from a copy.
EXTRA_DIST += \
	examples/plugin-template/README.md \
	examples/plugin-template/Makefile \
	examples/plugin-template/template.c
