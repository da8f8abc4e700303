# core/train.mk — the INI-driven trainer (torc/train.h): torc train and
# torc eval.
libtorc_la_SOURCES += core/train.c
torcinclude_HEADERS += include/torc/train.h
