# tests/fast.mk — the plugins a file gets by default (the standard set,
# the slow-kernel warning, providers in the profile, the start-up header).
TESTS += tests/test_fast_default.sh
EXTRA_DIST += tests/test_fast_default.sh
