# tests/onnx.mk — the ONNX reader and interpreter, and `torc onnx-test`.
TESTS += tests/test_onnx.sh
EXTRA_DIST += tests/test_onnx.sh
