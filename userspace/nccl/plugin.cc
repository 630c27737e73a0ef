// SPDX-License-Identifier: Apache-2.0
// NCCL CollNet plugin over libinc's C API (docs/nccl.md). NCCL's proxy
// thread posts collectives with iallreduce/iallgather/ireducescatter and
// polls them with test(); libinc's collectives block, so each communicator
// has one worker thread that runs the posted requests in order (libinc needs
// the same order on every rank, which NCCL's posting order gives).
#include <inc/inc.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collnet_abi.h"
#include "log.h"

namespace {

incinNcclLogger g_logger = nullptr;

#define INCIN_LOG(level, ...) IncinNcclLog(g_logger, "NET/incin", level, __FILE__, __LINE__, __VA_ARGS__)

// A setting through libinc's table (inc.h inc_setting_string: the INCIN_
// name, or its old INC_ name with a deprecation warning). False, with a
// warning naming the variable and its value, when it does not parse.
bool setting(const char* name, std::string* out) {
  const char* v = nullptr;
  if (inc_setting_string(name, &v) != INC_OK) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "%s", inc_last_error());
    return false;
  }
  *out = v ? v : "";
  return true;
}

std::string setting_or(const char* name, const char* fallback) {
  std::string v;
  return setting(name, &v) && !v.empty() ? v : fallback;
}

// INCIN_REQUIRE_OFFLOAD: where the plugin would let NCCL fall back to its
// own algorithms (no AM, a type or op the switch does not reduce, a group
// that could not form), it fails with the reason instead.
incinNcclResult required_offload_error(const char* what, const char* reason) {
  INCIN_LOG(INCIN_NCCL_LOG_WARN,
            "INCIN_REQUIRE_OFFLOAD is set: %s would fall back to NCCL's own algorithms (reason=%s)", what,
            reason);
  return incinNcclSystemError;
}

incinNcclResult map_status(inc_status st) {
  switch (st) {
    case INC_OK: return incinNcclSuccess;
    case INC_INVALID_ARGUMENT:
    case INC_OUT_OF_RANGE: return incinNcclInvalidArgument;
    case INC_FAILED_PRECONDITION:
    case INC_UNIMPLEMENTED:
    case INC_PERMISSION_DENIED:
    case INC_UNAUTHENTICATED:
    case INC_ALREADY_EXISTS:
    case INC_NOT_FOUND: return incinNcclInvalidUsage;
    case INC_UNAVAILABLE:
    case INC_DEADLINE_EXCEEDED:
    case INC_ABORTED:
    case INC_DATA_LOSS:
    case INC_CANCELLED: return incinNcclRemoteError;
    case INC_RESOURCE_EXHAUSTED: return incinNcclSystemError;
    default: return incinNcclInternalError;
  }
}

// What listen() writes into NCCL's 128-byte handle. Every rank writes one;
// connect() takes the AM address and job id from rank 0's, so that a job id
// that rank 0 made up (no INCIN_JOB_ID) reaches every rank.
constexpr char kMagic[8] = {'i', 'n', 'c', 'i', 'n', 'C', 'N', '1'};
struct Handle {
  char magic[8];
  uint32_t version;
  uint32_t pid;
  uint64_t nonce;
  char am_address[48];
  char job_id[56];
};
static_assert(sizeof(Handle) == INCIN_NCCL_NET_HANDLE_MAXSIZE,
              "the handle must fill NCCL's 128 bytes exactly");

struct ListenComm {
  Handle handle;
};

struct MemHandle {
  void* data;
  size_t size;
};

enum class Kind { kAllreduce, kAllgather, kReduceScatter };

struct Request {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;  // elements per rank (allreduce: all of them)
  inc_datatype dtype;
  inc_op op;
  size_t bytes;               // what test() reports
  std::atomic<int> state{0};  // 0 posted, 1 done, 2 failed
  inc_status status = INC_OK;
  std::string error;
};

struct CollComm {
  inc_comm* comm = nullptr;
  uint32_t rank = 0, size = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Request*> queue;
  bool stop = false;
  std::thread worker;
  std::atomic<int> in_flight{0};

