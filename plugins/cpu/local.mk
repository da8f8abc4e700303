# plugins/cpu/local.mk — the cpu plugin: matmul and conv2d kernels through
# OpenBLAS (cblas), registered for device "cpu" above ref. Built only when
# configure found OpenBLAS (pkg-config openblas).
if HAVE_OPENBLAS
plugin_LTLIBRARIES += plugins/cpu.la
plugins_cpu_la_SOURCES = plugins/cpu/cpu.c plugins/cpu/cpu_internal.h \
	plugins/cpu/gemm.c plugins/cpu/conv.c
plugins_cpu_la_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS)
plugins_cpu_la_LIBADD = $(OPENBLAS_LIBS) -lm
plugins_cpu_la_LDFLAGS = $(PLUGIN_LDFLAGS)
endif
