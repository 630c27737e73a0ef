// SPDX-License-Identifier: Apache-2.0
// Loads libnccl-net-incin.so the way NCCL does (dlopen, dlsym of the
// versioned CollNet symbol) and checks what needs no daemons: the exported
// versions, properties, reduceSupport's table, the listen handle's size and
// content, and that CUDA and DMA-BUF memory is refused.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdarg>
#include <cstring>
#include <string>
#include <vector>

#include "collnet_abi.h"

namespace {

std::vector<std::string> g_log;

void logger(incinNcclLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log.push_back(std::to_string(level) + " " + buf);
}

class Plugin : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(INCIN_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    v8_ = static_cast<const incinNcclCollNet_v8*>(dlsym(lib_, "ncclCollNetPlugin_v8"));
    v9_ = static_cast<const incinNcclCollNet_v9*>(dlsym(lib_, "ncclCollNetPlugin_v9"));
    v10_ = static_cast<const incinNcclCollNet_v9*>(dlsym(lib_, "ncclCollNetPlugin_v10"));
    ASSERT_NE(v8_, nullptr);
    ASSERT_NE(v9_, nullptr);
    ASSERT_NE(v10_, nullptr);
    setenv("INCIN_IFACE", "lo", 1);
    ASSERT_EQ(v8_->init(logger), incinNcclSuccess);
  }
  void TearDown() override {
    if (lib_) dlclose(lib_);
  }
  void* lib_ = nullptr;
  const incinNcclCollNet_v8* v8_ = nullptr;
  const incinNcclCollNet_v9* v9_ = nullptr;
  const incinNcclCollNet_v9* v10_ = nullptr;
};

TEST_F(Plugin, OnlyThePluginSymbolsAreExported) {
  // libinc's C++ internals stay hidden (NCCL links its own libraries).
  EXPECT_EQ(dlsym(lib_, "plugin_init"), nullptr);
  EXPECT_STREQ(v8_->name, "incin");
  EXPECT_STREQ(v9_->name, "incin");
  EXPECT_STREQ(v10_->name, "incin");
  EXPECT_NE(v9_->makeVDevice, nullptr);
  EXPECT_EQ(v10_->iallreduce, v9_->iallreduce);
}

