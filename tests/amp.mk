# tests/amp.mk — mixed precision: autocast's op policy and casts, the
# gradient scaler (torc/amp.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_autocast tests/test_grad_scaler
TESTS += tests/test_autocast tests/test_grad_scaler
endif
tests_test_autocast_SOURCES = tests/test_autocast.c tests/testutil.h
tests_test_autocast_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_grad_scaler_SOURCES = tests/test_grad_scaler.c tests/testutil.h \
	tests/sim_testutil.h
tests_test_grad_scaler_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
TESTS += tests/test_amp_train.sh
EXTRA_DIST += tests/test_amp_train.sh
# bf16 on the CPU's fast plugins: no kernel of a CNN step falls to ref.
TESTS += tests/test_amp_cpu.sh
EXTRA_DIST += tests/test_amp_cpu.sh
