/* plugins/cuda/cuda.c — the cuda plugin: device type "cuda" on the CUDA
 * runtime (a default stream per device plus CUDA streams and events
 * through the core's stream API, memory cached by the core's block
 * allocator, pinned host memory, asynchronous errors named by the op that
 * launched them), its entry point and init. Kernels: ew.cu. With NCCL,
 * the "nccl" communicator (nccl.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "kerr.h"

int (*torc_cuda__set_error)(int status, const char *fmt, ...) = NULL;

#define LAST_OP_MAX 64

typedef struct cuda_dev {
  cudaStream_t stream; /* NULL until first use */
  char last_op[LAST_OP_MAX];
  void *ws;       /* the workspace (torc_cuda__workspace), grown on demand */
  size_t ws_size;
  torc_cuda_kerr *kerr; /* kernels' data errors (kerr.h), mapped pinned
                         * memory; NULL until first asked for */
  torc_cuda_kerr *kerr_dev; /* the same record as the device sees it */
} cuda_dev;

static struct {
  int count;
  cudaError_t count_err; /* why count is 0, when the runtime said */
  int sync_each;         /* TORC_CUDA_SYNC=1 */
  cuda_dev *devs;
  pthread_mutex_t lock; /* stream creation, last_op */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* "cudaErrorMemoryAllocation: out of memory": the name and the runtime's
 * sentence, for messages. */
static void err_text(cudaError_t e, char *buf, size_t size) {
  snprintf(buf, size, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

static int set_device(int index) {
  cudaError_t e = cudaSetDevice(index);
  if (e == cudaSuccess)
    return TORC_OK;
  char t[256];
  err_text(e, t, sizeof t);
  return torc_cuda__set_error(TORC_ERR_DEVICE,
                              "cuda:%d: cannot make the device current "
                              "(cudaSetDevice: %s)",
                              index, t);
}

cudaStream_t torc_cuda__stream(int index) {
  if (index < 0 || index >= g.count) {
    torc_cuda__set_error(TORC_ERR_DEVICE,
                         "cuda:%d does not exist (%d CUDA device%s)", index,
                         g.count, g.count == 1 ? "" : "s");
    return NULL;
  }
  if (set_device(index) != TORC_OK)
    return NULL;
  cuda_dev *d = &g.devs[index];
  pthread_mutex_lock(&g.lock);
  if (d->stream == NULL) {
    /* Non-blocking: the legacy default stream (cudaMemcpy, cudaMemset
     * without a stream) does not serialise against it. */
    cudaError_t e = cudaStreamCreateWithFlags(&d->stream,
                                              cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      pthread_mutex_unlock(&g.lock);
      char t[256];
      err_text(e, t, sizeof t);
      torc_cuda__set_error(TORC_ERR_DEVICE,
                           "cuda:%d: cannot create a stream "
                           "(cudaStreamCreateWithFlags: %s)",
                           index, t);
      d->stream = NULL;
      return NULL;
    }
  }
  cudaStream_t s = d->stream;
  pthread_mutex_unlock(&g.lock);
  return s;
}

cudaStream_t torc_cuda__kstream(const torc_kernel_args *args) {
  cudaStream_t s = torc_cuda__stream(args->device_index);
  if (s != NULL && TORC_HAS_SLOT(args, torc_kernel_args, stream) &&
      args->stream != NULL)
    s = (cudaStream_t)args->stream;
  return s;
}

/* Kernel workspace. From a core of ABI 1.8 on it is the core's
 * kernel_scratch: blocks of the caching allocator on the call's stream,
 * taken back when the call returns. An older core has no such slot; then
 * one buffer per device, grown to the largest request and kept, serves
 * (ws_lock held from the request to torc_cuda__workspace_done so that two
 * host threads never queue work on the same bytes at once). */
static int (*core_scratch)(size_t nbytes, void **out);
static int (*core_deterministic)(void);

int torc_cuda__deterministic(void) {
  return torc_cuda__settings.deterministic ||
         (core_deterministic != NULL && core_deterministic());
}
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;

int torc_cuda__workspace(const torc_kernel_args *a, size_t nbytes,
                         void **out) {
  *out = NULL;
  if (nbytes == 0)
    return TORC_OK;
  if (torc_cuda__kstream(a) == NULL)
    return TORC_ERR_DEVICE;
  if (core_scratch != NULL)
    return core_scratch(nbytes, out);
  cuda_dev *d = &g.devs[a->device_index];
  pthread_mutex_lock(&ws_lock);
  if (d->ws_size < nbytes) {
    if (d->ws != NULL)
      (void)cudaFree(d->ws);
    d->ws = NULL;
    d->ws_size = 0;
    cudaError_t e = cudaMalloc(&d->ws, nbytes);
    if (e != cudaSuccess) {
      d->ws = NULL;
      pthread_mutex_unlock(&ws_lock);
      (void)cudaGetLastError();
      return torc_cuda__set_error(
          TORC_ERR_OOM,
          "cuda:%d: '%s' needs %zu bytes of workspace and the device has "
          "no room (cudaMalloc: %s); use a smaller batch",
          a->device_index, a->op, nbytes, cudaGetErrorString(e));
    }
    d->ws_size = nbytes;
  }
  *out = d->ws;
  return TORC_OK; /* ws_lock stays held until torc_cuda__workspace_done */
}

void torc_cuda__workspace_done(const torc_kernel_args *a, void *ptr) {
  (void)a;
  if (ptr != NULL && core_scratch == NULL)
    pthread_mutex_unlock(&ws_lock);
}

int torc_cuda__kerr(const torc_kernel_args *a, struct torc_cuda_kerr **out) {
  *out = NULL;
  if (torc_cuda__stream(a->device_index) == NULL)
    return TORC_ERR_DEVICE;
  cuda_dev *d = &g.devs[a->device_index];
  pthread_mutex_lock(&g.lock);
  if (d->kerr == NULL) {
    void *p = NULL, *dp = NULL;
    cudaError_t e = cudaHostAlloc(&p, sizeof(torc_cuda_kerr),
                                  cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
      memset(p, 0, sizeof(torc_cuda_kerr));
      e = cudaHostGetDevicePointer(&dp, p, 0);
      if (e != cudaSuccess)
        (void)cudaFreeHost(p);
    }
    if (e != cudaSuccess) {
      pthread_mutex_unlock(&g.lock);
      (void)cudaGetLastError();
      return torc_cuda__set_error(TORC_ERR_DEVICE,
                                  "cuda:%d: '%s' cannot check its indices: "
                                  "no mapped host memory for the error "
                                  "record (%s)",
                                  a->device_index, a->op,
                                  cudaGetErrorString(e));
    }
    d->kerr = p;
    d->kerr_dev = dp;
  }
  *out = d->kerr_dev;
  pthread_mutex_unlock(&g.lock);
  return TORC_OK;
}

/* After a wait on device `index` returned: a data error a kernel recorded
 * (kerr.h) as one message, the record cleared for the next; TORC_OK when
 * there is none. */
static int kerr_check(int index) {
  if (index < 0 || index >= g.count)
    return TORC_OK;
  volatile torc_cuda_kerr *k = g.devs[index].kerr;
  if (k == NULL || k->code == TORC_CUDA_KERR_NONE)
    return TORC_OK;
  if (k->code != TORC_CUDA_KERR_INDEX) /* claimed, still being written */
    return TORC_OK;
  char msg[512];
  torc_cuda_kerr_message(msg, sizeof msg, index,
                         (const char *)(uintptr_t)k->op, k->dim, k->value,
                         k->lo, k->hi, k->element);
  k->code = TORC_CUDA_KERR_NONE;
  return torc_cuda__set_error(TORC_ERR_RANGE, "%s", msg);
}

static void last_op(int index, char *buf, size_t size) {
  pthread_mutex_lock(&g.lock);
  snprintf(buf, size, "%s",
           g.devs[index].last_op[0] ? g.devs[index].last_op : "(none)");
  pthread_mutex_unlock(&g.lock);
}

/* An error that surfaced while waiting on device `index`: the runtime's
 * words, the last op launched (whose kernel, or an earlier one, failed)
 * and how to find the one that did. `what` names the waiting call. */
static int async_error(int index, cudaError_t e, const char *what) {
  char t[256], op[LAST_OP_MAX];
  err_text(e, t, sizeof t);
  last_op(index, op, sizeof op);
  /* cudaGetLastError resets an ordinary error; a sticky one (the context
   * is lost: an illegal address, a trap) stays. */
  (void)cudaGetLastError();
  int sticky = cudaPeekAtLastError() != cudaSuccess;
  return torc_cuda__set_error(
      TORC_ERR_DEVICE,
      "cuda:%d: %s failed: %s; the last op launched was '%s'%s (errors of "
      "asynchronous kernels surface at the next wait: run with "
      "TORC_CUDA_SYNC=1 to stop at the op that failed)",
      index, what, t, op,
      sticky ? "; the error is sticky: the device cannot be used again in "
               "this process"
             : "");
}

int torc_cuda__after_launch(int index, const char *op) {
  pthread_mutex_lock(&g.lock);
  snprintf(g.devs[index].last_op, LAST_OP_MAX, "%s", op);
  pthread_mutex_unlock(&g.lock);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char t[256];
    err_text(e, t, sizeof t);
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda:%d: launching the kernel of '%s' "
                                "failed: %s",
                                index, op, t);
  }
  if (g.sync_each) {
    e = cudaDeviceSynchronize(); /* the kernel's stream, whichever it was */
    if (e != cudaSuccess)
      return async_error(index, e, "the kernel (TORC_CUDA_SYNC=1)");
    return kerr_check(index);
  }
  return TORC_OK;
}

int torc_cuda__register(const torc_host *host, torc_plugin *self,
                        const char *op, int32_t dtype, torc_kernel_fn fn,
                        int32_t priority, uint32_t flags) {
  torc_kernel_reg reg;
  memset(&reg, 0, sizeof reg);
  reg.struct_size = sizeof reg;
  reg.device_type = "cuda";
  reg.op = op;
  reg.dtype = dtype;
  reg.priority = priority;
  reg.fn = fn;
  reg.data = NULL;
  reg.flags = flags;
  return host->register_kernel(self, &reg);
}

/* ---- the device table ---- */

static int dev_count(void *user) {
  (void)user;
  return g.count;
}

static int dev_mem_info(void *user, int index, size_t *free_bytes,
                        size_t *total_bytes) {
  (void)user;
  if (torc_cuda__stream(index) == NULL)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess) {
    char t[256];
    err_text(e, t, sizeof t);
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda:%d: cudaMemGetInfo failed: %s", index,
                                t);
  }
  return TORC_OK;
}

