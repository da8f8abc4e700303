# plugins/onednn/local.mk — the onednn plugin (oneDNN 2.6), built only when
# configure found dnnl.h and libdnnl. Registered for device "cpu" above the
# cpu plugin; oneDNN runs on OpenMP (libgomp), and the plugin's own loops
# use OpenMP too (-fopenmp), so they share libgomp's one thread pool.
if HAVE_DNNL
plugin_LTLIBRARIES += plugins/onednn.la
plugins_onednn_la_SOURCES = plugins/onednn/onednn.c \
	plugins/onednn/onednn_internal.h plugins/onednn/cache.c \
	plugins/onednn/conv.c plugins/onednn/pool.c plugins/onednn/bnorm.c \
	plugins/onednn/bf16.c plugins/onednn/fused.c
plugins_onednn_la_CFLAGS = $(AM_CFLAGS) -fopenmp
plugins_onednn_la_LIBADD = $(DNNL_LIBS) -lm
plugins_onednn_la_LDFLAGS = $(PLUGIN_LDFLAGS) -fopenmp
endif
