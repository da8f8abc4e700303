# core/nn.mk — the neural-network ops (torc/nn.h).
libtorc_la_SOURCES += core/nn_internal.h \
	core/ops_nn.c core/derivatives_nn.c \
	core/attn_internal.h core/ops_attention.c core/derivatives_attn.c
