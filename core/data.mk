# core/data.mk — datasets, transforms and the DataLoader (torc/data.h).
libtorc_la_SOURCES += core/data_internal.h core/data.c core/transform.c \
	core/loader.c core/pin_pool.c core/data_config.c
libtorc_la_LIBADD += -lpthread
torcinclude_HEADERS += include/torc/data.h
