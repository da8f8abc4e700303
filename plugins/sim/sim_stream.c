/* plugins/sim/sim_stream.c — a sim device's streams: each a FIFO of tasks
 * (kernels, copies, frees, event records and waits) run by its own worker
 * thread, with a simulated clock; the generic kernel that queues a
 * reference kernel over host buffers on the caller's stream; the sticky
 * errors of asynchronous kernels, reported at the next synchronisation.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ref/ref_kernels.h"
#include "sim_internal.h"

const char *sim__dtype_name(int32_t dtype) {
  static const char *const names[] = {"f32", "f64", "f16", "bf16",
                                      "i32", "i64", "u8",  "bool"};
  if (dtype >= 0 && dtype < (int32_t)(sizeof names / sizeof names[0]))
    return names[dtype];
  return dtype == TORC_DTYPE_ANY ? "any" : "invalid";
}

/* ---- errors raised on the worker ---- */

/* The device whose kernel runs on this thread (NULL off the workers), and
 * the first error that kernel reported through torc_ref_set_error. */
static _Thread_local sim_device *tl_dev;
static _Thread_local int tl_status;
static _Thread_local char tl_msg[SIM_MSG_MAX];

int sim__ref_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (tl_dev != NULL) {
    /* host->set_error is thread-local: on the worker it would be lost. */
    if (tl_status == TORC_OK) {
      tl_status = status;
      vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    }
  } else if (sim__g.host != NULL) {
    const torc_host *h = sim__g.host;
    if (TORC_HAS_SLOT(h, torc_host, set_error_v) && h->set_error_v) {
      h->set_error_v(status, fmt, ap);
    } else {
      char msg[SIM_MSG_MAX];
      vsnprintf(msg, sizeof msg, fmt, ap);
      h->set_error(status, "%s", msg);
    }
  }
  va_end(ap);
  return status;
}

/* Keeps the first asynchronous error (as CUDA's sticky errors). */
static void record_sticky(sim_device *dev, int status, const char *fmt, ...)
    TORC_PRINTF(3, 4);
static void record_sticky(sim_device *dev, int status, const char *fmt, ...) {
  pthread_mutex_lock(&dev->mu);
  if (dev->sticky == TORC_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dev->sticky_msg, sizeof dev->sticky_msg, fmt, ap);
    va_end(ap);
    dev->sticky = status;
  }
  pthread_mutex_unlock(&dev->mu);
}

/* ---- the workers ---- */

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void run_kernel(sim_device *dev, sim_task *t) {
  const torc_kernel_args *a = &t->args;
  int32_t dtype = a->n_out > 0  ? a->out[0].dtype
                  : a->n_in > 0 ? a->in[0].dtype
                                : TORC_DTYPE_ANY;
  if (sim__g.latency_us > 0)
    sleep_us(sim__g.latency_us);
  tl_dev = dev;
  tl_status = TORC_OK;
  tl_msg[0] = '\0';
  /* An injected failure still runs the kernel, so the memory later work
   * reads is defined (valgrind stays quiet); only the error is simulated. */
  int rc = t->fn(a);
  tl_dev = NULL;
  if (t->inject_fail) {
    record_sticky(dev, TORC_ERR_DEVICE,
                  "sim:%d: asynchronous kernel '%s' (%s) failed: injected "
                  "failure ([plugin.sim] fail_op = %s); reported at the next "
                  "synchronisation",
                  dev->index, a->op, sim__dtype_name(dtype), sim__g.fail_op);
    return;
  }
  if (rc != TORC_OK)
    record_sticky(dev, rc,
                  "sim:%d: asynchronous kernel '%s' (%s) failed: %s; "
                  "reported at the next synchronisation",
                  dev->index, a->op, sim__dtype_name(dtype),
                  tl_msg[0] ? tl_msg : "the kernel gave no message");
}

/* Waits for a WAIT task's event (on its own device's lock, which may be
 * another device's) and returns the simulated time it completed at. */
static uint64_t wait_event(sim_task *t) {
  sim_event *ev = t->event;
  sim_device *ed = ev->dev;
  pthread_mutex_lock(&ed->mu);
  while (ev->done < t->target)
    pthread_cond_wait(&ed->idle, &ed->mu);
  uint64_t when = ev->time_us;
  sim__event_unref_locked(ev);
  pthread_mutex_unlock(&ed->mu);
  return when;
}

/* The simulated clock: a task starts when its stream is free and ends its
 * latency later (kernels kernel_latency_us, copies copy_latency_us).
 * Called with dev->mu held, as the task starts. */
