/* plugins/sim/sim.c — the sim plugin: a simulated accelerator (device type
 * "sim") whose memory the core cannot dereference, with a memory cap,
 * asynchronous streams and events per device and a simulated clock, and
 * the reference kernels run on its streams. Lets
 * CI test device semantics with no GPU. This file: the entry point, the
 * plugin's keys, init/teardown and the device-level ops.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/ref_kernels.h"
#include "sim_counters.h"
#include "sim_internal.h"

sim_state sim__g;

/* ---- the plugin's keys ---- */

static const torc_plugin_key sim_keys[] = {
    {"devices", "number of simulated devices sim:0 .. sim:N-1 (0 to 64)", "1"},
    {"memory",
     "memory of each device in bytes, with an optional K, M, G or T "
     "(binary) suffix, e.g. 512M or 2G; allocations beyond it fail with "
     "out of memory",
     "1G"},
    {"latency_us",
     "artificial delay before each kernel in microseconds (0 to 60000000), "
     "to make asynchronous execution observable",
     "0"},
    {"kernel_latency_us",
     "simulated duration of each kernel in microseconds (0 to 60000000) on "
     "the device's simulated clock (sim_time_us of its counters); nothing "
     "sleeps",
     "0"},
    {"copy_latency_us",
     "simulated duration of each copy (host to device, device to host, "
     "device to device) in microseconds (0 to 60000000) on the simulated "
     "clock; nothing sleeps",
     "0"},
    {"fail_op",
     "for tests: every launch of this op (e.g. add) fails asynchronously "
     "with a device error reported at the next synchronize; none = off",
     "none"},
    {NULL, NULL, NULL}};

/* A whole number in [lo, hi] from the whole of `s`; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out) {
  if (s == NULL || !isdigit((unsigned char)*s))
    return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* A byte count "N", "NK", "NM", "NG", "NT" (also "NKB", "NKiB", "NB"; any
 * case), binary multiples; > 0. 0 on success. */
static int parse_bytes(const char *s, size_t *out) {
  if (s == NULL || !isdigit((unsigned char)*s))
    return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0)
    return -1;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    shift = 10;
    break;
  case 'M':
    shift = 20;
    break;
  case 'G':
    shift = 30;
    break;
  case 'T':
    shift = 40;
    break;
  default:
    break;
  }
  if (shift) {
    end++;
    if (*end == 'i' || *end == 'I')
      end++;
  }
  if (*end == 'b' || *end == 'B')
    end++;
  if (*end != '\0' || v == 0 || v > (unsigned long long)SIZE_MAX >> shift)
    return -1;
  *out = (size_t)(v << shift);
  return 0;
}

static int config_error(const char *key, const char *value,
                        const char *expected) {
  return sim__g.host->set_error(TORC_ERR_CONFIG,
                                "sim: key '%s' = '%s': expected %s", key,
                                value ? value : "(unset)", expected);
}

static int read_config(const torc_host *host, torc_plugin *self) {
  const char *v = host->config_get(self, "devices");
  long n;
  if (v == NULL)
    v = "1";
  if (parse_long(v, 0, SIM_MAX_DEVICES, &n) != 0)
    return config_error("devices", v, "a number of devices from 0 to 64");
  sim__g.n_devices = (int)n;

  v = host->config_get(self, "memory");
  if (v == NULL)
    v = "1G";
  if (parse_bytes(v, &sim__g.mem_cap) != 0)
    return config_error("memory", v, "a byte count like 512M or 2G");
  snprintf(sim__g.mem_text, sizeof sim__g.mem_text, "%s", v);

  v = host->config_get(self, "latency_us");
  if (v == NULL)
    v = "0";
  if (parse_long(v, 0, 60000000L, &sim__g.latency_us) != 0)
    return config_error("latency_us", v,
                        "microseconds from 0 to 60000000, like 0 or 2000");

  v = host->config_get(self, "kernel_latency_us");
  if (v == NULL)
    v = "0";
  if (parse_long(v, 0, 60000000L, &sim__g.kernel_latency_us) != 0)
    return config_error("kernel_latency_us", v,
                        "microseconds from 0 to 60000000, like 0 or 2000");

  v = host->config_get(self, "copy_latency_us");
  if (v == NULL)
    v = "0";
  if (parse_long(v, 0, 60000000L, &sim__g.copy_latency_us) != 0)
    return config_error("copy_latency_us", v,
                        "microseconds from 0 to 60000000, like 0 or 2000");

  v = host->config_get(self, "fail_op");
  if (v == NULL || strcmp(v, "none") == 0 || v[0] == '\0') {
    sim__g.fail_op[0] = '\0';
  } else {
    size_t len = strlen(v);
    int ok = len < sizeof sim__g.fail_op;
    for (size_t i = 0; i < len && ok; i++)
      ok = isalnum((unsigned char)v[i]) || v[i] == '_';
    if (!ok)
      return config_error("fail_op", v,
                          "an op name like add or matmul, or none");
    memcpy(sim__g.fail_op, v, len + 1);
  }
  return TORC_OK;
}