// NCCL takes a library's CollNet only with that library's net plugin: the
// point-to-point half, TCP, over loopback here.
TEST_F(Plugin, NetPluginSendsAndReceivesOverTcp) {
  auto* net = static_cast<const incinNcclNet_v8*>(dlsym(lib_, "ncclNetPlugin_v8"));
  ASSERT_NE(net, nullptr);
  EXPECT_STREQ(net->name, "incin-tcp");
  ASSERT_EQ(net->init(logger), incinNcclSuccess);
  int n = 0;
  ASSERT_EQ(net->devices(&n), incinNcclSuccess);
  EXPECT_EQ(n, 1);
  incinNcclProps_v8 p;
  ASSERT_EQ(net->getProperties(0, &p), incinNcclSuccess);
  EXPECT_EQ(p.ptrSupport, INCIN_NCCL_PTR_HOST);
  EXPECT_EQ(p.maxRecvs, 1);

  unsigned char handle[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *send = nullptr, *recv = nullptr, *dev = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listen), incinNcclSuccess);
  // accept before anyone connected: no comm yet, and no error.
  ASSERT_EQ(net->accept(listen, &recv, &dev), incinNcclSuccess);
  EXPECT_EQ(recv, nullptr);
  ASSERT_EQ(net->connect(0, handle, &send, &dev), incinNcclSuccess);
  ASSERT_NE(send, nullptr);
  for (int i = 0; i < 1000 && !recv; i++) {
    ASSERT_EQ(net->accept(listen, &recv, &dev), incinNcclSuccess);
    if (!recv) usleep(1000);
  }
  ASSERT_NE(recv, nullptr);

  // Three messages in flight each way before the first test(): empty, odd,
  // larger than a socket buffer; a receive larger than the message gets the
  // sender's size.
  const int sizes[3] = {0, 5, 3 << 20};
  std::vector<std::vector<char>> out(3), in(3);
  void* sreq[3];
  void* rreq[3];
  void* mh = nullptr;
  ASSERT_EQ(net->regMr(send, nullptr, 0, INCIN_NCCL_PTR_HOST, &mh), incinNcclSuccess);
  for (int i = 0; i < 3; i++) {
    out[i].resize(sizes[i] + 1);
    for (size_t k = 0; k < out[i].size(); k++) out[i][k] = static_cast<char>(k * 31 + i);
    in[i].assign(sizes[i] + 16, 0);
    void* data = in[i].data();
    int cap = static_cast<int>(in[i].size()), tag = 7 + i;
    ASSERT_EQ(net->irecv(recv, 1, &data, &cap, &tag, &mh, &rreq[i]), incinNcclSuccess);
    ASSERT_EQ(net->isend(send, out[i].data(), sizes[i], 7 + i, mh, &sreq[i]), incinNcclSuccess);
  }
  for (int i = 0; i < 3; i++) {
    int done = 0, size = -1;
    while (!done) ASSERT_EQ(net->test(sreq[i], &done, &size), incinNcclSuccess);
    done = 0;
    while (!done) ASSERT_EQ(net->test(rreq[i], &done, &size), incinNcclSuccess);
    EXPECT_EQ(size, sizes[i]);
    EXPECT_EQ(memcmp(in[i].data(), out[i].data(), sizes[i]), 0) << i;
  }
  // A message with another tag than the receive's fails the receive.
  {
    char buf[8] = {}, msg[4] = {1, 2, 3, 4};
    void* data = buf;
    int cap = sizeof buf, tag = 1, done = 0;
    ASSERT_EQ(net->irecv(recv, 1, &data, &cap, &tag, &mh, &rreq[0]), incinNcclSuccess);
    ASSERT_EQ(net->isend(send, msg, sizeof msg, 2, mh, &sreq[0]), incinNcclSuccess);
    while (!done) ASSERT_EQ(net->test(sreq[0], &done, nullptr), incinNcclSuccess);
    incinNcclResult r = incinNcclSuccess;
    done = 0;
    while (!done && r == incinNcclSuccess) r = net->test(rreq[0], &done, nullptr);
    EXPECT_EQ(r, incinNcclRemoteError);
    EXPECT_NE(g_log.back().find("tag 2"), std::string::npos) << g_log.back();
  }
  EXPECT_EQ(net->regMr(send, nullptr, 0, INCIN_NCCL_PTR_CUDA, &mh), incinNcclInvalidArgument);
  EXPECT_EQ(net->closeSend(send), incinNcclSuccess);
  EXPECT_EQ(net->closeRecv(recv), incinNcclSuccess);
  EXPECT_EQ(net->closeListen(listen), incinNcclSuccess);
}

TEST_F(Plugin, DevicesAndProperties) {
  int n = 0;
  ASSERT_EQ(v8_->devices(&n), incinNcclSuccess);
  EXPECT_EQ(n, 1);
  incinNcclProps_v8 p8;
  ASSERT_EQ(v8_->getProperties(0, &p8), incinNcclSuccess);
  EXPECT_STREQ(p8.name, "incin");
  EXPECT_EQ(p8.ptrSupport, INCIN_NCCL_PTR_HOST);
  EXPECT_GT(p8.speed, 0);
  EXPECT_EQ(p8.maxComms, 1);
  EXPECT_EQ(p8.netDeviceType, 0);
  EXPECT_NE(v8_->getProperties(1, &p8), incinNcclSuccess);

  incinNcclProps_v9 p9;
  memset(&p9, 0xff, sizeof p9);
  ASSERT_EQ(v9_->getProperties(0, &p9), incinNcclSuccess);
  EXPECT_STREQ(p9.name, "incin");
  EXPECT_EQ(p9.ptrSupport, INCIN_NCCL_PTR_HOST);
  EXPECT_EQ(p9.forceFlush, 0);
  EXPECT_EQ(p9.vProps.ndevs, 1);
  EXPECT_EQ(p9.vProps.devs[0], 0);
  EXPECT_GE(p9.maxCollBytes, size_t{1} << 20);
  int d = -1;
  EXPECT_EQ(v9_->makeVDevice(&d, &p9.vProps), incinNcclSuccess);
  EXPECT_EQ(d, 0);
}

