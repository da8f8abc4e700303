# core/support.mk — the public calls the layers above the core (train/)
# build on: typed configuration reads and schema tables (torc/config.h),
# the sweep for stale temporary files (torc/safetensors.h).
libtorc_la_SOURCES += core/config_get.c core/st_temps.c
