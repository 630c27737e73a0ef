// SPDX-License-Identifier: Apache-2.0
/* Drives libnccl-net-incin.so through NCCL's CollNet ABI as NCCL's proxy
 * would, one process per rank: dlopen + dlsym of the versioned symbol, init
 * with a logger, devices, getProperties, listen, an out-of-band exchange of
 * the listen handles (files in a directory every rank sees, as NCCL's
 * bootstrap all-gather would), connect, regMr, several iallreduce requests
 * in flight, test() until done, then every element checked; deregMr,
 * closeColl, closeListen. Prints "<n> wrong" and exits 0 only when n is 0.
 *
 *   nccl_collnet_harness --plugin SO --am HOST:PORT --job JOB --rank R --world N --iface IF --dir DIR
 *                        [--version 8|9|10]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../collnet_abi.h"

static int g_rank;

static void logger(incinNcclLogLevel level, unsigned long flags, const char* file, int line, const char* fmt,
                   ...) {
  va_list ap;
  (void)flags;
  fprintf(stderr, "rank %d [%s %s:%d] ", g_rank, level == INCIN_NCCL_LOG_WARN ? "WARN" : "INFO", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(call)                                                              \
  do {                                                                           \
    incinNcclResult r_ = (call);                                                 \
    if (r_ != incinNcclSuccess) {                                                \
      fprintf(stderr, "rank %d: %s failed: ncclResult %d\n", g_rank, #call, r_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* The entry points the harness uses, the same for every ABI version but for
 * iallreduce's count type (int in v8, size_t after). */
struct api {
  int version;
  const incinNcclCollNet_v8* v8;
  const incinNcclCollNet_v9* v9;
};

static incinNcclResult api_iallreduce(const struct api* a, void* comm, void* send, void* recv, size_t count,
                                      incinNcclDataType t, incinNcclRedOp op, void* sm, void* rm,
                                      void** req) {
  if (a->v8) return a->v8->iallreduce(comm, send, recv, (int)count, t, op, sm, rm, req);
  return a->v9->iallreduce(comm, send, recv, count, t, op, sm, rm, req);
}
#define API(a, f) ((a)->v8 ? (void*)(a)->v8->f : (void*)(a)->v9->f)

/* Rank r's handle goes to DIR/handle.r (written to a temporary name and
 * renamed, so a reader never sees half of it); then every rank reads all. */
static void exchange(const char* dir, const char* tag, int rank, int world, const void* mine, size_t size,
                     void* all) {
  char path[512], tmp[520];
  FILE* f;
  int i;
  double deadline = now_s() + 120;
  snprintf(path, sizeof path, "%s/%s.%d", dir, tag, rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "wb");
  if (!f || fwrite(mine, 1, size, f) != size || fclose(f) != 0 || rename(tmp, path) != 0) {
    fprintf(stderr, "rank %d: cannot write %s: %s\n", rank, path, strerror(errno));
    exit(1);
  }
  for (i = 0; i < world; i++) {
    snprintf(path, sizeof path, "%s/%s.%d", dir, tag, i);
    for (;;) {
      f = fopen(path, "rb");
      if (f) {
        size_t got = fread((char*)all + (size_t)i * size, 1, size, f);
        fclose(f);
        if (got == size) break;
      }
      if (now_s() > deadline) {
        fprintf(stderr, "rank %d: no %s from rank %d after 120 s\n", rank, tag, i);
        exit(1);
      }
      usleep(10000);
    }
  }
}

static uint32_t rng_state;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

