# plugins/optim/local.mk — the optimizer and scheduler plugin ("optim"):
# sgd, adam, adamw, rmsprop, adagrad; step, multistep, exponential, cosine,
# plateau, onecycle, cyclic. Computes through host->api only.
plugin_LTLIBRARIES += plugins/optim.la
plugins_optim_la_SOURCES = plugins/optim/optim.c \
	plugins/optim/optim_internal.h plugins/optim/optimizers.c \
	plugins/optim/schedulers.c
plugins_optim_la_LIBADD = -lm
plugins_optim_la_LDFLAGS = $(PLUGIN_LDFLAGS)