/* ---- device-level ops ---- */

static int sim_count(void *user) {
  (void)user;
  return sim__g.n_devices;
}

static int sim_synchronize(void *user, int index) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  pthread_mutex_lock(&dev->mu);
  dev->n_syncs++;
  pthread_mutex_unlock(&dev->mu);
  return sim__drain(dev, 1);
}

/* "simulated accelerator, 12.0 MiB of 1.0 GiB in use; 40 kernels, 3
 * copies from pinned memory, 5 staged" (and the tasks pending, if any):
 * the counters let tests see which copy path was taken. */
static int sim_describe(void *user, int index, char *buf, size_t size) {
  (void)user;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return TORC_ERR_DEVICE;
  pthread_mutex_lock(&dev->mu);
  size_t in_use = dev->in_use, pending = dev->pending;
  unsigned long long kernels = dev->n_kernels;
  unsigned long long pinned = dev->n_copies_pinned;
  unsigned long long staged = dev->n_copies_staged;
  pthread_mutex_unlock(&dev->mu);
  char used[32], cap[32], queued[48] = "";
  sim__human_bytes(in_use, used, sizeof used);
  sim__human_bytes(sim__g.mem_cap, cap, sizeof cap);
  if (pending)
    snprintf(queued, sizeof queued, "; %zu task(s) pending", pending);
  snprintf(buf, size,
           "simulated accelerator, %s of %s in use; %llu kernels, %llu "
           "copies from pinned memory, %llu staged%s",
           used, cap, kernels, pinned, staged, queued);
  return TORC_OK;
}

/* Stops the workers and frees everything; safe to call more than once
 * (the device's shutdown slot and the plugin's fini both call it). */
static void teardown(void) {
  if (!sim__g.live)
    return;
  for (int d = 0; d < sim__g.n_devices; d++)
    sim__device_stop(&sim__g.devices[d]);
  free(sim__g.devices);
  sim__free_pins();
  pthread_mutex_destroy(&sim__g.pin_mu);
  torc_ref_set_error = NULL;
  memset(&sim__g, 0, sizeof sim__g);
}

static void sim_shutdown(void *user) {
  (void)user;
  teardown();
}

static void sim_fini(torc_plugin *self) {
  (void)self;
  teardown();
}

static const torc_device_ops sim_ops = {
    .struct_size = sizeof(torc_device_ops),
    .type = "sim",
    .user = &sim__g,
    .count = sim_count,
    .alloc = sim__alloc,
    .free = sim__free,
    .copy_from_host = sim__copy_from_host,
    .copy_to_host = sim__copy_to_host,
    .synchronize = sim_synchronize,
    .host_alloc = sim__host_alloc,
    .host_free = sim__host_free,
    .describe = sim_describe,
    .shutdown = sim_shutdown,
    /* Handles inside an allocation are valid (sim_memory.c). */
    .flags = TORC_DEVICE_CACHING,
    .mem_info = sim__mem_info,
    .stream_new = sim__stream_new,
    .stream_free = sim__stream_free,
    .event_new = sim__event_new,
    .event_record = sim__event_record,
    .stream_wait_event = sim__stream_wait_event,
    .event_query = sim__event_query,
    .event_synchronize = sim__event_synchronize,
    .event_free = sim__event_free,
    .copy_to_host_async = sim__copy_to_host_async,
    .copy_device_to_device = sim__copy_device_to_device,
    .copy_from_host_async = sim__copy_from_host_async,
};

