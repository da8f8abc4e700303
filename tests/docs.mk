# tests/docs.mk — what README.md and docs/install.md promise: installing to
# a prefix or a DESTDIR, and README's C program, built and run from its text.
TESTS += tests/test_install.sh tests/test_readme_c.sh
EXTRA_DIST += tests/test_install.sh tests/test_readme_c.sh
