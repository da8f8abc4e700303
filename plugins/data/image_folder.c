/* plugins/data/image_folder.c — the "image_folder" source: ROOT/CLASS/IMAGE
 * (one folder per class, classes in sorted folder-name order, PNG or JPEG).
 * Open lists the files and checks each one's header; get() decodes.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data_internal.h"

typedef struct imgf_item {
  char *path;
  int64_t cls;
} imgf_item;

typedef struct imgf_ds {
  imgf_item *items;
  int64_t n, cap;
  char **classes;
  int64_t n_classes;
  int channels;
  dsrc_img_limits lim;
  uint32_t min_w, max_w, min_h, max_h;
  int64_t skipped;
  char *describe;
} imgf_ds;

/* A growing list of names. */
typedef struct name_list {
  char **v;
  size_t n, cap;
} name_list;

static void names_free(name_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

static int names_add(name_list *l, const char *s) {
  if (l->n == l->cap) {
    size_t ncap = l->cap ? l->cap * 2 : 16;
    char **nv = realloc(l->v, sizeof *nv * ncap);
    if (nv == NULL)
      return dsrc_oom("image_folder", sizeof *nv * ncap);
    l->v = nv;
    l->cap = ncap;
  }
  l->v[l->n] = dsrc_strndup(s, strlen(s));
  if (l->v[l->n] == NULL)
    return dsrc_oom("image_folder", strlen(s) + 1);
  l->n++;
  return TORC_OK;
}

static int names_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_image_name(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (strcasecmp(dot, ".png") == 0 ||
                 strcasecmp(dot, ".jpg") == 0 ||
                 strcasecmp(dot, ".jpeg") == 0);
}

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = malloc(la + lb + 2);
  if (p) {
    memcpy(p, a, la);
    size_t k = la;
    if (k == 0 || p[k - 1] != '/')
      p[k++] = '/';
    memcpy(p + k, b, lb + 1);
  }
  return p;
}

/* The expected layout, for the layout errors. */
#define IMGF_LAYOUT                                                          \
  "expected one folder per class holding that class's PNG or JPEG images, " \
  "ROOT/CLASS/IMAGE (e.g. ROOT/cat/001.png, ROOT/dog/002.jpg), class "      \
  "indices in sorted folder-name order"

/* Lists folder `dir`: sub-folders into dirs, image files into images,
 * anything else counted in *ignored (first one in ignored_name). Hidden
 * entries (".name") are skipped. */
static int list_folder(const char *dir, name_list *dirs, name_list *images,
                       int64_t *ignored, char *ignored_name, size_t in_size) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    int e = errno;
    if (e == ENOENT)
      return dsrc_error(TORC_ERR_IO,
                        "image_folder: folder '%s' does not exist; check the "
                        "path (key 'root')",
                        dir);
    if (e == ENOTDIR)
      return dsrc_error(TORC_ERR_IO,
                        "image_folder: '%s' is a file, not a folder; key "
                        "'root' takes the folder holding one folder per "
                        "class",
                        dir);
    if (e == EACCES)
      return dsrc_error(TORC_ERR_IO,
                        "image_folder: folder '%s' is not readable "
                        "(permission denied); make it readable (chmod u+rx)",
                        dir);
    return dsrc_error(TORC_ERR_IO, "image_folder: cannot open folder '%s': %s",
                      dir, strerror(e));
  }
  int st = TORC_OK;
  struct dirent *ent;
  while (st == TORC_OK && (ent = readdir(d)) != NULL) {
    if (ent->d_name[0] == '.')
      continue;
    char *p = join(dir, ent->d_name);
    if (p == NULL) {
      st = dsrc_oom("image_folder", strlen(dir) + strlen(ent->d_name) + 2);
      break;
    }
    struct stat sb;
    int ok = stat(p, &sb) == 0; /* follows links, as a user expects */
    if (ok && S_ISDIR(sb.st_mode) && dirs)
      st = names_add(dirs, ent->d_name);
    else if (ok && S_ISREG(sb.st_mode) && is_image_name(ent->d_name))
      st = names_add(images, ent->d_name);
    else if ((*ignored)++ == 0)
      snprintf(ignored_name, in_size, "%s", p);
    free(p);
  }
  closedir(d);
  if (st == TORC_OK && dirs && dirs->n > 1)
    qsort(dirs->v, dirs->n, sizeof *dirs->v, names_cmp);
  if (st == TORC_OK && images->n > 1)
    qsort(images->v, images->n, sizeof *images->v, names_cmp);
  return st;
}

