# tests/graph_plan.mk — tests of planned execution (torc/graph.h's plans).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph_plan
TESTS += tests/test_graph_plan
endif
tests_test_graph_plan_SOURCES = tests/test_graph_plan.c tests/testutil.h
tests_test_graph_plan_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
