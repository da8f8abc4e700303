# tests/onnx_export.mk — torc_onnx_export and `torc export`. The shell
# test is not named test_onnx_export.sh: automake would give it the log of
# the program tests/test_onnx_export. The cmocka
# program rereads exported models with torc's ONNX interpreter; the shell
# test checks the example models with onnx.checker and onnxruntime
# (tests/onnx_export_check.py), torc's outputs from tests/onnx_export_ref.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onnx_export
TESTS += tests/test_onnx_export
endif
tests_test_onnx_export_SOURCES = tests/test_onnx_export.c tests/testutil.h
tests_test_onnx_export_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

check_PROGRAMS += tests/onnx_export_ref
tests_onnx_export_ref_SOURCES = tests/onnx_export_ref.c
tests_onnx_export_ref_LDADD = libtorc.la -lm
TESTS += tests/test_onnx_export_cli.sh
EXTRA_DIST += tests/test_onnx_export_cli.sh tests/onnx_export_check.py
