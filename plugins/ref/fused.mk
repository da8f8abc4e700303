# plugins/ref/fused.mk — the reference kernels of the fused ops
# (cross-entropy, optimizer steps) and the list ops (torc/foreach.h).
plugins_ref_librefkernels_la_SOURCES += \
	plugins/ref/ref_fused.h \
	plugins/ref/kernels_fused.c \
	plugins/ref/kernels_foreach.c
