# examples/local.mk — examples shipped in the tarball. The plugin template
# is built by its own plain Makefile against an installed torc (never by
# this build); tests/test_template.sh builds it from a copy.
EXTRA_DIST += \
	examples/plugin-template/README.md \
	examples/plugin-template/Makefile \
	examples/plugin-template/template.c

# A residual CNN from the module API, built and run by `make check`.
check_PROGRAMS += examples/residual/residual
TESTS += examples/residual/residual
examples_residual_residual_SOURCES = examples/residual/residual.c
examples_residual_residual_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
CLEANFILES += residual.ckpt.safetensors

# The MLP of examples/fashion-mnist/mlp.ini as a C program; make check runs
# it for one epoch on 6000 samples (examples/c-api/run.sh).
check_PROGRAMS += examples/c-api/train_mlp
TESTS += examples/c-api/run.sh
examples_c_api_train_mlp_SOURCES = examples/c-api/train_mlp.c
examples_c_api_train_mlp_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# Early stopping on the test loss with the trainer's callbacks
# (docs/training.md), on a small synthetic problem.
check_PROGRAMS += examples/c-api/early_stop
TESTS += examples/c-api/early_stop.sh
examples_c_api_early_stop_SOURCES = examples/c-api/early_stop.c
examples_c_api_early_stop_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += examples/c-api/run.sh examples/c-api/early_stop.sh \
	examples/fashion-mnist/mlp.ini \
	examples/fashion-mnist/cnn.ini examples/fashion-mnist/resnet.ini \
	examples/fashion-mnist/cnn-curves.svg \
	examples/tabular/README.md examples/tabular/LICENSE \
	examples/tabular/wine.ini examples/tabular/wine-train.csv \
	examples/tabular/wine-test.csv examples/tabular/diabetes.ini \
	examples/tabular/diabetes-train.csv examples/tabular/diabetes-test.csv \
	examples/text/char-lstm.ini examples/text/char-gpt.ini

# A loss plugin built out of tree against the installed headers
# (tests/test_plugin_loss.sh builds and uses it).
EXTRA_DIST += examples/plugin-loss/README.md examples/plugin-loss/Makefile \
	examples/plugin-loss/focal.c examples/plugin-loss/focal.ini
TESTS += tests/test_plugin_loss.sh
EXTRA_DIST += tests/test_plugin_loss.sh
