# plugins/mpi/local.mk — the mpi plugin: the "mpi" communicator on Open MPI
# (training in several processes on the cpu; NCCL's bootstrap), built only
# when configure found ompi-c (libopenmpi-dev).
if HAVE_MPI
plugin_LTLIBRARIES += plugins/mpi.la
plugins_mpi_la_SOURCES = plugins/mpi/mpi.c
plugins_mpi_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
plugins_mpi_la_LIBADD = $(MPI_LIBS)
plugins_mpi_la_LDFLAGS = $(PLUGIN_LDFLAGS)
endif
