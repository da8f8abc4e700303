# plugins/losses/local.mk — the loss plugin ("losses"): mse, l1, smooth_l1,
# huber, cross_entropy, nll, bce, bce_with_logits, kl_div, written with the
# core's ops through host->api (so they run on every backend).
plugin_LTLIBRARIES += plugins/losses.la
plugins_losses_la_SOURCES = plugins/losses/losses.c \
	plugins/losses/losses_internal.h plugins/losses/elementwise.c \
	plugins/losses/classify.c
plugins_losses_la_LIBADD = -lm
plugins_losses_la_LDFLAGS = $(PLUGIN_LDFLAGS)
