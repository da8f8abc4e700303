/* tests/fuzz/fuzz_image.c — libFuzzer harness of PNG and JPEG decoding
 * (plugins/data/image_decode.c, libpng and libjpeg) through the data
 * plugin's "image_folder" source: byte 0 picks the options (bit 0: one
 * channel instead of three; bit 1: on_error = skip), the rest is one image
 * file, written as ROOT/a/image.png (or .jpg when it does not start with
 * PNG's signature); the source is opened on ROOT and the image decoded.
 * When the source offers a max_pixels key it is set low, so that a
 * decompression bomb is an error rather than a slow run.
 */
#include "fuzz_common.h"

static char root[1100], class_dir[1200], png_path[1300], jpg_path[1300];
static int has_max_pixels;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(root, sizeof root, "images");
  snprintf(class_dir, sizeof class_dir, "%s/a", root);
  snprintf(png_path, sizeof png_path, "%s/image.png", class_dir);
  snprintf(jpg_path, sizeof jpg_path, "%s/image.jpg", class_dir);
  if (mkdir(root, 0700) != 0 || mkdir(class_dir, 0700) != 0) {
    fprintf(stderr, "fuzz: mkdir %s: %s\n", class_dir, strerror(errno));
    abort();
  }
  has_max_pixels = fuzz_source_has_key("image_folder", "max_pixels");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int flags = data[0];
  data++;
  size--;
  int png = size >= 4 && memcmp(data, "\x89PNG", 4) == 0;
  const char *path = png ? png_path : jpg_path;
  unlink(png ? jpg_path : png_path);
  fuzz_write(path, data, size);
  const char *keys[4] = {"root", "channels", "on_error"};
  const char *values[4] = {root, flags & 1 ? "1" : "3",
                           flags & 2 ? "skip" : "error"};
  int n = 3;
  if (has_max_pixels) {
    keys[n] = "max_pixels";
    values[n++] = "1048576";
  }
  fuzz_read_dataset("image_folder", keys, values, n);
  return 0;
}
