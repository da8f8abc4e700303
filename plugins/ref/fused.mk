# plugins/ref/fused.mk — the reference kernels of the fused ops
# (cross-entropy, optimizer steps).
plugins_ref_librefkernels_la_SOURCES += \
	plugins/ref/ref_fused.h \
	plugins/ref/kernels_fused.c