static int dev_alloc(void *user, int index, size_t nbytes, void **out) {
  if (torc_cuda__stream(index) == NULL)
    return TORC_ERR_DEVICE;
  void *p = NULL;
  /* cudaMalloc(0) gives NULL, which reads as a failure: a small block. */
  cudaError_t e = cudaMalloc(&p, nbytes ? nbytes : 256);
  if (e == cudaSuccess) {
    *out = p;
    return TORC_OK;
  }
  (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
  char t[256];
  err_text(e, t, sizeof t);
  size_t fr = 0, tot = 0;
  if (e == cudaErrorMemoryAllocation &&
      dev_mem_info(user, index, &fr, &tot) == TORC_OK)
    return torc_cuda__set_error(
        TORC_ERR_OOM,
        "cuda:%d: out of memory allocating %zu bytes (%.1f MiB): the device "
        "has %.1f MiB free of %.1f MiB (cudaMalloc: %s); use a smaller "
        "batch or model, or free memory other processes hold",
        index, nbytes, nbytes / 1048576.0, fr / 1048576.0, tot / 1048576.0,
        t);
  return torc_cuda__set_error(e == cudaErrorMemoryAllocation
                                  ? TORC_ERR_OOM
                                  : TORC_ERR_DEVICE,
                              "cuda:%d: allocating %zu bytes failed "
                              "(cudaMalloc: %s)",
                              index, nbytes, t);
}

static void dev_free(void *user, int index, void *ptr) {
  (void)user;
  if (ptr == NULL || torc_cuda__stream(index) == NULL)
    return;
  /* cudaFree waits for the device's queued work: stream order holds. With
   * the core's caching allocator it runs only when a segment is released,
   * seldom. */
  (void)cudaFree(ptr);
}

static int dev_copy_from_host(void *user, int index, void *dst,
                              size_t dst_offset, const void *src,
                              size_t nbytes, uint32_t flags) {
  (void)user;
  cudaStream_t s = torc_cuda__stream(index);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  if (nbytes == 0)
    return TORC_OK;
  /* Pinned (TORC_COPY_ASYNC_PINNED): queued, the caller keeps src alive
   * until the next synchronize. Pageable: CUDA copies src to its staging
   * memory before cudaMemcpyAsync returns, so src may be reused at once,
   * as the ABI asks, without waiting for the transfer. */
  (void)flags;
  cudaError_t e = cudaMemcpyAsync((char *)dst + dst_offset, src, nbytes,
                                  cudaMemcpyHostToDevice, s);
  if (e != cudaSuccess)
    return async_error(index, e, "a copy of host memory to the device");
  return TORC_OK;
}

static int dev_copy_to_host(void *user, int index, void *dst, const void *src,
                            size_t src_offset, size_t nbytes) {
  (void)user;
  cudaStream_t s = torc_cuda__stream(index);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaSuccess;
  if (nbytes > 0)
    e = cudaMemcpyAsync(dst, (const char *)src + src_offset, nbytes,
                        cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess)
    e = cudaDeviceSynchronize(); /* the ABI's copy_to_host waits, for every
                                  * stream of the device */
  if (e != cudaSuccess)
    return async_error(index, e, "a copy of device memory to the host");
  return kerr_check(index);
}

static int dev_synchronize(void *user, int index) {
  (void)user;
  cudaStream_t s = torc_cuda__stream(index);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaDeviceSynchronize(); /* every stream of the device */
  if (e != cudaSuccess)
    return async_error(index, e, "synchronize");
  return kerr_check(index);
}

static int dev_host_alloc(void *user, size_t nbytes, void **out) {
  (void)user;
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, nbytes ? nbytes : 64,
                                cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    char t[256];
    err_text(e, t, sizeof t);
    return torc_cuda__set_error(TORC_ERR_OOM,
                                "cannot allocate %zu bytes of pinned host "
                                "memory (cudaHostAlloc: %s); lower the "
                                "data loader's prefetch or pin_memory",
                                nbytes, t);
  }
  *out = p;
  return TORC_OK;
}

