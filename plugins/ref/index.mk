# plugins/ref/index.mk — reference kernels of the indexing ops.
plugins_ref_librefkernels_la_SOURCES += plugins/ref/ref_index.h \
	plugins/ref/kernels_index.c