  void run() {
    for (;;) {
      Request* r;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        r = queue.front();
        queue.pop_front();
      }
      inc_status st = INC_OK;
      switch (r->kind) {
        case Kind::kAllreduce: st = inc_allreduce(comm, r->send, r->recv, r->count, r->dtype, r->op); break;
        case Kind::kAllgather: st = inc_allgather(comm, r->send, r->recv, r->count, r->dtype); break;
        case Kind::kReduceScatter:
          st = inc_reduce_scatter(comm, r->send, r->recv, r->count, r->dtype, r->op);
          break;
      }
      if (st != INC_OK) {
        r->status = st;
        r->error = inc_last_error();
      }
      r->state.store(st == INC_OK ? 1 : 2, std::memory_order_release);
    }
  }
};

std::atomic<int> g_listens{0};
std::string g_iface;
std::string g_pci_path;
int g_speed_mbps = 10000;

bool to_inc(incinNcclDataType t, incinNcclRedOp op, inc_datatype* dt, inc_op* iop) {
  switch (op) {
    case incinNcclSum: *iop = INC_SUM; break;
    case incinNcclMin: *iop = INC_MIN; break;
    case incinNcclMax: *iop = INC_MAX; break;
    default: return false;
  }
  switch (t) {
    case incinNcclInt32: *dt = INC_INT32; return true;
    case incinNcclInt64: *dt = INC_INT64; return true;
    // Two's complement addition gives unsigned sums the same bits; min and
    // max would order them as signed, so those stay off.
    case incinNcclUint32: *dt = INC_INT32; return op == incinNcclSum;
    case incinNcclUint64: *dt = INC_INT64; return op == incinNcclSum;
    case incinNcclFloat16: *dt = INC_FLOAT16; return true;
    case incinNcclBfloat16: *dt = INC_BFLOAT16; return true;
    case incinNcclFloat32: *dt = INC_FLOAT32; return true;
    case incinNcclFloat64: *dt = INC_FLOAT64; return true;
    default: return false;
  }
}

size_t dtype_bytes(inc_datatype t) {
  switch (t) {
    case INC_INT64:
    case INC_FLOAT64: return 8;
    case INC_FLOAT16:
    case INC_BFLOAT16: return 2;
    default: return 4;
  }
}

// ------------------------------------------------------------ entry points

incinNcclResult plugin_init(incinNcclLogger logger) {
  g_logger = logger;
  g_iface = setting_or("INCIN_IFACE", "eth0");
  g_pci_path.clear();
  char path[PATH_MAX], real[PATH_MAX];
  snprintf(path, sizeof path, "/sys/class/net/%s/device", g_iface.c_str());
  if (realpath(path, real)) g_pci_path = real;
  snprintf(path, sizeof path, "/sys/class/net/%s/speed", g_iface.c_str());
  g_speed_mbps = 10000;  // a veth reports no speed
  if (FILE* f = fopen(path, "r")) {
    int s = 0;
    if (fscanf(f, "%d", &s) == 1 && s > 0) g_speed_mbps = s;
    fclose(f);
  }
  INCIN_LOG(INCIN_NCCL_LOG_INFO, "libinc %s, interface %s, AM %s%s", inc_version(), g_iface.c_str(),
            setting_or("INCIN_AM", "(unset)").c_str(), inc_require_offload() ? ", offload required" : "");
  return incinNcclSuccess;
}

incinNcclResult plugin_devices(int* ndev) {
  if (!ndev) return incinNcclInvalidArgument;
  *ndev = 1;
  return incinNcclSuccess;
}

template <typename P>
incinNcclResult fill_common(int dev, P* props) {
  if (!props) return incinNcclInvalidArgument;
  if (dev != 0) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "getProperties: no device %d (there is one)", dev);
    return incinNcclInvalidArgument;
  }
  memset(props, 0, sizeof *props);
  props->name = const_cast<char*>("incin");
  props->pciPath = g_pci_path.empty() ? nullptr : const_cast<char*>(g_pci_path.c_str());
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of the interface name
  for (char c : g_iface) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  props->guid = h;
  props->ptrSupport = INCIN_NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->speed = g_speed_mbps;
  props->port = 1;
  props->latency = 0;
  // libinc holds one group per process and interface (its XDP/AF_XDP socket
  // binds the interface), so one communicator at a time.
  props->maxComms = 1;
  props->maxRecvs = 1;
  props->netDeviceType = 0;
  props->netDeviceVersion = 0;
  return incinNcclSuccess;
}

