# plugins/cpu/local.mk — the cpu plugin: matmul and conv2d through OpenBLAS
# (cblas) or oneDNN's sgemm, and elementwise ops, reductions and softmax
# with run-time ISA dispatch, registered for device "cpu" above ref. Built
# only when configure found OpenBLAS (pkg-config openblas).
#
# Each ISA build of ew_kern.h is its own convenience library with its own
# flags (x86 hosts only: elsewhere those files build empty tables).
if HAVE_OPENBLAS
plugin_LTLIBRARIES += plugins/cpu.la
noinst_LTLIBRARIES += plugins/cpu/libew_scalar.la plugins/cpu/libew_avx2.la \
	plugins/cpu/libew_avx512.la
CPU_X86 = $(filter x86_64 amd64 i386 i486 i586 i686,$(host_cpu))
CPU_ISA_CFLAGS = $(AM_CFLAGS) -O3 $(VEC_CFLAGS) \
	-fno-math-errno -fno-trapping-math
plugins_cpu_libew_scalar_la_SOURCES = plugins/cpu/ew_scalar.c \
	plugins/cpu/ew_kern.h plugins/cpu/nn_kern.h plugins/cpu/bn_kern.h \
	plugins/cpu/mp_kern.h
plugins_cpu_libew_scalar_la_CFLAGS = $(CPU_ISA_CFLAGS)
plugins_cpu_libew_avx2_la_SOURCES = plugins/cpu/ew_avx2.c
plugins_cpu_libew_avx2_la_CFLAGS = $(CPU_ISA_CFLAGS) \
	$(if $(CPU_X86),-mavx2 -mfma)
plugins_cpu_libew_avx512_la_SOURCES = plugins/cpu/ew_avx512.c
plugins_cpu_libew_avx512_la_CFLAGS = $(CPU_ISA_CFLAGS) \
	$(if $(CPU_X86),-mavx2 -mfma -mavx512f -mavx512dq -mavx512bw \
	-mavx512vl -mprefer-vector-width=512)
plugins_cpu_la_SOURCES = plugins/cpu/cpu.c plugins/cpu/cpu_internal.h \
	plugins/cpu/gemm.c plugins/cpu/conv.c \
	plugins/cpu/ew.c plugins/cpu/ew_walk.h plugins/cpu/ew_reduce.c \
	plugins/cpu/fused.c plugins/cpu/pool.c plugins/cpu/attention.c \
	plugins/cpu/rnn_cell.c \
	plugins/cpu/cpuid.c plugins/cpu/nn.c plugins/cpu/bnorm.c \
	plugins/cpu/maxpool.c
plugins_cpu_la_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS) $(VEC_CFLAGS)
plugins_cpu_la_LIBADD = plugins/cpu/libew_scalar.la \
	plugins/cpu/libew_avx2.la plugins/cpu/libew_avx512.la \
	$(OPENBLAS_LIBS) -lm
plugins_cpu_la_LDFLAGS = $(PLUGIN_LDFLAGS)
# oneDNN's sgemm as the second f32 GEMM provider (gemm.c sets libgomp's
# per-thread count around each call, hence -fopenmp at link time).
if HAVE_DNNL
plugins_cpu_la_CFLAGS += -DTORC_CPU_HAVE_DNNL
plugins_cpu_la_LIBADD += $(DNNL_LIBS)
plugins_cpu_la_LDFLAGS += -fopenmp
endif
endif
