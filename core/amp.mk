# core/amp.mk — mixed precision: autocast and the gradient scaler
# (torc/amp.h).
libtorc_la_SOURCES += core/amp.c core/grad_scaler.c
torcinclude_HEADERS += include/torc/amp.h
