# core/local.mk — libtorc: the backend-agnostic core.
lib_LTLIBRARIES += libtorc.la
# include/torc/testing.h: core/mem.c's test-only controls, not installed.
libtorc_la_SOURCES = \
	core/internal.h core/alloc_internal.h include/torc/testing.h \
	core/mem.c core/error.c core/dtype.c core/device.c core/alloc.c \
	core/alloc_blocks.c core/profile.c core/kcost.c core/peak.c \
	core/stream_internal.h core/stream.c \
	core/tensor_internal.h core/tensor.c core/tensor_views.c \
	core/scope.c \
	core/random.c core/dispatch.c core/ops.c core/print.c \
	core/ops_elementwise.c core/ops_reduce.c \
	core/autograd.c core/gradcheck.c core/derivatives.c \
	core/plugin.c core/elf_check.h core/elf_check.c \
	core/config_internal.h core/config.c core/config_schema.c \
	core/config_names.c \
	core/config_read.c core/config_apply.c \
	core/runtime.c core/graph_internal.h core/graph.c \
	core/graph_check.c core/graph_params.c \
	core/graph_io.c core/graph_plan.c core/predict.c core/ops_nn_nd.c
libtorc_la_CPPFLAGS = $(AM_CPPFLAGS) -DTORC_BUILDING \
	-DTORC_PLUGIN_DIR='"$(plugindir)"' $(INIH_CFLAGS) \
	$(PROTOBUF_C_CFLAGS) -I$(top_builddir)/core/onnx
libtorc_la_LIBADD = $(INIH_LIBS) libtorc_onnxpb.la -lm
libtorc_la_LDFLAGS = -version-info 0:0:0 -no-undefined -Wl,--no-undefined

torcinclude_HEADERS += \
	include/torc/torc.h include/torc/error.h include/torc/dtype.h \
	include/torc/device.h include/torc/tensor.h include/torc/ops.h \
	include/torc/stream.h include/torc/profile.h \
	include/torc/config.h include/torc/runtime.h include/torc/plugin.h \
	include/torc/philox.h include/torc/autograd.h include/torc/nn.h include/torc/safetensors.h include/torc/indexing.h \
	include/torc/checked.h include/torc/graph.h \
	include/torc/ops.def include/torc/ops_nn.def include/torc/ops_index.def \
	include/torc/ops_fused.def
include core/onnx.mk
include core/nn.mk
include core/st.mk
include core/index.mk
include core/module.mk
include core/data.mk
include core/optim.mk
include core/amp.mk
include core/dist.mk
include core/fused.mk
include core/support.mk