incinNcclResult plugin_get_properties_v8(int dev, incinNcclProps_v8* props) {
  return fill_common(dev, props);
}

incinNcclResult plugin_get_properties_v9(int dev, incinNcclProps_v9* props) {
  incinNcclResult r = fill_common(dev, props);
  if (r != incinNcclSuccess) return r;
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = 0;  // no point-to-point here
  props->maxCollBytes = size_t{1} << 30;
  return incinNcclSuccess;
}

incinNcclResult plugin_listen(int dev, void* opaque, void** listen_comm) {
  if (!opaque || !listen_comm) return incinNcclInvalidArgument;
  if (dev != 0) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "listen: no device %d", dev);
    return incinNcclInvalidArgument;
  }
  std::string am_setting;
  if (!setting("INCIN_AM", &am_setting)) return incinNcclInvalidArgument;
  if (am_setting.empty()) {
    if (inc_require_offload()) return required_offload_error("CollNet", "no_group: INCIN_AM is not set");
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "listen: INCIN_AM (host:port of incamd) is not set");
    return incinNcclInvalidUsage;
  }
  const char* am = am_setting.c_str();
  Handle h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = 1;
  h.pid = static_cast<uint32_t>(getpid());
  std::random_device rd;
  h.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  std::string job, cred;
  if (!setting("INCIN_JOB_ID", &job) || !setting("INCIN_JOB_CREDENTIAL", &cred))
    return incinNcclInvalidArgument;
  if (job.empty() && !cred.empty()) {
    // The launcher's job is the credential's (text that is no credential
    // names none: libinc refuses it when the group is joined).
    const char* named = nullptr;
    if (inc_credential_job(cred.c_str(), &named) == INC_OK) job = named;
  }
  if (job.empty()) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char buf[56];
    snprintf(buf, sizeof buf, "nccl-%.20s-%08x", host, static_cast<unsigned>(h.nonce));
    job = buf;
  }
  int n = g_listens.fetch_add(1);
  // A second communicator of this process needs a group of its own; under
  // mTLS the credential names one job, so that one is refused by the AM.
  if (n > 0) job += "-c" + std::to_string(n);
  if (strlen(am) >= sizeof h.am_address || job.size() >= sizeof h.job_id) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN,
              "listen: INCIN_AM (%zu chars, max %zu) or job id (%zu chars, max %zu) too long", strlen(am),
              sizeof h.am_address - 1, job.size(), sizeof h.job_id - 1);
    return incinNcclInvalidArgument;
  }
  memcpy(h.am_address, am, strlen(am));
  memcpy(h.job_id, job.data(), job.size());
  memcpy(opaque, &h, sizeof h);
  auto* l = new ListenComm;
  l->handle = h;
  *listen_comm = l;
  return incinNcclSuccess;
}

