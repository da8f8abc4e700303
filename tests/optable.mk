# tests/optable.mk — the op table (torc/ops.def) and what derives from it.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_optable
TESTS += tests/test_optable
endif
tests_test_optable_SOURCES = tests/test_optable.c tests/testutil.h
tests_test_optable_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# The reference list of the ops, generated from the table (never
# committed, so it cannot drift): op-table.md in the build tree.
op-table: tests/test_optable$(EXEEXT)
	$(AM_TESTS_ENVIRONMENT) \
	TORC_OPTABLE_WRITE='$(abs_top_builddir)/op-table.md' \
	  ./tests/test_optable$(EXEEXT) >/dev/null
	@echo "wrote $(abs_top_builddir)/op-table.md"
.PHONY: op-table
CLEANFILES += op-table.md