static void dev_host_free(void *user, void *ptr) {
  (void)user;
  if (ptr == NULL)
    return;
  /* The queued copies that read ptr run first: wait for every stream of
   * every device in use (cudaFreeHost alone does not promise to). */
  for (int i = 0; i < g.count; i++) {
    pthread_mutex_lock(&g.lock);
    cudaStream_t s = g.devs[i].stream;
    pthread_mutex_unlock(&g.lock);
    if (s != NULL && set_device(i) == TORC_OK)
      (void)cudaDeviceSynchronize();
  }
  (void)cudaFreeHost(ptr);
}

/* ---- streams and events: CUDA's own, one to one ---- */

/* `stream` of device `index`, or its default stream for NULL; NULL after
 * set_error when the device cannot be set up. Makes the device current. */
static cudaStream_t stream_of(int index, void *stream) {
  cudaStream_t s = torc_cuda__stream(index);
  return s != NULL && stream != NULL ? (cudaStream_t)stream : s;
}

static int cuda_call_error(int index, cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  char t[256];
  err_text(e, t, sizeof t);
  return torc_cuda__set_error(e == cudaErrorMemoryAllocation ? TORC_ERR_OOM
                                                             : TORC_ERR_DEVICE,
                              "cuda:%d: %s failed: %s", index, what, t);
}