static int sim_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->log || !host->config_get || !host->register_device ||
      !host->register_kernel)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  if (sim__g.live)       /* the same file loaded again under another name */
    return host->set_error(TORC_ERR_PLUGIN,
                           "sim: this plugin is already loaded; its devices "
                           "are process-wide, so load it once (set "
                           "[plugin.sim] devices for more devices)");
  memset(&sim__g, 0, sizeof sim__g);
  sim__g.host = host;
  int st = read_config(host, self);
  if (st != TORC_OK)
    return st;
  if (pthread_mutex_init(&sim__g.pin_mu, NULL) != 0)
    return host->set_error(TORC_ERR_INTERNAL, "sim: cannot create a mutex");
  sim__g.devices = calloc(sim__g.n_devices ? (size_t)sim__g.n_devices : 1,
                          sizeof *sim__g.devices);
  if (sim__g.devices == NULL) {
    pthread_mutex_destroy(&sim__g.pin_mu);
    return host->set_error(TORC_ERR_OOM, "sim: out of host memory");
  }
  int n = sim__g.n_devices;
  sim__g.n_devices = 0; /* counts the started ones until all are */
  sim__g.live = 1;
  for (int d = 0; d < n; d++) {
    st = sim__device_start(&sim__g.devices[d], d);
    if (st != TORC_OK) {
      teardown();
      return st;
    }
    sim__g.n_devices = d + 1;
  }
  torc_ref_set_error = sim__ref_set_error;
  st = host->register_device(self, &sim_ops);
  for (size_t i = 0; st == TORC_OK && i < torc_ref_n_kernels; i++) {
    const torc_ref_kernel *rk = &torc_ref_kernels[i];
    torc_kernel_reg reg = {
        .struct_size = sizeof reg,
        .device_type = "sim",
        .op = rk->op,
        .dtype = rk->dtype,
        .priority = 0,
        .fn = sim__kernel,
        .data = (void *)rk,
        .flags = rk->flags,
    };
    st = host->register_kernel(self, &reg);
  }
  if (st != TORC_OK)
    teardown();
  return st;
}

static const torc_plugin_info sim_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "sim",
    .version = "0.1.0",
    .description = "simulated accelerator: its own memory with a cap, "
                   "asynchronous streams and events, reference kernels",
    .provides = TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS,
    .flags = 0,
    .keys = sim_keys,
    .init = sim_init,
    .fini = sim_fini,
};

TORC_PLUGIN_EXPORT int torc_sim_read_counters(int index, torc_sim_counters *out,
                                         int reset);
TORC_PLUGIN_EXPORT int torc_sim_read_counters(int index, torc_sim_counters *out,
                                         int reset) {
  if (!sim__g.live || out == NULL || out->struct_size < sizeof(size_t))
    return -1;
  sim_device *dev = sim__device(index);
  if (dev == NULL)
    return -1;
  torc_sim_counters c = {.struct_size = sizeof c};
  pthread_mutex_lock(&dev->mu);
  c.kernels = dev->n_kernels;
  c.copies_pinned = dev->n_copies_pinned;
  c.copies_staged = dev->n_copies_staged;
  c.blocking_reads = dev->n_blocking_reads;
  c.synchronizes = dev->n_syncs;
  c.blocking_bytes = dev->n_blocking_bytes;
  c.sim_time_us = dev->sim_time_us;
  c.async_reads = dev->n_async_reads;
  c.copies_d2d = dev->n_d2d;
  pthread_mutex_lock(&sim__g.pin_mu);
  c.host_allocs = sim__g.n_host_allocs;
  if (reset)
    sim__g.n_host_allocs = 0;
  pthread_mutex_unlock(&sim__g.pin_mu);
  if (reset) {
    dev->n_kernels = dev->n_copies_pinned = dev->n_copies_staged = 0;
    dev->n_blocking_reads = dev->n_blocking_bytes = dev->n_syncs = 0;
    dev->n_async_reads = dev->n_d2d = 0;
    dev->sim_time_us = 0;
    for (sim_stream *s = dev->streams; s; s = s->next)
      s->clock_us = 0;
  }
  pthread_mutex_unlock(&dev->mu);
  size_t n = out->struct_size < sizeof c ? out->struct_size : sizeof c;
  memcpy(out, &c, n);
  out->struct_size = n;
  return 0;
}

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &sim_info;
}
