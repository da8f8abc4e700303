# tests/onnx_module.mk — an ONNX model imported as a module
# (torc_onnx_module_new) against PyTorch's fixture, and `[model] onnx =`
# in an INI file through torc describe, train and eval.
TESTS += tests/test_onnx_import.sh
EXTRA_DIST += tests/test_onnx_import.sh tests/fixtures/onnx/make_fixture.py \
	tests/fixtures/onnx/cnn.onnx tests/fixtures/onnx/cnn_io.safetensors \
	tests/fixtures/onnx/unsupported.onnx
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onnx_module
TESTS += tests/test_onnx_module
endif
tests_test_onnx_module_SOURCES = tests/test_onnx_module.c tests/testutil.h \
	tests/onnx_testutil.h
tests_test_onnx_module_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
