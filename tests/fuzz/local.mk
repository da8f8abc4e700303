# tests/fuzz/local.mk — libFuzzer harnesses of every reader a user feeds
# (safetensors and checkpoints, INI files and the model builder, idx, csv,
# npy, text, PNG/JPEG, ONNX models and tensors, ELF plugin files). Built only by ./configure
# --enable-fuzzers (CC=clang); `make fuzz FUZZ_TIME=60` runs each on a copy
# of its seed corpus (tests/fuzz/corpus/NAME) and fails on any finding.
# Not part of `make check`. docs/fuzzing.md tells how to use them.
FUZZ_SRC_HARNESSES = safetensors ini idx csv npy image onnx text
if HAVE_ELF_CHECK
FUZZ_SRC_HARNESSES += elf
endif
FUZZ_HARNESS_PROGS = tests/fuzz/fuzz_safetensors tests/fuzz/fuzz_ini \
	tests/fuzz/fuzz_idx tests/fuzz/fuzz_csv tests/fuzz/fuzz_npy \
	tests/fuzz/fuzz_image tests/fuzz/fuzz_onnx tests/fuzz/fuzz_text
if HAVE_ELF_CHECK
FUZZ_HARNESS_PROGS += tests/fuzz/fuzz_elf
endif
if FUZZERS
noinst_PROGRAMS += $(FUZZ_HARNESS_PROGS)
FUZZ_DEPS = $(FUZZ_HARNESS_PROGS) $(plugin_LTLIBRARIES)
endif
FUZZ_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTORC_FUZZ_PLUGIN_DIR='"$(abs_top_builddir)/plugins/.libs"'
FUZZ_LINK_FLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS) -no-install
FUZZ_LIBS = libtorc.la -lm

tests_fuzz_fuzz_safetensors_SOURCES = tests/fuzz/fuzz_safetensors.c \
	tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_safetensors_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_safetensors_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_safetensors_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_ini_SOURCES = tests/fuzz/fuzz_ini.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_ini_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_ini_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_ini_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_idx_SOURCES = tests/fuzz/fuzz_idx.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_idx_CPPFLAGS = $(FUZZ_CPPFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_idx_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_idx_LDADD = $(FUZZ_LIBS) $(ZLIB_LIBS)
tests_fuzz_fuzz_csv_SOURCES = tests/fuzz/fuzz_csv.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_csv_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_csv_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_csv_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_text_SOURCES = tests/fuzz/fuzz_text.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_text_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_text_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_text_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_npy_SOURCES = tests/fuzz/fuzz_npy.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_npy_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_npy_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_npy_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_image_SOURCES = tests/fuzz/fuzz_image.c \
	tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_image_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_image_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_image_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_onnx_SOURCES = tests/fuzz/fuzz_onnx.c tests/fuzz/fuzz_common.h
tests_fuzz_fuzz_onnx_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_onnx_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_onnx_LDADD = $(FUZZ_LIBS)
# The ELF check is compiled into its harness (its symbol is internal to
# libtorc); it reads the file descriptor it is given and nothing else.
tests_fuzz_fuzz_elf_SOURCES = tests/fuzz/fuzz_elf.c core/elf_check.c
tests_fuzz_fuzz_elf_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(top_srcdir)/core
tests_fuzz_fuzz_elf_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_elf_LDADD = -lm

# make fuzz [FUZZ_TIME=seconds per harness] [FUZZ_TARGETS="ini npy"]:
# runs each harness on a fresh copy of its corpus in tests/fuzz/work/
# (new inputs never go into the source tree), with bounded memory; prints
# one line per harness (the finding and its crash file when there is one)
# and "fuzz: N passed, M failed", failing when any harness found anything.
FUZZ_TIME = 60
FUZZ_TARGETS = $(FUZZ_SRC_HARNESSES)
FUZZ_RSS_MB = 2048
FUZZ_MALLOC_MB = 512
FUZZ_INPUT_TIMEOUT = 10
fuzz: $(FUZZ_DEPS)
if FUZZERS
	@FUZZ_TIME='$(FUZZ_TIME)' FUZZ_RSS_MB='$(FUZZ_RSS_MB)' \
	FUZZ_MALLOC_MB='$(FUZZ_MALLOC_MB)' \
	FUZZ_INPUT_TIMEOUT='$(FUZZ_INPUT_TIMEOUT)' \
	TORC_PLUGIN_PATH='$(abs_top_builddir)/plugins/.libs' \
	$(SHELL) $(top_srcdir)/tests/fuzz/run.sh '$(abs_top_srcdir)' \
	'$(abs_top_builddir)' $(FUZZ_TARGETS)
else
	@echo "make fuzz: this build has no fuzzers: configure with CC=clang --enable-fuzzers (docs/fuzzing.md)" >&2; exit 1
endif
.PHONY: fuzz
clean-local: clean-local-fuzz
clean-local-fuzz:
	rm -rf tests/fuzz/work
.PHONY: clean-local-fuzz
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/ini.dict \
	tests/fuzz/npy.dict tests/fuzz/idx.dict \
	tests/fuzz/safetensors.dict tests/fuzz/fuzz_elf.c \
	tests/fuzz/onnx_seeds.py
# The seeds' generator (run by hand, never by make): any build can make it.
EXTRA_PROGRAMS += tests/fuzz/gen_corpus
tests_fuzz_gen_corpus_SOURCES = tests/fuzz/gen_corpus.c
tests_fuzz_gen_corpus_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS) $(PNG_CFLAGS) \
	$(JPEG_CFLAGS)
tests_fuzz_gen_corpus_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_fuzz_gen_corpus_LDADD = libtorc.la $(ZLIB_LIBS) $(PNG_LIBS) \
	$(JPEG_LIBS) -lm
CLEANFILES += tests/fuzz/gen_corpus