static uint64_t fnv(const void* p, size_t n) {
  const unsigned char* b = p;
  uint64_t h = 1469598103934665603ULL;
  size_t i;
  for (i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* One posted request and what its result must be. */
struct job {
  const char* what;
  size_t count;
  incinNcclDataType type;
  incinNcclRedOp op;
  void* send;
  void* recv;
  void* smh;
  void* rmh;
  void* req;
  int done;
};

int main(int argc, char** argv) {
  const char *plugin = NULL, *am = NULL, *job_id = NULL, *iface = "eth0", *dir = NULL;
  int rank = -1, world = 0, version = 8, a, i;
  void* lib;
  struct api api = {0, NULL, NULL};
  char sym[64];
  int ndev = 0, supported = 0;
  char handle[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  char* handles_buf;
  void** handles;
  void *listen_comm = NULL, *coll = NULL;
  long wrong = 0, checks = 0;
  /* nothing (completes without the switch), 1 element, a few packets, an
   * odd tail (not a multiple of any packet size), 1 MiB of elements */
  static const size_t sizes[] = {0, 1, 1000, 100003, 1 << 18};
  enum { NSIZES = sizeof sizes / sizeof sizes[0] };
  double t0, t_connect, t_ops;

  for (a = 1; a + 1 < argc; a += 2) {
    if (!strcmp(argv[a], "--plugin"))
      plugin = argv[a + 1];
    else if (!strcmp(argv[a], "--am"))
      am = argv[a + 1];
    else if (!strcmp(argv[a], "--job"))
      job_id = argv[a + 1];
    else if (!strcmp(argv[a], "--rank"))
      rank = atoi(argv[a + 1]);
    else if (!strcmp(argv[a], "--world"))
      world = atoi(argv[a + 1]);
    else if (!strcmp(argv[a], "--iface"))
      iface = argv[a + 1];
    else if (!strcmp(argv[a], "--dir"))
      dir = argv[a + 1];
    else if (!strcmp(argv[a], "--version"))
      version = atoi(argv[a + 1]);
    else
      break;
  }
  if (a != argc || !plugin || !am || !job_id || rank < 0 || world <= 0 || rank >= world || !dir ||
      (version != 8 && version != 9 && version != 10)) {
    fprintf(stderr,
            "usage: %s --plugin SO --am HOST:PORT --job JOB --rank R --world N --iface IF --dir DIR "
            "[--version 8|9|10]\n",
            argv[0]);
    return 2;
  }
  g_rank = rank;
  /* The plugin's configuration is its environment, as under NCCL. */
  setenv("INCIN_AM", am, 1);
  setenv("INCIN_JOB_ID", job_id, 1);
  setenv("INCIN_IFACE", iface, 1);

  lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", plugin, dlerror());
    return 1;
  }
  snprintf(sym, sizeof sym, "ncclCollNetPlugin_v%d", version);
  api.version = version;
  if (version == 8)
    api.v8 = dlsym(lib, sym);
  else
    api.v9 = dlsym(lib, sym);
  if (!api.v8 && !api.v9) {
    fprintf(stderr, "dlsym %s: %s\n", sym, dlerror());
    return 1;
  }

  {
    incinNcclResult (*init)(incinNcclLogger) = API(&api, init);
    incinNcclResult (*devices)(int*) = API(&api, devices);
    CHECK(init(logger));
    CHECK(devices(&ndev));
  }
  if (ndev != 1) {
    fprintf(stderr, "devices: %d, want 1\n", ndev);
    return 1;
  }
  if (api.v8) {
    incinNcclProps_v8 p;
    CHECK(api.v8->getProperties(0, &p));
    printf("rank %d: %s v8: name %s ptrSupport %d speed %d maxComms %d\n", rank, sym, p.name, p.ptrSupport,
           p.speed, p.maxComms);
    if (strcmp(p.name, "incin") || p.ptrSupport != INCIN_NCCL_PTR_HOST) wrong++;
  } else {
    incinNcclProps_v9 p;
    CHECK(api.v9->getProperties(0, &p));
    printf("rank %d: %s: name %s ptrSupport %d speed %d maxComms %d maxCollBytes %zu\n", rank, sym, p.name,
           p.ptrSupport, p.speed, p.maxComms, p.maxCollBytes);
    if (strcmp(p.name, "incin") || p.ptrSupport != INCIN_NCCL_PTR_HOST) wrong++;
  }
  {
    incinNcclResult (*reduce_support)(incinNcclDataType, incinNcclRedOp, int*) = API(&api, reduceSupport);
    CHECK(reduce_support(incinNcclFloat32, incinNcclSum, &supported));
    if (!supported) wrong++;
    CHECK(reduce_support(incinNcclInt32, incinNcclSum, &supported));
    if (!supported) wrong++;
  }

  t0 = now_s();
  memset(handle, 0, sizeof handle);
  {
    incinNcclResult (*listen)(int, void*, void**) = API(&api, listen);
    CHECK(listen(0, handle, &listen_comm));
  }
  handles_buf = malloc((size_t)world * sizeof handle);
  handles = malloc((size_t)world * sizeof(void*));
  exchange(dir, "handle", rank, world, handle, sizeof handle, handles_buf);
  for (i = 0; i < world; i++) handles[i] = handles_buf + (size_t)i * sizeof handle;
  {
    incinNcclResult (*connect)(void**, int, int, void*, void**) = API(&api, connect);
    CHECK(connect(handles, world, rank, listen_comm, &coll));
  }
  t_connect = now_s() - t0;

  /* For every size, four requests posted before any test(): int32 SUM
   * (exact), float32 SUM of exact values, float32 SUM of random values (the
   * same bits on every rank), int32 MAX in place. */
  t0 = now_s();
  {
    incinNcclResult (*reg)(void*, void*, size_t, int, void**) = API(&api, regMr);
    incinNcclResult (*dereg)(void*, void*) = API(&api, deregMr);
    incinNcclResult (*test)(void*, int*, int*) = API(&api, test);
    incinNcclResult (*iflush)(void*, void*, int, void*, void**) = API(&api, iflush);
    uint64_t hashes[NSIZES];
    size_t s;
    for (s = 0; s < NSIZES; s++) {
      size_t n = sizes[s], k;
      struct job jobs[4];
      int32_t *is = malloc(n * 4 + 4), *ir = malloc(n * 4 + 4), *im = malloc(n * 4 + 4);
      float *fs = malloc(n * 4 + 4), *fr = malloc(n * 4 + 4), *gs = malloc(n * 4 + 4),
            *gr = malloc(n * 4 + 4);
      int pending = 4, spins = 0;
      void* flush_req = (void*)1;
      int32_t tri = world * (world + 1) / 2;
      rng_state = 0x9e3779b9u ^ (uint32_t)(rank * 7919 + 1);
      for (k = 0; k < n; k++) {
        int32_t base = (int32_t)(k % 1000) - 500;
        is[k] = (rank + 1) * base;
        fs[k] = (float)is[k] * 0.25f;
        gs[k] = (float)((int32_t)(rng() % 2000001) - 1000000) * 1e-3f;
        im[k] = (int32_t)((k * 2654435761u + (size_t)rank * 40503u) % 100000);
        ir[k] = fr[k] = gr[k] = -1;
      }
      jobs[0] = (struct job){"int32 sum", n, incinNcclInt32, incinNcclSum, is, ir, NULL, NULL, NULL, 0};
      jobs[1] = (struct job){"float32 sum", n, incinNcclFloat32, incinNcclSum, fs, fr, NULL, NULL, NULL, 0};
      jobs[2] =
          (struct job){"float32 sum random", n, incinNcclFloat32, incinNcclSum, gs, gr, NULL, NULL, NULL, 0};
      jobs[3] =
          (struct job){"int32 max in place", n, incinNcclInt32, incinNcclMax, im, im, NULL, NULL, NULL, 0};
      for (i = 0; i < 4; i++) {
        CHECK(reg(coll, jobs[i].send, n * 4, INCIN_NCCL_PTR_HOST, &jobs[i].smh));
        CHECK(reg(coll, jobs[i].recv, n * 4, INCIN_NCCL_PTR_HOST, &jobs[i].rmh));
        CHECK(api_iallreduce(&api, coll, jobs[i].send, jobs[i].recv, n, jobs[i].type, jobs[i].op, jobs[i].smh,
                             jobs[i].rmh, &jobs[i].req));
        if (!jobs[i].req) {
          fprintf(stderr, "rank %d: iallreduce %s gave no request\n", rank, jobs[i].what);
          return 1;
        }
      }
      while (pending > 0) {
        for (i = 0; i < 4; i++) {
          int done = 0, size = -1;
          if (jobs[i].done) continue;
          CHECK(test(jobs[i].req, &done, &size));
          if (!done) continue;
          jobs[i].done = 1;
          pending--;
          checks++;
          if ((size_t)size != n * 4) {
            fprintf(stderr, "rank %d: %s of %zu: test reported %d bytes\n", rank, jobs[i].what, n, size);
            wrong++;
          }
        }
        if (pending && ++spins % 1000 == 0) usleep(100);
      }
      CHECK(iflush(coll, fr, (int)(n * 4), jobs[1].rmh, &flush_req));
      if (flush_req) wrong++;
      for (k = 0; k < n; k++) {
        int32_t base = (int32_t)(k % 1000) - 500, want_max = 0;
        int r;
        for (r = 0; r < world; r++) {
          int32_t v = (int32_t)((k * 2654435761u + (size_t)r * 40503u) % 100000);
          if (r == 0 || v > want_max) want_max = v;
        }
        wrong += ir[k] != tri * base;
        wrong += fr[k] != (float)(tri * base) * 0.25f;
        wrong += im[k] != want_max;
        checks += 3;
      }
      {
        /* float32 sums of random values: each rank's stream again, summed
         * in double; and the same bits on every rank (hash exchange). */
        double* ref = calloc(n + 1, sizeof(double));
        int r;
        for (r = 0; r < world; r++) {
          rng_state = 0x9e3779b9u ^ (uint32_t)(r * 7919 + 1);
          for (k = 0; k < n; k++) ref[k] += (double)((float)((int32_t)(rng() % 2000001) - 1000000) * 1e-3f);
        }
        for (k = 0; k < n; k++) {
          double err = fabs((double)gr[k] - ref[k]);
          /* Block fixed point: the error scales with the block's largest
           * magnitude (up to 1000 per rank), not with the element's. */
          if (err > 1e-5 * (fabs(ref[k]) + 1000.0 * world)) {
            if (wrong < 10)
              fprintf(stderr, "rank %d: float random sum [%zu] = %.9g, double reference %.9g\n", rank, k,
                      gr[k], ref[k]);
            wrong++;
          }
          checks++;
        }
        free(ref);
        hashes[s] = fnv(gr, n * 4);
      }
      for (i = 0; i < 4; i++) {
        CHECK(dereg(coll, jobs[i].smh));
        CHECK(dereg(coll, jobs[i].rmh));
      }
      printf(
          "rank %d: %zu elements: int32 sum, float32 sum, float32 random sum, int32 max in place: checked\n",
          rank, n);
      free(is);
      free(ir);
      free(im);
      free(fs);
      free(fr);
      free(gs);
      free(gr);
    }
    t_ops = now_s() - t0;
    {
      /* The same bits on every rank: compare the hashes of the random sums. */
      uint64_t* all = malloc((size_t)world * sizeof hashes);
      int r;
      exchange(dir, "fhash", rank, world, hashes, sizeof hashes, all);
      for (r = 0; r < world; r++)
        for (s = 0; s < NSIZES; s++) {
          if (all[(size_t)r * NSIZES + s] != hashes[s]) {
            fprintf(stderr, "rank %d: float32 random sum of %zu elements differs from rank %d's\n", rank,
                    sizes[s], r);
            wrong++;
          }
          checks++;
        }
      free(all);
    }
    {
      /* iallgather and ireducescatter over the whole buffer in one part (what
       * the plugin takes); a partial window is refused with a reason. */
      enum { M = 1001 };
      size_t per = M * 4, all = per * (size_t)world, k;
      int32_t* ag_send = malloc(per);
      int32_t* ag_recv = malloc(all);
      int32_t* rs_send = malloc(all);
      int32_t* rs_recv = malloc(per);
      int32_t tri = world * (world + 1) / 2;
      void *req_ag = NULL, *req_rs = NULL, *req_bad = (void*)1;
      int done_ag = 0, done_rs = 0, size = 0, r;
      incinNcclResult bad;
      for (k = 0; k < M; k++) ag_send[k] = rank * 100000 + (int32_t)k;
      for (k = 0; k < (size_t)world * M; k++) rs_send[k] = (rank + 1) * (int32_t)k;
      memset(ag_recv, 0xff, all);
      memset(rs_recv, 0xff, per);
      if (api.v8) {
        incinNcclSGE_v8 ag = {NULL, ag_recv, (uint32_t)all}, rs = {NULL, rs_send, (uint32_t)all};
        incinNcclSGE_v8 half = {NULL, ag_recv, (uint32_t)(all / 2)};
        CHECK(api.v8->iallgather(coll, ag_send, 1, &ag, per, 0, all, NULL, &req_ag));
        CHECK(api.v8->ireducescatter(coll, 1, &rs, rs_recv, per, 0, all, incinNcclInt32, incinNcclSum, NULL,
                                     &req_rs));
        bad = api.v8->iallgather(coll, ag_send, 1, &half, per, all / 2, all / 2, NULL, &req_bad);
      } else {
        incinNcclSGE_v9 ag = {NULL, ag_recv, all}, rs = {NULL, rs_send, all}, half = {NULL, ag_recv, all / 2};
        CHECK(api.v9->iallgather(coll, ag_send, 1, &ag, per, 0, all, NULL, &req_ag));
        CHECK(api.v9->ireducescatter(coll, 1, &rs, rs_recv, per, 0, all, incinNcclInt32, incinNcclSum, NULL,
                                     &req_rs));
        bad = api.v9->iallgather(coll, ag_send, 1, &half, per, all / 2, all / 2, NULL, &req_bad);
      }
      if (bad != incinNcclInvalidUsage || req_bad) wrong++;
      checks++;
      {
        incinNcclResult (*test)(void*, int*, int*) = API(&api, test);
        while (!done_ag || !done_rs) {
          if (!done_ag) {
            CHECK(test(req_ag, &done_ag, &size));
            if (done_ag && (size_t)size != all) wrong++;
          }
          if (!done_rs) {
            CHECK(test(req_rs, &done_rs, &size));
            if (done_rs && (size_t)size != per) wrong++;
          }
        }
      }
      for (r = 0; r < world; r++)
        for (k = 0; k < M; k++) wrong += ag_recv[(size_t)r * M + k] != r * 100000 + (int32_t)k;
      for (k = 0; k < M; k++) wrong += rs_recv[k] != tri * (int32_t)((size_t)rank * M + k);
      checks += (long)world * M + M + 2;
      printf("rank %d: iallgather and ireducescatter of %d int32 per rank: checked\n", rank, (int)M);
      free(ag_send);
      free(ag_recv);
      free(rs_send);
      free(rs_recv);
    }
    {
      /* The library's net plugin (point-to-point, what NCCL's rings and
       * bootstrap-free p2p use): each rank sends to the next, receives from
       * the previous, two messages in flight (one of an odd size). */
      const incinNcclNet_v8* net = dlsym(lib, "ncclNetPlugin_v8");
      char nh[INCIN_NCCL_NET_HANDLE_MAXSIZE];
      char* nhs = malloc((size_t)world * sizeof nh);
      void *nlisten = NULL, *nsend = NULL, *nrecv = NULL, *dev = NULL, *mh = NULL;
      enum { BIG = (1 << 20) + 3 };
      unsigned char *out = malloc(BIG), *in = malloc(BIG + 64);
      int next = (rank + 1) % world, prev = (rank + world - 1) % world, k2, tries;
      void *sreq[2], *rreq[2];
      int msz[2] = {BIG, 17};
      if (!net) {
        fprintf(stderr, "rank %d: no ncclNetPlugin_v8 in the plugin\n", rank);
        return 1;
      }
      CHECK(net->init(logger));
      memset(nh, 0, sizeof nh);
      CHECK(net->listen(0, nh, &nlisten));
      exchange(dir, "nethandle", rank, world, nh, sizeof nh, nhs);
      CHECK(net->connect(0, nhs + (size_t)next * sizeof nh, &nsend, &dev));
      for (tries = 0; !nrecv && tries < 30000; tries++) {
        CHECK(net->accept(nlisten, &nrecv, &dev));
        if (!nrecv) usleep(1000);
      }
      if (!nsend || !nrecv) {
        fprintf(stderr, "rank %d: net connect/accept did not complete\n", rank);
        return 1;
      }
      CHECK(net->regMr(nsend, out, BIG, INCIN_NCCL_PTR_HOST, &mh));
      for (k2 = 0; k2 < BIG; k2++) out[k2] = (unsigned char)(k2 * 7 + rank * 13);
      /* The big message lands at in + 64, the small one at in (posted in
       * that order, as the sends). */
      for (i = 0; i < 2; i++) {
        void* d = i == 0 ? in + 64 : in;
        int cap = i == 0 ? BIG : 64, tag = 100 + i;
        CHECK(net->irecv(nrecv, 1, &d, &cap, &tag, &mh, &rreq[i]));
        CHECK(net->isend(nsend, out, msz[i], 100 + i, mh, &sreq[i]));
      }
      for (i = 0; i < 2; i++) {
        int done = 0, size = -1;
        while (!done) CHECK(net->test(sreq[i], &done, &size));
        done = 0;
        while (!done) CHECK(net->test(rreq[i], &done, &size));
        if (size != msz[i]) wrong++;
        if (i == 0) {
          for (k2 = 0; k2 < BIG; k2++) wrong += in[64 + k2] != (unsigned char)(k2 * 7 + prev * 13);
        } else {
          for (k2 = 0; k2 < 17; k2++) wrong += in[k2] != (unsigned char)(k2 * 7 + prev * 13);
        }
        checks += msz[i] + 1;
      }
      CHECK(net->deregMr(nsend, mh));
      CHECK(net->closeSend(nsend));
      CHECK(net->closeRecv(nrecv));
      CHECK(net->closeListen(nlisten));
      printf("rank %d: ncclNetPlugin_v8 (%s): %d + 17 bytes to rank %d, from rank %d: checked\n", rank,
             net->name, (int)BIG, next, prev);
      free(nhs);
      free(out);
      free(in);
    }
    {
      /* A CUDA buffer is refused. */
      void* mh = (void*)1;
      if (reg(coll, handle, sizeof handle, INCIN_NCCL_PTR_CUDA, &mh) == incinNcclSuccess || mh) wrong++;
      checks++;
    }
  }
  {
    incinNcclResult (*close_coll)(void*) = API(&api, closeColl);
    incinNcclResult (*close_listen)(void*) = API(&api, closeListen);
    CHECK(close_coll(coll));
    CHECK(close_listen(listen_comm));
  }
  printf("rank %d of %d: %s, connect %.2f s, %d sizes x 4 requests in %.2f s, %ld checks: %ld wrong\n", rank,
         world, sym, t_connect, (int)NSIZES, t_ops, checks, wrong);
  free(handles);
  free(handles_buf);
  dlclose(lib);
  return wrong ? 1 : 0;
}
