# tests/graph.mk — tests of torc_trace and its graphs (torc/graph.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph
TESTS += tests/test_graph
endif
tests_test_graph_SOURCES = tests/test_graph.c tests/testutil.h
tests_test_graph_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph_io
TESTS += tests/test_graph_io
endif
tests_test_graph_io_SOURCES = tests/test_graph_io.c tests/testutil.h
tests_test_graph_io_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