static int add_item(imgf_ds *ds, char *path, int64_t cls) {
  if (ds->n == ds->cap) {
    int64_t ncap = ds->cap ? ds->cap * 2 : 256;
    imgf_item *ni = realloc(ds->items, sizeof *ni * (size_t)ncap);
    if (ni == NULL)
      return dsrc_oom("image_folder", sizeof *ni * (size_t)ncap);
    ds->items = ni;
    ds->cap = ncap;
  }
  ds->items[ds->n].path = path;
  ds->items[ds->n].cls = cls;
  ds->n++;
  return TORC_OK;
}

static void imgf_close(void *handle) {
  imgf_ds *ds = handle;
  if (ds == NULL)
    return;
  for (int64_t i = 0; i < ds->n; i++)
    free(ds->items[i].path);
  free(ds->items);
  for (int64_t i = 0; i < ds->n_classes; i++)
    free(ds->classes[i]);
  free(ds->classes);
  free(ds->describe);
  free(ds);
}

/* Lists class folder c and checks its images' headers. */
static int scan_class(imgf_ds *ds, const char *root, int64_t c, int skip,
                      int64_t *ignored, char *ignored_name, size_t in_size) {
  char *dir = join(root, ds->classes[c]);
  if (dir == NULL)
    return dsrc_oom("image_folder", strlen(root) + 64);
  name_list sub = {0}, images = {0};
  int st = list_folder(dir, &sub, &images, ignored, ignored_name, in_size);
  if (st == TORC_OK && sub.n > 0 && (*ignored)++ == 0)
    snprintf(ignored_name, in_size, "%s/%s", dir, sub.v[0]);
  if (st == TORC_OK && sub.n > 1)
    *ignored += (int64_t)sub.n - 1;
  if (st == TORC_OK && images.n == 0)
    st = dsrc_error(TORC_ERR_IO,
                    "image_folder: '%s': unknown class folder layout: class "
                    "folder '%s' holds no PNG or JPEG images (.png, .jpg, "
                    ".jpeg); add its images or remove it; " IMGF_LAYOUT,
                    root, ds->classes[c]);
  int64_t kept = 0;
  for (size_t i = 0; st == TORC_OK && i < images.n; i++) {
    char *path = join(dir, images.v[i]);
    if (path == NULL) {
      st = dsrc_oom("image_folder", strlen(dir) + strlen(images.v[i]) + 2);
      break;
    }
    int format;
    uint32_t w = 0, h = 0;
    char why[256];
    int rc = dsrc_image_probe(path, &ds->lim, &format, &w, &h, why,
                              sizeof why);
    if (rc != 0) {
      const char *kind = rc == DSRC_IMG_TOO_LARGE ? "too large" : "corrupt";
      if (!skip) {
        st = dsrc_error(TORC_ERR_IO,
                        "image_folder: %s image '%s': %s; %s, or set "
                        "on_error = skip",
                        kind, path, why,
                        rc == DSRC_IMG_TOO_LARGE ? "else remove it"
                                                 : "fix or remove it");
      } else {
        dsrc_log(TORC_LOG_WARN, "image_folder: skipping %s image '%s': %s",
                 kind, path, why);
        ds->skipped++;
      }
      free(path);
      continue;
    }
    st = add_item(ds, path, c);
    if (st != TORC_OK) {
      free(path);
      break;
    }
    kept++;
    if (ds->n == 1) {
      ds->min_w = ds->max_w = w;
      ds->min_h = ds->max_h = h;
    }
    ds->min_w = w < ds->min_w ? w : ds->min_w;
    ds->max_w = w > ds->max_w ? w : ds->max_w;
    ds->min_h = h < ds->min_h ? h : ds->min_h;
    ds->max_h = h > ds->max_h ? h : ds->max_h;
  }
  if (st == TORC_OK && kept == 0)
    dsrc_log(TORC_LOG_WARN,
             "image_folder: class folder '%s' has no readable image left; "
             "class %" PRId64 " ('%s') has no samples",
             dir, c, ds->classes[c]);
  names_free(&sub);
  names_free(&images);
  free(dir);
  return st;
}