TEST_F(Plugin, ReduceSupportMatchesWhatTheSwitchComputes) {
  struct Case {
    incinNcclDataType t;
    incinNcclRedOp op;
    int want;
  };
  const Case cases[] = {
      {incinNcclInt32, incinNcclSum, 1},
      {incinNcclInt32, incinNcclMin, 1},
      {incinNcclInt32, incinNcclMax, 1},
      {incinNcclInt64, incinNcclSum, 1},
      {incinNcclFloat32, incinNcclSum, 1},
      {incinNcclFloat32, incinNcclMax, 1},
      {incinNcclFloat64, incinNcclSum, 1},
      {incinNcclFloat16, incinNcclSum, 1},
      {incinNcclBfloat16, incinNcclMin, 1},
      {incinNcclUint32, incinNcclSum, 1},
      {incinNcclUint64, incinNcclSum, 1},
      {incinNcclUint32, incinNcclMax, 0},
      {incinNcclUint64, incinNcclMin, 0},
      {incinNcclInt8, incinNcclSum, 0},
      {incinNcclUint8, incinNcclSum, 0},
      {incinNcclFloat32, incinNcclProd, 0},
      {incinNcclFloat32, incinNcclAvg, 0},
      {incinNcclInt32, incinNcclProd, 0},
      {static_cast<incinNcclDataType>(10), incinNcclSum, 0},  // fp8 e4m3 of newer NCCLs
  };
  for (const Case& c : cases) {
    int s = -1;
    ASSERT_EQ(v8_->reduceSupport(c.t, c.op, &s), incinNcclSuccess);
    EXPECT_EQ(s, c.want) << "type " << c.t << " op " << c.op;
    s = -1;
    ASSERT_EQ(v9_->reduceSupport(c.t, c.op, &s), incinNcclSuccess);
    EXPECT_EQ(s, c.want) << "type " << c.t << " op " << c.op;
  }
}

TEST_F(Plugin, ListenHandleFitsAndCarriesTheJob) {
  setenv("INCIN_AM", "10.0.0.254:50051", 1);
  setenv("INCIN_JOB_ID", "train-7", 1);
  // NCCL's buffer is NCCL_NET_HANDLE_MAXSIZE bytes: nothing may go past it.
  unsigned char buf[2 * INCIN_NCCL_NET_HANDLE_MAXSIZE];
  memset(buf, 0xab, sizeof buf);
  void* listen = nullptr;
  ASSERT_EQ(v8_->listen(0, buf, &listen), incinNcclSuccess);
  ASSERT_NE(listen, nullptr);
  for (size_t i = INCIN_NCCL_NET_HANDLE_MAXSIZE; i < sizeof buf; i++) ASSERT_EQ(buf[i], 0xab) << i;
  std::string h(reinterpret_cast<char*>(buf), INCIN_NCCL_NET_HANDLE_MAXSIZE);
  EXPECT_EQ(h.compare(0, 8, "incinCN1"), 0);
  EXPECT_NE(h.find("10.0.0.254:50051"), std::string::npos);
  EXPECT_NE(h.find("train-7"), std::string::npos);
  EXPECT_EQ(v8_->closeListen(listen), incinNcclSuccess);

  // A handle that is not the plugin's is refused at connect, with a reason.
  unsigned char junk[INCIN_NCCL_NET_HANDLE_MAXSIZE] = {1, 2, 3};
  void* handles[1] = {junk};
  void* coll = reinterpret_cast<void*>(1);
  ASSERT_EQ(v8_->listen(0, buf, &listen), incinNcclSuccess);
  EXPECT_EQ(v8_->connect(handles, 1, 0, listen, &coll), incinNcclInvalidUsage);
  EXPECT_EQ(coll, nullptr);
  EXPECT_EQ(v8_->closeListen(listen), incinNcclSuccess);
  ASSERT_FALSE(g_log.empty());
  EXPECT_NE(g_log.back().find("not an incin handle"), std::string::npos) << g_log.back();
}