static int dev_stream_new(void *user, int index, void **out) {
  (void)user;
  if (torc_cuda__stream(index) == NULL)
    return TORC_ERR_DEVICE;
  cudaStream_t s = NULL;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess)
    return cuda_call_error(index, e, "cudaStreamCreateWithFlags");
  *out = s;
  return TORC_OK;
}

static void dev_stream_free(void *user, int index, void *stream) {
  (void)user;
  /* CUDA destroys a stream once its queued work has run. */
  if (stream != NULL && set_device(index) == TORC_OK)
    (void)cudaStreamDestroy((cudaStream_t)stream);
}

static int dev_event_new(void *user, int index, void **out) {
  (void)user;
  if (torc_cuda__stream(index) == NULL)
    return TORC_ERR_DEVICE;
  cudaEvent_t ev = NULL;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e != cudaSuccess)
    return cuda_call_error(index, e, "cudaEventCreateWithFlags");
  *out = ev;
  return TORC_OK;
}

static int dev_event_record(void *user, int index, void *event,
                            void *stream) {
  (void)user;
  cudaStream_t s = stream_of(index, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaEventRecord((cudaEvent_t)event, s);
  return e == cudaSuccess ? TORC_OK
                          : async_error(index, e, "cudaEventRecord");
}

static int dev_stream_wait_event(void *user, int index, void *stream,
                                 void *event) {
  (void)user;
  cudaStream_t s = stream_of(index, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaStreamWaitEvent(s, (cudaEvent_t)event, 0);
  return e == cudaSuccess ? TORC_OK
                          : async_error(index, e, "cudaStreamWaitEvent");
}

static int dev_event_query(void *user, int index, void *event) {
  (void)user;
  if (set_device(index) != TORC_OK)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess)
    return TORC_OK;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return TORC_EVENT_NOT_READY;
  }
  return async_error(index, e, "cudaEventQuery");
}

