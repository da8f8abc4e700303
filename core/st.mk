# core/st.mk — safetensors reading and writing (jansson parses the header).
libtorc_la_SOURCES += core/safetensors.c
libtorc_la_CPPFLAGS += $(JANSSON_CFLAGS)
libtorc_la_LIBADD += $(JANSSON_LIBS)
