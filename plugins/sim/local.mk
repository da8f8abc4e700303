# plugins/sim/local.mk — the simulated accelerator (device type "sim"): its
# memory table and cap, asynchronous streams and events per device, and the ref
# kernels (linked in from the convenience library) run on that stream.
plugin_LTLIBRARIES += plugins/sim.la
plugins_sim_la_SOURCES = plugins/sim/sim.c plugins/sim/sim_internal.h plugins/sim/sim_counters.h \
	plugins/sim/sim_memory.c plugins/sim/sim_stream.c plugins/sim/sim_events.c
plugins_sim_la_LIBADD = plugins/ref/librefkernels.la -lm
# sim exports its counters (torc_sim_read_counters) besides the entry, for
# tests that count how often the host waited.
plugins_sim_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-export-symbols-regex '^torc_(plugin_entry|sim_read_counters)$$' \
	-Wl,--no-undefined $(PTHREAD_CFLAGS)