incinNcclResult plugin_connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) {
  if (!handles || !coll_comm || !listen_comm || nranks <= 0 || rank < 0 || rank >= nranks) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "connect: bad arguments (nranks %d, rank %d)", nranks, rank);
    return incinNcclInvalidArgument;
  }
  *coll_comm = nullptr;
  Handle h0;
  for (int i = 0; i < nranks; i++) {
    Handle h;
    if (!handles[i]) return incinNcclInvalidArgument;
    memcpy(&h, handles[i], sizeof h);
    if (memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != 1) {
      INCIN_LOG(INCIN_NCCL_LOG_WARN, "connect: handle of rank %d is not an incin handle of version 1", i);
      return incinNcclInvalidUsage;
    }
    h.am_address[sizeof h.am_address - 1] = 0;
    h.job_id[sizeof h.job_id - 1] = 0;
    if (i == 0) {
      h0 = h;
    } else if (strcmp(h.am_address, h0.am_address) != 0) {
      INCIN_LOG(INCIN_NCCL_LOG_WARN, "connect: rank %d names AM %s, rank 0 %s: using rank 0's", i,
                h.am_address, h0.am_address);
    }
  }
  std::string iface = setting_or("INCIN_IFACE", "eth0");
  std::string transport;
  uint64_t join_ms = 0, op_ms = 0;
  // Bad values are refused here, before anything joins, naming the variable.
  if (!setting("INCIN_TRANSPORT", &transport) ||
      inc_setting_uint("INCIN_JOIN_TIMEOUT_MS", &join_ms) != INC_OK ||
      inc_setting_uint("INCIN_OP_TIMEOUT_MS", &op_ms) != INC_OK) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "connect: %s", inc_last_error());
    return incinNcclInvalidArgument;
  }
  inc_comm_config c;
  inc_comm_config_init(&c);
  c.am_address = h0.am_address;
  c.job_id = h0.job_id;
  c.rank = static_cast<uint32_t>(rank);
  c.world_size = static_cast<uint32_t>(nranks);
  c.iface = iface.c_str();
  c.transport = transport.c_str();
  c.join_timeout_ms = static_cast<uint32_t>(join_ms);
  // How long a collective waits without progress for the slowest rank
  // before it fails (and the AM fails the tree, so every rank's collectives
  // fail); 0 or unset: libinc's default.
  c.op_timeout_ms = static_cast<uint32_t>(op_ms);
  inc_comm* comm = nullptr;
  inc_status st = inc_comm_create(&c, &comm);
  if (st != INC_OK) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "connect: joining job %s as rank %d of %d at %s on %s failed: %s (%s)",
              c.job_id, rank, nranks, c.am_address, c.iface, inc_status_name(st), inc_last_error());
    if (inc_require_offload()) return required_offload_error("CollNet", "no_group: joining the group failed");
    return map_status(st);
  }
  auto* cc = new CollComm;
  cc->comm = comm;
  cc->rank = inc_comm_rank(comm);
  cc->size = inc_comm_size(comm);
  cc->worker = std::thread([cc] { cc->run(); });
  INCIN_LOG(INCIN_NCCL_LOG_INFO, "joined job %s as rank %u of %u (AM %s, %s)", c.job_id, cc->rank, cc->size,
            c.am_address, c.iface);
  *coll_comm = cc;
  return incinNcclSuccess;
}

incinNcclResult plugin_reduce_support(incinNcclDataType t, incinNcclRedOp op, int* supported) {
  if (!supported) return incinNcclInvalidArgument;
  inc_datatype dt;
  inc_op iop;
  *supported = to_inc(t, op, &dt, &iop) ? 1 : 0;
  if (!*supported && inc_require_offload()) {
    char what[96];
    snprintf(what, sizeof what, "a reduction of datatype %d with op %d", static_cast<int>(t),
             static_cast<int>(op));
    return required_offload_error(what, "unsupported_type_op");
  }
  return incinNcclSuccess;
}

incinNcclResult plugin_reg_mr(void* /*coll_comm*/, void* data, size_t size, int type, void** mhandle) {
  if (!mhandle) return incinNcclInvalidArgument;
  *mhandle = nullptr;
  if (type != INCIN_NCCL_PTR_HOST) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN,
              "regMr: memory type %d refused: incin reduces host memory only (NCCL_PTR_HOST)", type);
    return incinNcclInvalidArgument;
  }
  // libinc copies from and to the buffer itself; the handle only records it.
  *mhandle = new MemHandle{data, size};
  return incinNcclSuccess;
}

incinNcclResult plugin_reg_mr_dmabuf(void*, void*, size_t, int type, uint64_t, int, void** mhandle) {
  if (mhandle) *mhandle = nullptr;
  INCIN_LOG(INCIN_NCCL_LOG_WARN, "regMrDmaBuf: memory type %d refused: incin reduces host memory only", type);
  return incinNcclInvalidUsage;
}

incinNcclResult plugin_dereg_mr(void*, void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return incinNcclSuccess;
}