// INCIN_OP_TIMEOUT_MS is libinc's collective timeout; a value that is no
// number of milliseconds fails connect before anything joins, naming it.
TEST_F(Plugin, ConnectRefusesABadCollectiveTimeout) {
  setenv("INCIN_AM", "10.0.0.254:50051", 1);
  setenv("INCIN_JOB_ID", "train-7", 1);
  unsigned char buf[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(v8_->listen(0, buf, &listen), incinNcclSuccess);
  void* handles[1] = {buf};
  for (const char* bad : {"soon", "-5", "12x", "99999999999"}) {
    setenv("INCIN_OP_TIMEOUT_MS", bad, 1);
    void* coll = reinterpret_cast<void*>(1);
    EXPECT_EQ(v8_->connect(handles, 1, 0, listen, &coll), incinNcclInvalidArgument) << bad;
    EXPECT_EQ(coll, nullptr);
    ASSERT_FALSE(g_log.empty());
    EXPECT_NE(g_log.back().find("INCIN_OP_TIMEOUT_MS"), std::string::npos) << g_log.back();
  }
  unsetenv("INCIN_OP_TIMEOUT_MS");
  EXPECT_EQ(v8_->closeListen(listen), incinNcclSuccess);
}

TEST_F(Plugin, ListenWithoutAnAmAddressFails) {
  unsetenv("INCIN_AM");
  unsigned char buf[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  EXPECT_EQ(v8_->listen(0, buf, &listen), incinNcclInvalidUsage);
  EXPECT_EQ(listen, nullptr);
  EXPECT_NE(g_log.back().find("INCIN_AM"), std::string::npos) << g_log.back();
}

// INCIN_REQUIRE_OFFLOAD: where NCCL would otherwise run its own algorithms
// (no AM; a type or op incin does not reduce), the plugin fails, naming the
// setting and the reason.
TEST_F(Plugin, RequireOffloadTurnsFallbacksIntoErrorsWithTheReason) {
  setenv("INCIN_REQUIRE_OFFLOAD", "1", 1);
  int s = -1;
  EXPECT_EQ(v8_->reduceSupport(incinNcclInt8, incinNcclSum, &s), incinNcclSystemError);
  ASSERT_FALSE(g_log.empty());
  EXPECT_NE(g_log.back().find("INCIN_REQUIRE_OFFLOAD is set"), std::string::npos) << g_log.back();
  EXPECT_NE(g_log.back().find("reason=unsupported_type_op"), std::string::npos) << g_log.back();
  s = -1;
  EXPECT_EQ(v8_->reduceSupport(incinNcclFloat32, incinNcclSum, &s), incinNcclSuccess);
  EXPECT_EQ(s, 1);

  unsetenv("INCIN_AM");
  unsigned char buf[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  EXPECT_EQ(v8_->listen(0, buf, &listen), incinNcclSystemError);
  EXPECT_EQ(listen, nullptr);
  EXPECT_NE(g_log.back().find("reason=no_group: INCIN_AM is not set"), std::string::npos) << g_log.back();
  unsetenv("INCIN_REQUIRE_OFFLOAD");
}

// The previous release's names still work (libinc logs the deprecation).
TEST_F(Plugin, OldSettingNamesStillWork) {
  unsetenv("INCIN_AM");
  unsetenv("INCIN_JOB_ID");
  setenv("INC_AM_ADDRESS", "10.0.0.253:50051", 1);
  setenv("INC_JOB_ID", "old-names", 1);
  unsigned char buf[INCIN_NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(v8_->listen(0, buf, &listen), incinNcclSuccess);
  std::string h(reinterpret_cast<char*>(buf), INCIN_NCCL_NET_HANDLE_MAXSIZE);
  EXPECT_NE(h.find("10.0.0.253:50051"), std::string::npos);
  EXPECT_NE(h.find("old-names"), std::string::npos);
  EXPECT_EQ(v8_->closeListen(listen), incinNcclSuccess);
  unsetenv("INC_AM_ADDRESS");
  unsetenv("INC_JOB_ID");
}

TEST_F(Plugin, CudaAndDmaBufMemoryIsRefused) {
  char data[64];
  void* mh = reinterpret_cast<void*>(1);
  EXPECT_EQ(v8_->regMr(nullptr, data, sizeof data, INCIN_NCCL_PTR_CUDA, &mh), incinNcclInvalidArgument);
  EXPECT_EQ(mh, nullptr);
  EXPECT_NE(g_log.back().find("host memory only"), std::string::npos) << g_log.back();
  mh = reinterpret_cast<void*>(1);
  EXPECT_NE(v8_->regMrDmaBuf(nullptr, data, sizeof data, INCIN_NCCL_PTR_DMABUF, 0, 3, &mh), incinNcclSuccess);
  EXPECT_EQ(mh, nullptr);
  ASSERT_EQ(v8_->regMr(nullptr, data, sizeof data, INCIN_NCCL_PTR_HOST, &mh), incinNcclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(v8_->deregMr(nullptr, mh), incinNcclSuccess);
}

TEST_F(Plugin, FlushOfHostMemoryIsDoneAtOnce) {
  char data[64];
  void* req = reinterpret_cast<void*>(1);
  EXPECT_EQ(v8_->iflush(nullptr, data, sizeof data, nullptr, &req), incinNcclSuccess);
  EXPECT_EQ(req, nullptr);
}

}  // namespace