static int dev_event_synchronize(void *user, int index, void *event) {
  (void)user;
  if (set_device(index) != TORC_OK)
    return TORC_ERR_DEVICE;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
  return e == cudaSuccess ? kerr_check(index)
                          : async_error(index, e, "waiting for an event");
}

static void dev_event_free(void *user, int index, void *event) {
  (void)user;
  if (event != NULL && set_device(index) == TORC_OK)
    (void)cudaEventDestroy((cudaEvent_t)event);
}

static int dev_copy_to_host_async(void *user, int index, void *dst,
                                  const void *src, size_t src_offset,
                                  size_t nbytes, void *stream) {
  (void)user;
  cudaStream_t s = stream_of(index, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  if (nbytes == 0)
    return TORC_OK;
  cudaError_t e = cudaMemcpyAsync(dst, (const char *)src + src_offset, nbytes,
                                  cudaMemcpyDeviceToHost, s);
  return e == cudaSuccess
             ? TORC_OK
             : async_error(index, e, "a queued copy of device memory to the "
                                     "host");
}

static int dev_copy_device_to_device(void *user, int dst_index, void *dst,
                                     size_t dst_offset, int src_index,
                                     const void *src, size_t src_offset,
                                     size_t nbytes, void *stream) {
  (void)user;
  if (dst_index < 0 || dst_index >= g.count)
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda:%d does not exist (%d CUDA device%s)",
                                dst_index, g.count, g.count == 1 ? "" : "s");
  cudaStream_t s = stream_of(src_index, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  if (nbytes == 0)
    return TORC_OK;
  char *d = (char *)dst + dst_offset;
  const char *from = (const char *)src + src_offset;
  /* Between two GPUs the runtime goes peer to peer where it can, through
   * the host where it cannot. */
  cudaError_t e =
      dst_index == src_index
          ? cudaMemcpyAsync(d, from, nbytes, cudaMemcpyDeviceToDevice, s)
          : cudaMemcpyPeerAsync(d, dst_index, from, src_index, nbytes, s);
  return e == cudaSuccess ? TORC_OK
                          : async_error(src_index, e,
                                        "a copy between devices");
}

static int dev_copy_from_host_async(void *user, int index, void *dst,
                                    size_t dst_offset, const void *src,
                                    size_t nbytes, uint32_t flags,
                                    void *stream) {
  (void)user, (void)flags;
  cudaStream_t s = stream_of(index, stream);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  if (nbytes == 0)
    return TORC_OK;
  cudaError_t e = cudaMemcpyAsync((char *)dst + dst_offset, src, nbytes,
                                  cudaMemcpyHostToDevice, s);
  return e == cudaSuccess
             ? TORC_OK
             : async_error(index, e, "a queued copy of host memory to the "
                                     "device");
}

static int dev_describe(void *user, int index, char *buf, size_t size) {
  (void)user;
  struct cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) {
    char t[256];
    err_text(e, t, sizeof t);
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda:%d: cudaGetDeviceProperties failed: %s",
                                index, t);
  }
  snprintf(buf, size, "cuda:%d %s (compute capability %d.%d, %.1f GiB, %d "
                      "SMs)",
           index, p.name, p.major, p.minor,
           (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
           p.multiProcessorCount);
  return TORC_OK;
}