incinNcclResult post(void* coll_comm, Request* r, void** request) {
  auto* cc = static_cast<CollComm*>(coll_comm);
  {
    std::lock_guard<std::mutex> lock(cc->mu);
    cc->queue.push_back(r);
  }
  cc->in_flight.fetch_add(1);
  cc->cv.notify_one();
  *request = r;
  return incinNcclSuccess;
}

incinNcclResult plugin_iallreduce_sz(void* coll_comm, void* send, void* recv, size_t count,
                                     incinNcclDataType t, incinNcclRedOp op, void*, void*, void** request) {
  if (!coll_comm || !request) return incinNcclInvalidArgument;
  *request = nullptr;
  inc_datatype dt;
  inc_op iop;
  if (!to_inc(t, op, &dt, &iop)) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "iallreduce: datatype %d with op %d is not reduced by incin", t, op);
    return incinNcclInvalidArgument;
  }
  auto* r = new Request;
  r->kind = Kind::kAllreduce;
  r->send = send;
  r->recv = recv;
  r->count = count;
  r->dtype = dt;
  r->op = iop;
  r->bytes = count * dtype_bytes(dt);
  if (count == 0) {
    // Every rank posts the same count, so every rank skips it alike.
    r->state.store(1, std::memory_order_release);
    *request = r;
    return incinNcclSuccess;
  }
  return post(coll_comm, r, request);
}

incinNcclResult plugin_iallreduce_v8(void* coll_comm, void* send, void* recv, int count, incinNcclDataType t,
                                     incinNcclRedOp op, void* sm, void* rm, void** request) {
  if (count < 0) return incinNcclInvalidArgument;
  return plugin_iallreduce_sz(coll_comm, send, recv, static_cast<size_t>(count), t, op, sm, rm, request);
}

// NCCL's windowed allgather/reduce-scatter: the call covers bytes
// [windowOffset, windowOffset + windowBytes) of the whole (nranks x
// bytesPerRank) buffer. libinc's collectives move whole buffers, so only the
// window that is the whole buffer, in one part, is taken.
template <typename SGE>
incinNcclResult plugin_iallgather(void* coll_comm, void* send, int nparts, SGE* parts, size_t bytes_per_rank,
                                  size_t window_offset, size_t window_bytes, void*, void** request) {
  if (!coll_comm || !request || !parts) return incinNcclInvalidArgument;
  *request = nullptr;
  auto* cc = static_cast<CollComm*>(coll_comm);
  size_t all = bytes_per_rank * cc->size;
  if (nparts != 1 || window_offset != 0 || window_bytes != all || parts[0].size != all ||
      bytes_per_rank % 4 != 0) {
    INCIN_LOG(
        INCIN_NCCL_LOG_WARN,
        "iallgather: only a whole buffer in one part of 4-byte multiples is supported (parts %d, window "
        "%zu+%zu of %zu)",
        nparts, window_offset, window_bytes, all);
    return incinNcclInvalidUsage;
  }
  auto* r = new Request;
  r->kind = Kind::kAllgather;
  r->send = send;
  r->recv = parts[0].address;
  r->count = bytes_per_rank / 4;
  r->dtype = INC_INT32;  // allgather moves bytes: the type only sets the element size
  r->op = INC_SUM;
  r->bytes = all;
  return post(coll_comm, r, request);
}

template <typename SGE>
incinNcclResult plugin_ireducescatter(void* coll_comm, int nparts, SGE* parts, void* recv,
                                      size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                      incinNcclDataType t, incinNcclRedOp op, void*, void** request) {
  if (!coll_comm || !request || !parts) return incinNcclInvalidArgument;
  *request = nullptr;
  auto* cc = static_cast<CollComm*>(coll_comm);
  inc_datatype dt;
  inc_op iop;
  if (!to_inc(t, op, &dt, &iop)) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "ireducescatter: datatype %d with op %d is not reduced by incin", t, op);
    return incinNcclInvalidArgument;
  }
  size_t all = bytes_per_rank * cc->size;
  if (nparts != 1 || window_offset != 0 || window_bytes != all || parts[0].size != all ||
      bytes_per_rank % dtype_bytes(dt) != 0) {
    INCIN_LOG(
        INCIN_NCCL_LOG_WARN,
        "ireducescatter: only a whole buffer in one part is supported (parts %d, window %zu+%zu of %zu)",
        nparts, window_offset, window_bytes, all);
    return incinNcclInvalidUsage;
  }
  auto* r = new Request;
  r->kind = Kind::kReduceScatter;
  r->send = parts[0].address;
  r->recv = recv;
  r->count = bytes_per_rank / dtype_bytes(dt);
  r->dtype = dt;
  r->op = iop;
  r->bytes = bytes_per_rank;
  return post(coll_comm, r, request);
}

