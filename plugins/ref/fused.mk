# plugins/ref/fused.mk — the reference kernels of the fused ops
# (cross-entropy, optimizer steps), the list ops (torc/foreach.h) and the
# fused inference kernels (linear_act, conv2d_act) and the LSTM and GRU
# cells.
plugins_ref_librefkernels_la_SOURCES += \
	plugins/ref/ref_fused.h \
	plugins/ref/kernels_fused.c \
	plugins/ref/kernels_foreach.c \
	plugins/ref/kernels_infer.c \
	plugins/ref/kernels_rnn_cell.c
