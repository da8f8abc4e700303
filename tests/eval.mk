# tests/eval.mk — torc eval: the classification report on hand-made
# confusion matrices (torc_eval_report), and the command end to end (the
# newest checkpoint by default, predictions, class names).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_eval_report
TESTS += tests/test_eval_report
endif
tests_test_eval_report_SOURCES = tests/test_eval_report.c tests/testutil.h
tests_test_eval_report_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
TESTS += tests/test_eval.sh
EXTRA_DIST += tests/test_eval.sh
TESTS += tests/test_eval_plan.sh
EXTRA_DIST += tests/test_eval_plan.sh
