# tests/onnx.mk — the ONNX reader and interpreter, and `torc onnx-test`.
TESTS += tests/test_onnx.sh
EXTRA_DIST += tests/test_onnx.sh
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onnx
TESTS += tests/test_onnx
endif
tests_test_onnx_SOURCES = tests/test_onnx.c tests/testutil.h
tests_test_onnx_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