static void clock_task(sim_stream *s, sim_task *t) {
  uint64_t lat = t->kind == SIM_TASK_KERNEL ? (uint64_t)sim__g.kernel_latency_us
                 : t->kind == SIM_TASK_COPY ? (uint64_t)sim__g.copy_latency_us
                                            : 0;
  s->clock_us += lat;
  if (s->clock_us > s->dev->sim_time_us)
    s->dev->sim_time_us = s->clock_us;
}

static void *worker_main(void *arg) {
  sim_stream *s = arg;
  sim_device *dev = s->dev;
  pthread_mutex_lock(&dev->mu);
  for (;;) {
    while (s->head == NULL && !s->stop)
      pthread_cond_wait(&s->work, &dev->mu);
    if (s->head == NULL) /* stop, and nothing left to run */
      break;
    sim_task *t = s->head;
    s->head = t->next;
    if (s->head == NULL)
      s->tail = NULL;
    sim_task_kind kind = t->kind;
    if (kind == SIM_TASK_WAIT) {
      pthread_mutex_unlock(&dev->mu);
      uint64_t when = wait_event(t);
      pthread_mutex_lock(&dev->mu);
      if (when > s->clock_us)
        s->clock_us = when;
    } else if (kind == SIM_TASK_RECORD) {
      /* Everything before it on this stream has run. */
      sim_event *ev = t->event;
      if (t->target > ev->done) {
        ev->done = t->target;
        ev->time_us = s->clock_us;
      }
      sim__event_unref_locked(ev);
    } else {
      clock_task(s, t);
    }
    pthread_mutex_unlock(&dev->mu);
    switch (kind) {
    case SIM_TASK_KERNEL:
      run_kernel(dev, t);
      break;
    case SIM_TASK_COPY:
      memcpy(t->dst, t->src, t->nbytes);
      if (t->pin)
        sim__pin_done(t->pin);
      break;
    default:
      break;
    }
    free(t->owned);
    free(t);
    pthread_mutex_lock(&dev->mu);
    s->pending--;
    dev->pending--;
    pthread_cond_broadcast(&dev->idle);
  }
  pthread_mutex_unlock(&dev->mu);
  return NULL;
}

void sim__enqueue_on(sim_stream *s, sim_task *task) {
  sim_device *dev = s->dev;
  task->next = NULL;
  pthread_mutex_lock(&dev->mu);
  if (task->kind == SIM_TASK_KERNEL) /* counted when queued */
    dev->n_kernels++;
  if (s->tail)
    s->tail->next = task;
  else
    s->head = task;
  s->tail = task;
  s->pending++;
  dev->pending++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&dev->mu);
}

void sim__enqueue(sim_device *dev, sim_task *task) {
  sim__enqueue_on(&dev->def, task);
}

sim_stream *sim__stream_of(sim_device *dev, void *handle) {
  if (handle == NULL)
    return &dev->def;
  sim_stream *s = handle;
  pthread_mutex_lock(&dev->mu);
  sim_stream *it = dev->streams;
  while (it && it != s)
    it = it->next;
  pthread_mutex_unlock(&dev->mu);
  if (it == NULL) {
    sim__g.host->set_error(TORC_ERR_DEVICE,
                           "sim:%d: stream %p is not a live stream of this "
                           "device (freed, or another device's)",
                           dev->index, handle);
    return NULL;
  }
  return s;
}

int sim__report_sticky(sim_device *dev) {
  char msg[SIM_MSG_MAX];
  pthread_mutex_lock(&dev->mu);
  int st = dev->sticky;
  if (st != TORC_OK) {
    memcpy(msg, dev->sticky_msg, sizeof msg);
    dev->sticky = TORC_OK;
    dev->sticky_msg[0] = '\0';
  }
  pthread_mutex_unlock(&dev->mu);
  if (st != TORC_OK)
    sim__g.host->set_error(st, "%s", msg);
  return st;
}

int sim__drain(sim_device *dev, int report) {
  pthread_mutex_lock(&dev->mu);
  while (dev->pending > 0)
    pthread_cond_wait(&dev->idle, &dev->mu);
  pthread_mutex_unlock(&dev->mu);
  return report ? sim__report_sticky(dev) : TORC_OK;
}

