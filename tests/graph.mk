# tests/graph.mk — tests of torc_trace and its graphs (torc/graph.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph
TESTS += tests/test_graph
endif
tests_test_graph_SOURCES = tests/test_graph.c tests/testutil.h
tests_test_graph_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
