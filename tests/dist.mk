# tests/dist.mk — training in several processes: test_dist.sh runs torc
# train under mpirun (2 ranks against 1 process, a killed rank, a rank
# that hangs, resuming on another world size) and dist_check, the C side
# (DDP's buckets during backward, the collectives and their errors).
check_PROGRAMS += tests/dist_check
tests_dist_check_SOURCES = tests/dist_check.c
tests_dist_check_LDADD = libtorc.la -lm
tests_dist_check_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
TESTS += tests/test_dist.sh
EXTRA_DIST += tests/test_dist.sh