/* Starts stream s of dev: its condition and worker. */
static int stream_start(sim_device *dev, sim_stream *s) {
  memset(s, 0, sizeof *s);
  s->magic = SIM_STREAM_MAGIC;
  s->dev = dev;
  if (pthread_cond_init(&s->work, NULL) != 0)
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: cannot create a condition",
                                  dev->index);
  /* The worker blocks every signal (it inherits the mask), so that the
   * application's handlers (Ctrl-C in a trainer) run on its own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&s->thread, NULL, worker_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&s->work);
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: cannot start a stream's worker "
                                  "thread: %s",
                                  dev->index, strerror(rc));
  }
  s->thread_started = 1;
  return TORC_OK;
}

/* Runs what s has queued and joins its worker; s stays linked. */
static void stream_stop(sim_stream *s) {
  if (!s->thread_started)
    return;
  pthread_mutex_lock(&s->dev->mu);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->dev->mu);
  pthread_join(s->thread, NULL);
  s->thread_started = 0;
  s->magic = 0;
  pthread_cond_destroy(&s->work);
}

int sim__device_start(sim_device *dev, int index) {
  memset(dev, 0, sizeof *dev);
  dev->index = index;
  if (pthread_mutex_init(&dev->mu, NULL) != 0)
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: cannot create a mutex", index);
  if (pthread_cond_init(&dev->idle, NULL) != 0) {
    pthread_mutex_destroy(&dev->mu);
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: cannot create a condition", index);
  }
  int st = stream_start(dev, &dev->def);
  if (st != TORC_OK) {
    pthread_cond_destroy(&dev->idle);
    pthread_mutex_destroy(&dev->mu);
    return st;
  }
  dev->streams = &dev->def;
  dev->started = 1;
  return TORC_OK;
}

void sim__device_stop(sim_device *dev) {
  if (!dev->started)
    return;
  /* Side streams first: their waits may need the default stream. */
  for (sim_stream *s = dev->streams; s; s = s->next)
    if (s != &dev->def)
      stream_stop(s);
  stream_stop(&dev->def);
  while (dev->streams) {
    sim_stream *s = dev->streams;
    dev->streams = s->next;
    if (s != &dev->def)
      free(s);
  }
  while (dev->events) {
    sim_event *e = dev->events;
    dev->events = e->next;
    free(e);
  }
  dev->started = 0;
  sim__free_table(dev);
  pthread_cond_destroy(&dev->idle);
  pthread_mutex_destroy(&dev->mu);
}

int sim__stream_new(void *user, int index, void **out) {
  (void)user;
  *out = NULL;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_stream *s = malloc(sizeof *s);
  if (s == NULL)
    return sim__g.host->set_error(TORC_ERR_OOM,
                                  "sim:%d: out of host memory for a stream",
                                  index);
  int st = stream_start(dev, s);
  if (st != TORC_OK) {
    free(s);
    return st;
  }
  pthread_mutex_lock(&dev->mu);
  s->next = dev->def.next; /* the default stream stays first */
  dev->def.next = s;
  pthread_mutex_unlock(&dev->mu);
  *out = s;
  return TORC_OK;
}

void sim__stream_free(void *user, int index, void *stream) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL || stream == NULL)
    return;
  sim_stream *s = sim__stream_of(dev, stream);
  if (s == &dev->def)
    return;
  if (s == NULL) {
    sim__g.host->log(TORC_LOG_ERROR, "sim:%d: stream_free of %p, which is "
                     "no stream of this device; ignored", index, stream);
    return;
  }
  stream_stop(s); /* runs its queue first */
  pthread_mutex_lock(&dev->mu);
  sim_stream **pp = &dev->streams;
  while (*pp != s)
    pp = &(*pp)->next;
  *pp = s->next;
  pthread_mutex_unlock(&dev->mu);
  free(s);
}

/* ---- the generic kernel ---- */

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Checks that every element kt reaches lies inside its buffer of `size`
 * bytes (the device-side bounds check a real device would not do: it
 * catches core bugs as errors instead of silent corruption). */
static int check_extent(const sim_device *dev, const char *op, const char *role,
                        int i, const torc_ktensor *kt, size_t size) {
  size_t esize = torc_dtype_size((torc_dtype)kt->dtype);
  if (esize == 0 || kt->ndim < 0 || kt->ndim > TORC_KERNEL_MAX_DIMS)
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: kernel '%s': %s %d has dtype %d "
                                  "and %d dims, which is not a tensor",
                                  dev->index, op, role, i, (int)kt->dtype,
                                  (int)kt->ndim);
  int64_t lo = kt->offset, hi = kt->offset;
  for (int d = 0; d < kt->ndim; d++) {
    if (kt->shape[d] < 0)
      return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                    "sim:%d: kernel '%s': %s %d has size "
                                    "%lld in dim %d",
                                    dev->index, op, role, i,
                                    (long long)kt->shape[d], d);
    if (kt->shape[d] == 0)
      return TORC_OK; /* no element is touched */
    int64_t ext = (kt->shape[d] - 1) * kt->strides[d];
    if (ext > 0)
      hi += ext;
    else
      lo += ext;
  }
  if (lo < 0 || (uint64_t)(hi + 1) * esize > size)
    return sim__g.host->set_error(
        TORC_ERR_INTERNAL,
        "sim:%d: kernel '%s': %s %d reaches elements %lld..%lld of a "
        "%zu-byte buffer of %s, out of bounds",
        dev->index, op, role, i, (long long)lo, (long long)hi, size,
        sim__dtype_name(kt->dtype));
  return TORC_OK;
}

