# plugins/data/local.mk — the data source plugin ("data"): idx, csv, npy,
# image_folder (libpng, libjpeg), synthetic and text (vocab.c: the char
# vocabulary text and csv share); zlib reads gzip IDX files.
plugin_LTLIBRARIES += plugins/data.la
plugins_data_la_SOURCES = plugins/data/data.c plugins/data/data_internal.h \
	plugins/data/idx.c plugins/data/csv.c plugins/data/npy.c \
	plugins/data/image_folder.c plugins/data/image_decode.c \
	plugins/data/synthetic.c plugins/data/text.c \
	plugins/data/vocab.c plugins/data/vocab.h
plugins_data_la_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS) $(PNG_CFLAGS) \
	$(JPEG_CFLAGS)
plugins_data_la_LIBADD = $(ZLIB_LIBS) $(PNG_LIBS) $(JPEG_LIBS) -lm
plugins_data_la_LDFLAGS = $(PLUGIN_LDFLAGS)
