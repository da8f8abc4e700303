# core/fused.mk — the fused ops: cross-entropy and the optimizer steps
# (torc/ops_fused.def; torc_cross_entropy in nn.h, torc_sgd_step_ and
# torc_adam_step_ in optim.h).
libtorc_la_SOURCES += core/ops_fused.c
# Their list forms (torc/foreach.h).
libtorc_la_SOURCES += core/foreach.c
torcinclude_HEADERS += include/torc/foreach.h
