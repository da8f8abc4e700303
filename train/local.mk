# train/local.mk — the trainer (torc/train.h): torc train, torc eval and
# torc bench from an INI file. A layer above the core, built from the
# public headers only (its own flags: the core's folder is not on its
# include path) and linked into libtorc.
noinst_LTLIBRARIES += train/libtorc-train.la
train_libtorc_train_la_SOURCES = train/train_internal.h train/loop.c \
	train/eval.c train/report.c train/checkpoint.c train/curves.c \
	train/header.c train/settings.c train/accum.c train/generate.c
train_libtorc_train_la_CPPFLAGS = $(AM_CPPFLAGS)
libtorc_la_LIBADD += train/libtorc-train.la
torcinclude_HEADERS += include/torc/train.h