static int imgf_open(const char *const *keys, const char *const *values,
                     int n, void *user, void **handle) {
  (void)user;
  *handle = NULL;
  const char *root = dsrc_value(keys, values, n, "root");
  const char *on_error = dsrc_value(keys, values, n, "on_error");
  const char *channels_s = dsrc_value(keys, values, n, "channels");
  int skip;
  if (on_error == NULL || strcmp(on_error, "error") == 0)
    skip = 0;
  else if (strcmp(on_error, "skip") == 0)
    skip = 1;
  else
    return dsrc_error(TORC_ERR_INVALID,
                      "image_folder: key 'on_error' = '%s' is not error or "
                      "skip; give error (a corrupt image stops the open) or "
                      "skip (it is left out with a warning)",
                      on_error);
  int64_t channels = 3;
  if (channels_s && strcmp(channels_s, "3") != 0 &&
      strcmp(channels_s, "1") != 0)
    return dsrc_error(TORC_ERR_INVALID,
                      "image_folder: key 'channels' = '%s' is not 1 or 3; "
                      "give 3 (RGB) or 1 (grayscale)",
                      channels_s);
  if (channels_s)
    channels = channels_s[0] - '0';
  if (root == NULL || root[0] == '\0')
    return dsrc_error(TORC_ERR_INVALID,
                      "image_folder: key 'root' is empty; give the folder "
                      "holding one folder per class");
  imgf_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return dsrc_oom("image_folder", sizeof *ds);
  ds->channels = (int)channels;
  int st = dsrc_limit("image_folder", "max_bytes", keys, values, n,
                      DSRC_IMG_MAX_BYTES, &ds->lim.max_bytes);
  if (st == TORC_OK)
    st = dsrc_limit("image_folder", "max_pixels", keys, values, n,
                    DSRC_IMG_MAX_PIXELS, &ds->lim.max_pixels);
  if (st != TORC_OK) {
    imgf_close(ds);
    return st;
  }
  name_list dirs = {0}, files = {0};
  int64_t ignored = 0;
  char ignored_name[512] = "";
  st = list_folder(root, &dirs, &files, &ignored, ignored_name,
                       sizeof ignored_name);
  if (st != TORC_OK)
    goto done;
  if (files.n > 0) {
    st = dsrc_error(TORC_ERR_IO,
                    "image_folder: '%s': unknown class folder layout: %zu "
                    "image file%s directly in the root folder (e.g. '%s'); "
                    "move them into class folders: " IMGF_LAYOUT,
                    root, files.n, files.n == 1 ? " lies" : "s lie",
                    files.v[0]);
    goto done;
  }
  if (dirs.n == 0) {
    st = dsrc_error(TORC_ERR_IO,
                    "image_folder: '%s': unknown class folder layout: no "
                    "class folders in it; " IMGF_LAYOUT,
                    root);
    goto done;
  }
  /* The class names move from the list to the dataset. */
  ds->classes = dirs.v;
  ds->n_classes = (int64_t)dirs.n;
  dirs.v = NULL;
  dirs.n = dirs.cap = 0;
  for (int64_t c = 0; st == TORC_OK && c < ds->n_classes; c++)
    st = scan_class(ds, root, c, skip, &ignored, ignored_name,
                    sizeof ignored_name);
  if (st != TORC_OK)
    goto done;
  if (ds->n == 0) {
    st = dsrc_error(TORC_ERR_IO,
                    "image_folder: '%s': every image failed its header check "
                    "(%" PRId64 " skipped, see the warnings); give readable "
                    "PNG or JPEG images",
                    root, ds->skipped);
    goto done;
  }
  if (ignored > 0)
    dsrc_log(TORC_LOG_INFO,
             "image_folder: %s: ignored %" PRId64 " entr%s that %s not a PNG "
             "or JPEG image in a class folder (e.g. '%s')",
             root, ignored, ignored == 1 ? "y" : "ies",
             ignored == 1 ? "is" : "are", ignored_name);
  if (ds->skipped > 0)
    dsrc_log(TORC_LOG_WARN,
             "image_folder: %s: skipped %" PRId64 " corrupt image%s "
             "(on_error = skip)",
             root, ds->skipped, ds->skipped == 1 ? "" : "s");
  char buf[512];
  size_t len = 0;
  buf[0] = '\0';
  if (ds->min_w == ds->max_w && ds->min_h == ds->max_h)
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input [%d, %u, %u] u8, %" PRId64
                 " classes (",
                 ds->n, ds->channels, ds->min_h, ds->min_w, ds->n_classes);
  else
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input [%d, H, W] u8 (H %u to %u, W "
                 "%u to %u), %" PRId64 " classes (",
                 ds->n, ds->channels, ds->min_h, ds->max_h, ds->min_w,
                 ds->max_w, ds->n_classes);
  int64_t shown = 0;
  for (; shown < ds->n_classes && len < 400; shown++)
    dsrc_appendf(buf, sizeof buf, &len, "%s%s", shown ? ", " : "",
                 ds->classes[shown]);
  if (shown < ds->n_classes)
    dsrc_appendf(buf, sizeof buf, &len, ", ...");
  if (ds->skipped > 0)
    dsrc_appendf(buf, sizeof buf, &len, "), %" PRId64 " corrupt skipped",
                 ds->skipped);
  else
    dsrc_appendf(buf, sizeof buf, &len, ")");
  ds->describe = dsrc_strndup(buf, strlen(buf));
  if (ds->describe == NULL)
    st = dsrc_oom("image_folder", strlen(buf) + 1);
