# tests/curves.mk — curves.svg rendered to PNG (rsvg-convert) and read
# back with libpng: curves in every plot (one epoch too), the legend off
# the curves, round ticks, labelled axes. Built with train/curves.c itself
# to draw hand-written metrics files (a validation split).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_curves
TESTS += tests/test_curves
endif
tests_test_curves_SOURCES = tests/test_curves.c tests/testutil.h \
	train/curves.c train/train_internal.h
tests_test_curves_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/train $(PNG_CFLAGS)
tests_test_curves_LDADD = $(LDADD) $(PNG_LIBS)
tests_test_curves_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
