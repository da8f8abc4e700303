/* plugins/sim/sim_events.c — a sim device's events: records and waits are
 * tasks on streams (sim_stream.c runs them), so a stream waits on the
 * device and the host only when it asks (event_synchronize). An event
 * carries the simulated time its last record completed at.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

void sim__event_unref_locked(sim_event *ev) {
  if (--ev->refs > 0)
    return;
  sim_device *dev = ev->dev;
  if (ev->prev)
    ev->prev->next = ev->next;
  else
    dev->events = ev->next;
  if (ev->next)
    ev->next->prev = ev->prev;
  free(ev);
}

/* The live event a handle names, or NULL after host->set_error. */
static sim_event *event_of(void *handle, const char *what) {
  sim_event *ev = handle;
  if (ev == NULL || ev->magic != SIM_EVENT_MAGIC) {
    sim__g.host->set_error(TORC_ERR_INTERNAL,
                           "sim: %s: %p is not a live sim event", what,
                           handle);
    return NULL;
  }
  return ev;
}

int sim__event_new(void *user, int index, void **out) {
  (void)user;
  *out = NULL;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_event *ev = calloc(1, sizeof *ev);
  if (ev == NULL)
    return sim__g.host->set_error(TORC_ERR_OOM,
                                  "sim:%d: out of host memory for an event",
                                  index);
  ev->magic = SIM_EVENT_MAGIC;
  ev->dev = dev;
  ev->refs = 1;
  pthread_mutex_lock(&dev->mu);
  ev->next = dev->events;
  if (dev->events)
    dev->events->prev = ev;
  dev->events = ev;
  pthread_mutex_unlock(&dev->mu);
  *out = ev;
  return TORC_OK;
}

/* Queues a RECORD or WAIT task for ev on s; the target is taken under
 * ev's device lock (a record counts one more). */
static int queue_event_task(sim_stream *s, sim_event *ev, sim_task_kind kind) {
  sim_task *t = calloc(1, sizeof *t);
  if (t == NULL)
    return sim__g.host->set_error(TORC_ERR_OOM,
                                  "sim:%d: out of host memory queueing an "
                                  "event",
                                  s->dev->index);
  t->kind = kind;
  t->event = ev;
  pthread_mutex_lock(&ev->dev->mu);
  t->target = kind == SIM_TASK_RECORD ? ++ev->records : ev->records;
  ev->refs++;
  pthread_mutex_unlock(&ev->dev->mu);
  sim__enqueue_on(s, t);
  return TORC_OK;
}

int sim__event_record(void *user, int index, void *event, void *stream) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_event *ev = event_of(event, "event_record");
  sim_stream *s = ev ? sim__stream_of(dev, stream) : NULL;
  if (s == NULL)
    return TORC_ERR_INTERNAL;
  if (ev->dev != dev)
    return sim__g.host->set_error(TORC_ERR_DEVICE,
                                  "sim:%d: event_record of an event of "
                                  "sim:%d; record it on a stream of its own "
                                  "device",
                                  index, ev->dev->index);
  return queue_event_task(s, ev, SIM_TASK_RECORD);
}

int sim__stream_wait_event(void *user, int index, void *stream, void *event) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  sim_event *ev = event_of(event, "stream_wait_event");
  sim_stream *s = ev ? sim__stream_of(dev, stream) : NULL;
  if (s == NULL)
    return TORC_ERR_INTERNAL;
  pthread_mutex_lock(&ev->dev->mu);
  int never = ev->records == 0;
  pthread_mutex_unlock(&ev->dev->mu);
  if (never) /* never recorded: complete, as in CUDA */
    return TORC_OK;
  return queue_event_task(s, ev, SIM_TASK_WAIT);
}

int sim__event_query(void *user, int index, void *event) {
  (void)user;
  (void)index;
  sim_event *ev = event_of(event, "event_query");
  if (ev == NULL)
    return TORC_ERR_INTERNAL;
  pthread_mutex_lock(&ev->dev->mu);
  int done = ev->done >= ev->records;
  pthread_mutex_unlock(&ev->dev->mu);
  return done ? TORC_OK : TORC_EVENT_NOT_READY;
}

int sim__event_synchronize(void *user, int index, void *event) {
  (void)user;
  (void)index;
  sim_event *ev = event_of(event, "event_synchronize");
  if (ev == NULL)
    return TORC_ERR_INTERNAL;
  sim_device *dev = ev->dev;
  pthread_mutex_lock(&dev->mu);
  uint64_t target = ev->records;
  while (ev->done < target)
    pthread_cond_wait(&dev->idle, &dev->mu);
  pthread_mutex_unlock(&dev->mu);
  return sim__report_sticky(dev);
}

void sim__event_free(void *user, int index, void *event) {
  (void)user;
  (void)index;
  if (!sim__g.live)
    return;
  sim_event *ev = event_of(event, "event_free");
  if (ev == NULL) {
    sim__g.host->log(TORC_LOG_ERROR, "sim: event_free of %p, which is no "
                     "live event (double free?); ignored", event);
    return;
  }
  sim_device *dev = ev->dev;
  pthread_mutex_lock(&dev->mu);
  ev->magic = 0;
  sim__event_unref_locked(ev);
  pthread_mutex_unlock(&dev->mu);
}
