/* core/error.c — status names and the thread-local last error.
 * One message per thread, overwritten by each failure; ops given a NULL
 * input keep the first message (torc__null_input).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

#define TORC__ERRMSG_MAX 1024

static _Thread_local char tl_msg[TORC__ERRMSG_MAX];
static _Thread_local torc_status tl_status = TORC_OK;

const char *torc_status_str(torc_status status) {
  switch (status) {
#define TORC__CASE(name, value, text)                                          \
  case TORC_##name:                                                            \
    return text;
    TORC_STATUS_LIST(TORC__CASE)
#undef TORC__CASE
  }
  return "unknown status";
}

const char *torc_status_name(torc_status status) {
  switch (status) {
#define TORC__CASE(name, value, text)                                          \
  case TORC_##name:                                                            \
    return "TORC_" #name;
    TORC_STATUS_LIST(TORC__CASE)
#undef TORC__CASE
  }
  return "TORC_UNKNOWN";
}

const char *torc_last_error(void) { return tl_msg; }

torc_status torc_last_status(void) { return tl_status; }

void torc_clear_error(void) {
  tl_msg[0] = '\0';
  tl_status = TORC_OK;
}

int torc__set_error_v(int status, const char *fmt, va_list ap) {
  char tmp[TORC__ERRMSG_MAX];
  /* Format into a temporary first: the message may quote the old one. */
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  memcpy(tl_msg, tmp, sizeof tmp);
  tl_status = (torc_status)status;
  return status;
}

torc_status torc_set_error(torc_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  torc__set_error_v(status, fmt, ap);
  va_end(ap);
  return status;
}

torc_status torc__null_input(const char *fn) {
  if (tl_status == TORC_OK)
    torc_set_error(TORC_ERR_NULL,
                   "%s: an input tensor is NULL; an earlier call failed "
                   "without its error being checked",
                   fn);
  return TORC_ERR_NULL;
}

size_t torc_edit_distance(const char *a, const char *b) {
  enum { L = 64 };
  if (a == NULL || b == NULL)
    return SIZE_MAX;
  size_t la = strlen(a), lb = strlen(b);
  if (la >= L || lb >= L)
    return SIZE_MAX;
  size_t d[L + 1][L + 1];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int ca = tolower((unsigned char)a[i - 1]),
          cb = tolower((unsigned char)b[j - 1]);
      size_t v = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < v)
        v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v)
        v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
          tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

void torc__suggest(const char *got, const char *const *cands, int n,
                   char *buf, size_t size) {
  size_t best = SIZE_MAX;
  const char *bn = NULL;
  for (int i = 0; i < n; i++) {
    size_t dd = torc_edit_distance(got, cands[i]);
    if (dd < best) {
      best = dd;
      bn = cands[i];
    }
  }
  if (size == 0)
    return;
  if (bn && best <= 2 + strlen(got) / 4)
    snprintf(buf, size, " (did you mean '%s'?)", bn);
  else
    buf[0] = '\0';
}