done:
  names_free(&dirs);
  names_free(&files);
  if (st != TORC_OK) {
    imgf_close(ds);
    return st;
  }
  *handle = ds;
  return TORC_OK;
}

static int64_t imgf_length(void *handle) { return ((imgf_ds *)handle)->n; }

static int imgf_get(void *handle, int64_t index, torc_tensor **input,
                    torc_tensor **target) {
  const imgf_ds *ds = handle;
  const imgf_item *it = &ds->items[index];
  uint8_t *hwc;
  uint32_t w, h;
  char why[256];
  if (dsrc_image_decode(it->path, ds->channels, &ds->lim, &hwc, &w, &h, why,
                        sizeof why) != 0)
    return dsrc_error(TORC_ERR_IO,
                      "image_folder: cannot decode image '%s' (sample %" PRId64
                      "): %s; fix or remove the file",
                      it->path, index, why);
  /* [H, W, C] -> [C, H, W] */
  size_t c = (size_t)ds->channels, plane = (size_t)w * h;
  uint8_t *chw = c == 1 ? hwc : malloc(plane * c);
  if (chw == NULL) {
    free(hwc);
    return dsrc_oom("image_folder", plane * c);
  }
  if (c > 1)
    for (size_t p = 0; p < plane; p++)
      for (size_t k = 0; k < c; k++)
        chw[k * plane + p] = hwc[p * c + k];
  const int64_t shape[3] = {(int64_t)c, h, w};
  int st = dsrc_tensor(chw, shape, 3, TORC_U8, input);
  if (chw != hwc)
    free(chw);
  free(hwc);
  if (st != TORC_OK)
    return st;
  st = dsrc_class_target(it->cls, target);
  if (st != TORC_OK) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  return st;
}

static int imgf_describe(void *handle, char *buf, size_t size) {
  snprintf(buf, size, "%s", ((imgf_ds *)handle)->describe);
  return TORC_OK;
}

static int64_t imgf_num_classes(void *handle) {
  return ((imgf_ds *)handle)->n_classes;
}

static int imgf_class_name(void *handle, int64_t i, char *buf, size_t size) {
  const imgf_ds *ds = handle;
  if (i < 0 || i >= ds->n_classes)
    return dsrc_error(TORC_ERR_RANGE,
                      "image_folder: class %" PRId64 " is out of range [0, "
                      "%" PRId64 ")",
                      i, ds->n_classes);
  snprintf(buf, size, "%s", ds->classes[i]);
  return TORC_OK;
}

static const torc_data_key imgf_keys[] = {
    {"root", "folder holding one folder per class (ROOT/CLASS/IMAGE.png or "
             ".jpg); classes in sorted folder-name order",
     NULL, 1},
    {"channels", "3: RGB (gray replicated, alpha dropped) | 1: grayscale "
                 "(ITU-R 601 luma)",
     "3", 0},
    {"on_error", "error: a corrupt image stops the open | skip: images "
                 "failing the header check (corrupt, or over max_pixels or "
                 "max_bytes) are left out with a warning",
     "error", 0},
    {"max_pixels", "the most pixels (width * height) an image may have, "
                   "checked from its header before decoding (K, M, G "
                   "suffixes; 64M = 8192x8192); caps the decoder's memory "
                   "too",
     DSRC_IMG_MAX_PIXELS, 0},
    {"max_bytes", "the largest image file read (K, M, G suffixes); a larger "
                  "one, or a device or pipe, is refused",
     DSRC_IMG_MAX_BYTES, 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_image_folder_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "image_folder",
    .description = "PNG and JPEG images in one folder per class: input u8 "
                   "[C, H, W], target the class index",
    .keys = imgf_keys,
    .open = imgf_open,
    .length = imgf_length,
    .get = imgf_get,
    .close = imgf_close,
    .describe = imgf_describe,
    .num_classes = imgf_num_classes,
    .class_name = imgf_class_name,
    .user = NULL,
};
