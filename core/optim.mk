# core/optim.mk — losses, optimizers, schedulers, clipping (torc/optim.h).
libtorc_la_SOURCES += core/optim_internal.h core/loss.c core/optimizer.c \
	core/scheduler.c core/clip.c core/optim_config.c core/optimizer_foreach.c
torcinclude_HEADERS += include/torc/optim.h
