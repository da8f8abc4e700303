# tests/graph_plan.mk — tests of planned execution (torc/graph.h's plans).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_graph_plan
TESTS += tests/test_graph_plan
endif
tests_test_graph_plan_SOURCES = tests/test_graph_plan.c tests/testutil.h
tests_test_graph_plan_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
check_PROGRAMS += tests/test_predict
TESTS += tests/test_predict
tests_test_predict_SOURCES = tests/test_predict.c tests/testutil.h
tests_test_predict_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
