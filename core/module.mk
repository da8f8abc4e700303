# core/module.mk — modules, layers, init, state dicts (torc/module.h,
# torc/init.h, torc/state.h).
libtorc_la_SOURCES += core/module_internal.h core/module.c \
	core/module_containers.c core/module_params.c core/module_print.c \
	core/module_types.c core/registry.h \
	core/registry.c core/config_model.c core/layers.c \
	core/init.c core/state_internal.h core/state.c core/state_load.c \
	core/checkpoint.c core/plugin_api.c \
	core/layers_internal.h core/layers_norm.c core/layers_simple.c \
	core/layers_types.c core/layers_rnn.c core/layers_attn.c \
	core/decode_internal.h core/decode.c core/generate.c
torcinclude_HEADERS += include/torc/module.h include/torc/init.h \
	include/torc/generate.h \
	include/torc/state.h include/torc/plugin_api.h
