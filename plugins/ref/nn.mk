# plugins/ref/nn.mk — the reference kernels of the neural-network ops.
plugins_ref_librefkernels_la_SOURCES += \
	plugins/ref/kernels_nn_conv.c plugins/ref/kernels_nn_pool.c \
	plugins/ref/kernels_nn_norm.c plugins/ref/kernels_nn_misc.c \
	plugins/ref/kernels_attention.c
