# plugins/sim/local.mk — the simulated accelerator (device type "sim"): its
# memory table and cap, one asynchronous stream per device, and the ref
# kernels (linked in from the convenience library) run on that stream.
plugin_LTLIBRARIES += plugins/sim.la
plugins_sim_la_SOURCES = plugins/sim/sim.c plugins/sim/sim_internal.h \
	plugins/sim/sim_memory.c plugins/sim/sim_stream.c
plugins_sim_la_LIBADD = plugins/ref/librefkernels.la -lm
plugins_sim_la_LDFLAGS = $(PLUGIN_LDFLAGS) $(PTHREAD_CFLAGS)