static int dev_no_device_reason(void *user, char *buf, size_t size) {
  (void)user;
  if (g.count_err != cudaSuccess)
    snprintf(buf, size,
             "no CUDA device was found (cudaGetDeviceCount: %s, %s); "
             "install or update the NVIDIA driver, or run on the CPU "
             "instead: --set device.type=cpu",
             cudaGetErrorString(g.count_err), cudaGetErrorName(g.count_err));
  else
    snprintf(buf, size,
             "no CUDA device was found (cudaGetDeviceCount: no device); "
             "check CUDA_VISIBLE_DEVICES, or run on the CPU instead: --set "
             "device.type=cpu");
  return TORC_OK;
}

static void dev_shutdown(void *user) {
  (void)user;
  for (int i = 0; i < g.count; i++)
    if (g.devs[i].stream != NULL) {
      (void)cudaSetDevice(i);
      if (g.devs[i].ws != NULL)
        (void)cudaFree(g.devs[i].ws);
      g.devs[i].ws = NULL;
      g.devs[i].ws_size = 0;
      if (g.devs[i].kerr != NULL)
        (void)cudaFreeHost(g.devs[i].kerr);
      g.devs[i].kerr = g.devs[i].kerr_dev = NULL;
      (void)cudaStreamDestroy(g.devs[i].stream);
      g.devs[i].stream = NULL;
    }
}

static const torc_device_ops cuda_ops = {
    .struct_size = sizeof(torc_device_ops),
    .type = "cuda",
    .user = NULL,
    .count = dev_count,
    .alloc = dev_alloc,
    .free = dev_free,
    .copy_from_host = dev_copy_from_host,
    .copy_to_host = dev_copy_to_host,
    .synchronize = dev_synchronize,
    .host_alloc = dev_host_alloc,
    .host_free = dev_host_free,
    .describe = dev_describe,
    .shutdown = dev_shutdown,
    .flags = TORC_DEVICE_CACHING,
    .mem_info = dev_mem_info,
    .stream_new = dev_stream_new,
    .stream_free = dev_stream_free,
    .event_new = dev_event_new,
    .event_record = dev_event_record,
    .stream_wait_event = dev_stream_wait_event,
    .event_query = dev_event_query,
    .event_synchronize = dev_event_synchronize,
    .event_free = dev_event_free,
    .copy_to_host_async = dev_copy_to_host_async,
    .copy_device_to_device = dev_copy_device_to_device,
    .copy_from_host_async = dev_copy_from_host_async,
    .no_device_reason = dev_no_device_reason,
};