incinNcclResult plugin_iflush(void*, void*, int, void*, void** request) {
  // Host memory: what libinc wrote is visible already. NCCL treats a NULL
  // request as one that finished.
  if (request) *request = nullptr;
  return incinNcclSuccess;
}

incinNcclResult plugin_test(void* request, int* done, int* size) {
  if (!request || !done) return incinNcclInvalidArgument;
  auto* r = static_cast<Request*>(request);
  int s = r->state.load(std::memory_order_acquire);
  if (s == 0) {
    *done = 0;
    return incinNcclSuccess;
  }
  *done = 1;
  if (size) *size = r->bytes > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(r->bytes);
  incinNcclResult res = incinNcclSuccess;
  if (s == 2) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "collective of %zu bytes failed: %s (%s)", r->bytes,
              inc_status_name(r->status), r->error.c_str());
    res = map_status(r->status);
  }
  delete r;
  return res;
}

incinNcclResult plugin_close_coll(void* coll_comm) {
  auto* cc = static_cast<CollComm*>(coll_comm);
  if (!cc) return incinNcclSuccess;
  {
    std::lock_guard<std::mutex> lock(cc->mu);
    cc->stop = true;
  }
  cc->cv.notify_one();
  // The worker finishes what was posted first: a rank that left a collective
  // half done would hang the others.
  cc->worker.join();
  inc_comm_destroy(cc->comm);
  delete cc;
  return incinNcclSuccess;
}

incinNcclResult plugin_close_listen(void* listen_comm) {
  delete static_cast<ListenComm*>(listen_comm);
  return incinNcclSuccess;
}

incinNcclResult plugin_make_vdevice(int* d, incinNcclVDeviceProps* props) {
  // One device and nothing to merge: the virtual device is device 0.
  if (!d || !props || props->ndevs != 1 || props->devs[0] != 0) {
    INCIN_LOG(INCIN_NCCL_LOG_WARN, "makeVDevice: only device 0 alone exists");
    return incinNcclInvalidUsage;
  }
  *d = 0;
  return incinNcclSuccess;
}

}  // namespace

extern "C" {

const incinNcclCollNet_v8 ncclCollNetPlugin_v8 = {
    "incin",
    plugin_init,
    plugin_devices,
    plugin_get_properties_v8,
    plugin_listen,
    plugin_connect,
    plugin_reduce_support,
    plugin_reg_mr,
    plugin_reg_mr_dmabuf,
    plugin_dereg_mr,
    plugin_iallreduce_v8,
    plugin_iallgather<incinNcclSGE_v8>,
    plugin_ireducescatter<incinNcclSGE_v8>,
    plugin_iflush,
    plugin_test,
    plugin_close_coll,
    plugin_close_listen,
};

const incinNcclCollNet_v9 ncclCollNetPlugin_v9 = {
    "incin",
    plugin_init,
    plugin_devices,
    plugin_get_properties_v9,
    plugin_listen,
    plugin_connect,
    plugin_reduce_support,
    plugin_reg_mr,
    plugin_reg_mr_dmabuf,
    plugin_dereg_mr,
    plugin_iallreduce_sz,
    plugin_iallgather<incinNcclSGE_v9>,
    plugin_ireducescatter<incinNcclSGE_v9>,
    plugin_iflush,
    plugin_test,
    plugin_close_coll,
    plugin_close_listen,
    plugin_make_vdevice,
};

const incinNcclCollNet_v9 ncclCollNetPlugin_v10 = ncclCollNetPlugin_v9;

}  // extern "C"
