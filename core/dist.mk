# core/dist.mk — training in several processes: communicators registered
# by plugins, collectives on tensors, DDP's gradient buckets.
libtorc_la_SOURCES += core/dist.c
torcinclude_HEADERS += include/torc/dist.h
