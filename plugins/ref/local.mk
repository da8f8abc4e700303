# plugins/ref/local.mk — the reference backend. Its kernels are a
# convenience library so the sim plugin can run the very same code.
noinst_LTLIBRARIES += plugins/ref/librefkernels.la
plugins_ref_librefkernels_la_SOURCES = \
	plugins/ref/ref_kernels.h plugins/ref/ref_util.h \
	plugins/ref/kernels_copy.c plugins/ref/kernels_unary.c \
	plugins/ref/kernels_binary.c plugins/ref/kernels_reduce.c \
	plugins/ref/kernels_matmul.c plugins/ref/kernels_random.c \
	plugins/ref/kernels_dim.c \
	plugins/ref/kernels_table.c plugins/ref/ref_nn.h
plugins_ref_librefkernels_la_LIBADD = -lm

plugin_LTLIBRARIES += plugins/ref.la
plugins_ref_la_SOURCES = plugins/ref/ref.c
plugins_ref_la_LIBADD = plugins/ref/librefkernels.la -lm
plugins_ref_la_LDFLAGS = $(PLUGIN_LDFLAGS)
include plugins/ref/nn.mk
include plugins/ref/index.mk
include plugins/ref/fused.mk
