// SPDX-License-Identifier: Apache-2.0
// The point-to-point half of the plugin (ncclNetPlugin_v8): NCCL gives a
// library's CollNet to a communicator only together with that library's net
// plugin, so libnccl-net-incin.so carries one. It is plain TCP over the
// interface libinc uses (INCIN_IFACE): one connection per NCCL send/recv pair,
// a sender and a receiver thread per connection, requests completed in
// posting order. Host memory only.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inc/inc.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "collnet_abi.h"
#include "log.h"

namespace {

incinNcclLogger g_logger = nullptr;
std::string g_iface;

#define NET_LOG(level, ...) IncinNcclLog(g_logger, "NET/incin-tcp", level, __FILE__, __LINE__, __VA_ARGS__)

constexpr char kMagic[8] = {'i', 'n', 'c', 'i', 'n', 'N', 'T', '1'};
struct Handle {
  char magic[8];
  uint32_t addr;  // IPv4, network order
  uint16_t port;  // network order
  uint16_t pad;
};
static_assert(sizeof(Handle) <= INCIN_NCCL_NET_HANDLE_MAXSIZE, "NCCL's handle is 128 bytes");

struct Header {
  int32_t tag;
  int32_t size;
};

struct Request {
  void* data;
  int size;  // send: bytes to send; recv: capacity, then bytes received
  int tag;
  std::atomic<int> state{0};  // 0 posted, 1 done, 2 failed
  std::string error;
};

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct Conn {
  int fd = -1;
  bool sender = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Request*> queue;
  bool stop = false;
  std::thread worker;

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
      bool ok;
      if (sender) {
        Header h{r->tag, r->size};
        ok = write_all(fd, &h, sizeof h) && write_all(fd, r->data, static_cast<size_t>(r->size));
        if (!ok) r->error = std::string("send: ") + strerror(errno);
      } else {
        Header h;
        ok = read_all(fd, &h, sizeof h);
        if (!ok) {
          r->error = "receive: connection closed or failed";
        } else if (h.size > r->size || h.size < 0 || h.tag != r->tag) {
          r->error = "receive: message of " + std::to_string(h.size) + " bytes with tag " +
                     std::to_string(h.tag) + " for a receive of " + std::to_string(r->size) +
                     " bytes with tag " + std::to_string(r->tag);
          ok = false;
        } else {
          ok = read_all(fd, r->data, static_cast<size_t>(h.size));
          if (!ok) r->error = "receive: connection closed in a message";
          r->size = h.size;
        }
      }
      r->state.store(ok ? 1 : 2, std::memory_order_release);
    }
  }

  void post(Request* r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(r);
    }
    cv.notify_one();
  }

  void close_conn() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_one();
    // A receive still waiting for data would never return: the socket's
    // shutdown ends it. Sends are written out first.
    if (!sender) shutdown(fd, SHUT_RDWR);
    worker.join();
    close(fd);
  }
};

struct Listen {
  int fd;
};

Conn* start(int fd, bool sender) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* c = new Conn;
  c->fd = fd;
  c->sender = sender;
  c->worker = std::thread([c] { c->run(); });
  return c;
}

// The IPv4 address of INCIN_IFACE: the network the workers share. Without one
// (no such interface), every address of the host.
uint32_t iface_addr() {
  struct ifaddrs* ifs = nullptr;
  uint32_t addr = htonl(INADDR_ANY);
  if (getifaddrs(&ifs) != 0) return addr;
  for (struct ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && g_iface == i->ifa_name) {
      addr = reinterpret_cast<struct sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      break;
    }
  }
  freeifaddrs(ifs);
  return addr;
}

incinNcclResult net_init(incinNcclLogger logger) {
  g_logger = logger;
  const char* i = nullptr;
  if (inc_setting_string("INCIN_IFACE", &i) != INC_OK) i = nullptr;
  g_iface = i && *i ? i : "eth0";
  return incinNcclSuccess;
}

incinNcclResult net_devices(int* n) {
  if (!n) return incinNcclInvalidArgument;
  *n = 1;
  return incinNcclSuccess;
}

incinNcclResult net_get_properties(int dev, incinNcclProps_v8* p) {
  if (!p || dev != 0) return incinNcclInvalidArgument;
  memset(p, 0, sizeof *p);
  p->name = const_cast<char*>("incin-tcp");
  p->pciPath = nullptr;
  p->guid = 0x696e63696e746370ULL;
  p->ptrSupport = INCIN_NCCL_PTR_HOST;
  p->speed = 10000;
  p->port = 1;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return incinNcclSuccess;
}

incinNcclResult net_listen(int dev, void* opaque, void** listen_comm) {
  if (!opaque || !listen_comm || dev != 0) return incinNcclInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = iface_addr();
  socklen_t len = sizeof sa;
  if (fd < 0 || bind(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<struct sockaddr*>(&sa), &len) != 0) {
    NET_LOG(INCIN_NCCL_LOG_WARN, "listen on %s: %s", g_iface.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return incinNcclSystemError;
  }
  Handle h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, kMagic, sizeof h.magic);
  h.addr = sa.sin_addr.s_addr;
  h.port = sa.sin_port;
  memset(opaque, 0, INCIN_NCCL_NET_HANDLE_MAXSIZE);
  memcpy(opaque, &h, sizeof h);
  *listen_comm = new Listen{fd};
  return incinNcclSuccess;
}

