# core/fused.mk — the fused ops: cross-entropy and the optimizer steps
# (torc/ops_fused.def; torc_cross_entropy in nn.h, torc_sgd_step_ and
# torc_adam_step_ in optim.h).
libtorc_la_SOURCES += core/ops_fused.c
# The LSTM and GRU cells (torc_lstm_cell, torc_gru_cell in nn.h).
libtorc_la_SOURCES += core/ops_rnn_cell.c
# Their list forms (torc/foreach.h).
libtorc_la_SOURCES += core/foreach.c
torcinclude_HEADERS += include/torc/foreach.h