int sim__kernel(const torc_kernel_args *a) {
  const torc_ref_kernel *rk = a->kernel_data;
  sim_device *dev = sim__device(a->device_index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  const char *op = a->op ? a->op : "?";
  if (a->n_in < 0 || a->n_out < 0 || a->n_in > 64 || a->n_out > 64)
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: kernel '%s' called with %d inputs "
                                  "and %d outputs",
                                  dev->index, op, (int)a->n_in, (int)a->n_out);
  if (a->params != NULL && a->params_size == 0)
    return sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: kernel '%s' got params but "
                                  "params_size 0: the sim device copies the "
                                  "params to run them later and needs their "
                                  "size",
                                  dev->index, op);
  size_t n = (size_t)a->n_in + (size_t)a->n_out;
  size_t params_size = a->params ? a->params_size : 0;
  size_t off_kt = align16(sizeof(sim_task));
  size_t off_params = align16(off_kt + n * sizeof(torc_ktensor));
  size_t off_op = off_params + params_size;
  size_t total = off_op + strlen(op) + 1;
  sim_task *t = calloc(1, total);
  if (t == NULL)
    return sim__g.host->set_error(TORC_ERR_OOM,
                                  "sim:%d: out of host memory queueing kernel "
                                  "'%s'",
                                  dev->index, op);
  char *base = (char *)t;
  torc_ktensor *kt = (torc_ktensor *)(base + off_kt);
  if (a->n_in)
    memcpy(kt, a->in, sizeof *kt * (size_t)a->n_in);
  if (a->n_out)
    memcpy(kt + a->n_in, a->out, sizeof *kt * (size_t)a->n_out);
  /* Handles become host pointers now, on the caller's thread: a tensor
   * freed later is freed in stream order, after this kernel ran. */
  int st = TORC_OK;
  pthread_mutex_lock(&dev->mu);
  for (size_t i = 0; i < n && st == TORC_OK; i++) {
    const char *role = i < (size_t)a->n_in ? "input" : "output";
    int k = (int)(i < (size_t)a->n_in ? i : i - (size_t)a->n_in);
    char *buf;
    size_t size;
    if (kt[i].data == NULL) {
      st = sim__g.host->set_error(TORC_ERR_INTERNAL,
                                  "sim:%d: kernel '%s': %s %d has no memory",
                                  dev->index, op, role, k);
      break;
    }
    st = sim__resolve_locked(dev, kt[i].data, &buf, &size);
    if (st == TORC_OK)
      st = check_extent(dev, op, role, k, &kt[i], size);
    if (st == TORC_OK)
      kt[i].data = buf;
  }
  pthread_mutex_unlock(&dev->mu);
  if (st != TORC_OK) {
    free(t);
    return st;
  }
  t->kind = SIM_TASK_KERNEL;
  t->fn = rk->fn;
  size_t have =
      a->struct_size < sizeof t->args ? a->struct_size : sizeof t->args;
  memcpy(&t->args, a, have);
  t->args.struct_size = sizeof t->args;
  t->args.in = kt;
  t->args.out = kt + a->n_in;
  t->args.params = NULL;
  t->args.params_size = params_size;
  if (params_size) {
    memcpy(base + off_params, a->params, params_size);
    t->args.params = base + off_params;
  }
  memcpy(base + off_op, op, strlen(op) + 1);
  t->args.op = base + off_op;
  t->args.kernel_data = NULL; /* as the ref plugin registers them */
  t->inject_fail = sim__g.fail_op[0] && strcmp(sim__g.fail_op, op) == 0;
  sim_stream *s = &dev->def;
  if (TORC_HAS_SLOT(a, torc_kernel_args, stream) && a->stream &&
      (s = sim__stream_of(dev, a->stream)) == NULL) {
    free(t);
    return TORC_ERR_DEVICE;
  }
  sim__enqueue_on(s, t);
  return TORC_OK;
}