incinNcclResult net_connect(int dev, void* opaque, void** send_comm, void** dev_comm) {
  if (!opaque || !send_comm || dev != 0) return incinNcclInvalidArgument;
  *send_comm = nullptr;
  if (dev_comm) *dev_comm = nullptr;  // no device offload
  Handle h;
  memcpy(&h, opaque, sizeof h);
  if (memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    NET_LOG(INCIN_NCCL_LOG_WARN, "connect: not an incin-tcp handle");
    return incinNcclInvalidUsage;
  }
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = h.addr;
  sa.sin_port = h.port;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // A connect completes once the peer's kernel queued it (listen backlog),
  // not when the peer calls accept(), so it blocks only briefly.
  if (fd < 0 || connect(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa) != 0) {
    char ip[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &h.addr, ip, sizeof ip);
    NET_LOG(INCIN_NCCL_LOG_WARN, "connect to %s:%u: %s", ip, ntohs(h.port), strerror(errno));
    if (fd >= 0) close(fd);
    return incinNcclRemoteError;
  }
  *send_comm = start(fd, true);
  return incinNcclSuccess;
}

incinNcclResult net_accept(void* listen_comm, void** recv_comm, void** dev_comm) {
  if (!listen_comm || !recv_comm) return incinNcclInvalidArgument;
  *recv_comm = nullptr;
  if (dev_comm) *dev_comm = nullptr;
  int fd = accept4(static_cast<Listen*>(listen_comm)->fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    // Not connected yet: NCCL calls accept again.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return incinNcclSuccess;
    NET_LOG(INCIN_NCCL_LOG_WARN, "accept: %s", strerror(errno));
    return incinNcclSystemError;
  }
  *recv_comm = start(fd, false);
  return incinNcclSuccess;
}

incinNcclResult net_reg_mr(void*, void*, size_t, int type, void** mhandle) {
  if (!mhandle) return incinNcclInvalidArgument;
  *mhandle = nullptr;
  if (type != INCIN_NCCL_PTR_HOST) {
    NET_LOG(INCIN_NCCL_LOG_WARN, "regMr: memory type %d refused: host memory only", type);
    return incinNcclInvalidArgument;
  }
  // Sockets copy from and to the buffer: nothing to register.
  *mhandle = reinterpret_cast<void*>(uintptr_t{1});
  return incinNcclSuccess;
}

incinNcclResult net_reg_mr_dmabuf(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  if (mhandle) *mhandle = nullptr;
  NET_LOG(INCIN_NCCL_LOG_WARN, "regMrDmaBuf refused: host memory only");
  return incinNcclInvalidUsage;
}

incinNcclResult net_dereg_mr(void*, void*) {
  return incinNcclSuccess;
}

incinNcclResult net_isend(void* send_comm, void* data, int size, int tag, void*, void** request) {
  if (!send_comm || !request || size < 0) return incinNcclInvalidArgument;
  auto* r = new Request;
  r->data = data;
  r->size = size;
  r->tag = tag;
  static_cast<Conn*>(send_comm)->post(r);
  *request = r;
  return incinNcclSuccess;
}

incinNcclResult net_irecv(void* recv_comm, int n, void** data, int* sizes, int* tags, void**,
                          void** request) {
  if (!recv_comm || !request || !data || !sizes || !tags) return incinNcclInvalidArgument;
  if (n != 1) {
    NET_LOG(INCIN_NCCL_LOG_WARN, "irecv: %d grouped receives (maxRecvs is 1)", n);
    return incinNcclInvalidUsage;
  }
  auto* r = new Request;
  r->data = data[0];
  r->size = sizes[0];
  r->tag = tags[0];
  static_cast<Conn*>(recv_comm)->post(r);
  *request = r;
  return incinNcclSuccess;
}

incinNcclResult net_iflush(void*, int, void**, int*, void**, void** request) {
  if (request) *request = nullptr;  // host memory: nothing to flush
  return incinNcclSuccess;
}

incinNcclResult net_test(void* request, int* done, int* sizes) {
  if (!request || !done) return incinNcclInvalidArgument;
  auto* r = static_cast<Request*>(request);
  int s = r->state.load(std::memory_order_acquire);
  if (s == 0) {
    *done = 0;
    return incinNcclSuccess;
  }
  *done = 1;
  if (sizes) sizes[0] = r->size;
  incinNcclResult res = incinNcclSuccess;
  if (s == 2) {
    NET_LOG(INCIN_NCCL_LOG_WARN, "%s", r->error.c_str());
    res = incinNcclRemoteError;
  }
  delete r;
  return res;
}

incinNcclResult net_close(void* comm) {
  auto* c = static_cast<Conn*>(comm);
  if (!c) return incinNcclSuccess;
  c->close_conn();
  delete c;
  return incinNcclSuccess;
}

incinNcclResult net_close_listen(void* listen_comm) {
  auto* l = static_cast<Listen*>(listen_comm);
  if (!l) return incinNcclSuccess;
  close(l->fd);
  delete l;
  return incinNcclSuccess;
}

}  // namespace

extern "C" {

const incinNcclNet_v8 ncclNetPlugin_v8 = {
    "incin-tcp", net_init,   net_devices,       net_get_properties, net_listen,       net_connect,
    net_accept,  net_reg_mr, net_reg_mr_dmabuf, net_dereg_mr,       net_isend,        net_irecv,
    net_iflush,  net_test,   net_close,         net_close,          net_close_listen, nullptr,
    nullptr,
};

}  // extern "C"
