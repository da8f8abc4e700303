# core/index.mk — the indexing and shape-building ops (torc/indexing.h).
libtorc_la_SOURCES += core/index_internal.h \
	core/ops_index.c core/derivatives_index.c
