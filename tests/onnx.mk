# tests/onnx.mk — the ONNX reader and interpreter, and `torc onnx-test`.
# The shell test's name differs from the program tests/test_onnx: automake names both logs after the name without .sh.
TESTS += tests/test_onnx_cases.sh
EXTRA_DIST += tests/test_onnx_cases.sh
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onnx
TESTS += tests/test_onnx
endif
tests_test_onnx_SOURCES = tests/test_onnx.c tests/testutil.h \
	tests/onnx_testutil.h
tests_test_onnx_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