/* ---- init ---- */

static void cuda_fini(torc_plugin *self) {
  (void)self;
  torc_cuda__blas_shutdown();
  torc_cuda__dnn_shutdown();
  dev_shutdown(NULL);
  free(g.devs);
  g.devs = NULL;
  g.count = 0;
}

static int cuda_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, num_threads) || !host->set_error ||
      !host->register_device || !host->register_kernel)
    return TORC_ERR_ABI; /* no way to report more: the core names us */
  torc_cuda__set_error = host->set_error;
  core_scratch = TORC_HAS_SLOT(host, torc_host, kernel_scratch)
                     ? host->kernel_scratch
                     : NULL;
  core_deterministic =
      TORC_HAS_SLOT(host, torc_host, deterministic_algorithms)
          ? host->deterministic_algorithms
          : NULL;
  int st = torc_cuda__read_keys(host, self);
  if (st != TORC_OK)
    return st;
  const char *sync = getenv("TORC_CUDA_SYNC");
  g.sync_each = sync != NULL && strcmp(sync, "1") == 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  g.count_err = cudaSuccess;
  if (e != cudaSuccess) {
    /* No driver, an old one, no device: the type exists with 0 devices,
     * and the runtime's words are kept for the message. */
    g.count_err = e;
    n = 0;
    (void)cudaGetLastError();
  }
  g.count = n;
  g.devs = n > 0 ? calloc((size_t)n, sizeof *g.devs) : NULL;
  if (n > 0 && g.devs == NULL)
    return host->set_error(TORC_ERR_OOM, "cuda: out of host memory");
  if (host->log && n == 0)
    host->log(TORC_LOG_INFO, "cuda: 0 devices (cudaGetDeviceCount: %s)",
              e != cudaSuccess ? cudaGetErrorString(e) : "no device");
  st = host->register_device(self, &cuda_ops);
  if (st == TORC_OK)
    st = torc_cuda__register_ew(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_blas(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_reduce(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_ew2(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_dnn(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_index(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_nn(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_optim(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_rand(host, self);
  if (st == TORC_OK)
    st = torc_cuda__register_tiled_mm(host, self);
#ifdef TORC_HAVE_NCCL
  /* The "nccl" communicator, on a core that takes communicators (1.9). */
  if (st == TORC_OK && TORC_HAS_SLOT(host, torc_host, register_comm))
    st = torc_cuda__register_nccl(host, self);
#endif
  if (st != TORC_OK)
    cuda_fini(self);
  return st;
}

/* Built with NCCL, the plugin also provides the "nccl" communicator. */
#ifdef TORC_HAVE_NCCL
#define CUDA_PROVIDES_COMM TORC_PROVIDES_COMM
#else
#define CUDA_PROVIDES_COMM 0
#endif

static const torc_plugin_info cuda_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "cuda",
    .version = "0.1.0",
    .description = "NVIDIA GPUs through the CUDA runtime: device type cuda "
                   "(cached memory, pinned host memory, streams and "
                   "events), its kernels on cuBLAS, cuDNN and its own",
    .provides = TORC_PROVIDES_DEVICE | TORC_PROVIDES_KERNELS |
                CUDA_PROVIDES_COMM,
    /* The CUDA runtime does not survive dlclose. */
    .flags = TORC_PLUGIN_NO_UNLOAD,
    .keys = torc_cuda__keys,
    .init = cuda_init,
    .fini = cuda_fini,
    /* ref serves the host side of every op (casts, random init on the cpu
     * before a copy): loaded with it when absent. */
    .requires = (const char *const[]){"ref", NULL},
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);
TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &cuda_info;
}
