# plugins/onednn/local.mk — the onednn plugin (oneDNN 2.6), built only when
# configure found dnnl.h and libdnnl. Registered for device "cpu" above the
# cpu plugin; oneDNN runs on OpenMP (libgomp), and the plugin's own loops
# use OpenMP too (-fopenmp), so they share libgomp's one thread pool.
if HAVE_DNNL
plugin_LTLIBRARIES += plugins/onednn.la
plugins_onednn_la_SOURCES = plugins/onednn/onednn.c \
	plugins/onednn/onednn_internal.h plugins/onednn/cache.c \
	plugins/onednn/conv.c plugins/onednn/pool.c plugins/onednn/bnorm.c \
	plugins/onednn/bf16.c plugins/onednn/fused.c plugins/onednn/direct.c \
	plugins/onednn/direct.h
plugins_onednn_la_CFLAGS = $(AM_CFLAGS) -fopenmp
plugins_onednn_la_LIBADD = plugins/onednn/libdirect_base.la \
	plugins/onednn/libdirect_avx2.la plugins/onednn/libdirect_avx512.la \
	$(DNNL_LIBS) -lm
# direct.c's image loop (direct_kern.h), one convenience library per ISA
# with its own flags (x86 hosts only: elsewhere those files build NULL).
# -Wno-psabi: its always-inlined helpers pass 64-byte vectors by value,
# an ABI note that never applies to a call.
noinst_LTLIBRARIES += plugins/onednn/libdirect_base.la \
	plugins/onednn/libdirect_avx2.la plugins/onednn/libdirect_avx512.la
DNN_X86 = $(filter x86_64 amd64 i386 i486 i586 i686,$(host_cpu))
plugins_onednn_libdirect_base_la_SOURCES = plugins/onednn/direct_base.c \
	plugins/onednn/direct_kern.h plugins/onednn/direct.h
plugins_onednn_libdirect_base_la_CFLAGS = $(AM_CFLAGS) -O2 -Wno-psabi
plugins_onednn_libdirect_avx2_la_SOURCES = plugins/onednn/direct_avx2.c
plugins_onednn_libdirect_avx2_la_CFLAGS = $(AM_CFLAGS) -O2 -Wno-psabi \
	$(if $(DNN_X86),-mavx2 -mfma)
plugins_onednn_libdirect_avx512_la_SOURCES = plugins/onednn/direct_avx512.c
plugins_onednn_libdirect_avx512_la_CFLAGS = $(AM_CFLAGS) -O2 -Wno-psabi \
	$(if $(DNN_X86),-mavx2 -mfma -mavx512f -mavx512dq -mavx512bw \
	-mavx512vl)
plugins_onednn_la_LDFLAGS = $(PLUGIN_LDFLAGS) -fopenmp
endif
