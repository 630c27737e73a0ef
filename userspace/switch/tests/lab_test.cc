// SPDX-License-Identifier: Apache-2.0
// lab.switch_agent: the real incswitchd in a private network namespace with
// real XDP on veths, driven over its SwitchAgent gRPC service (a unix socket,
// reachable from the test's namespace). Workers are AF_PACKET sockets in a
// second namespace sending frames built by common/frame.h and reading the
// switch's result frames back. The AM side is a recording AggregationManager
// server in this process, so the test sees exactly what the agent sends.
//
// Needs root; run through lab_switch.sh (sets CSW_PREFIX, INCSWITCHD and
// removes namespaces and pins whatever happens).
// inc.pb.h first: its enum value AF_XDP would otherwise meet the AF_XDP macro
// of <sys/socket.h>.
#include "inc/v1/inc.grpc.pb.h"
// clang-format off
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/frame.h"
#include "common/version.h"
// clang-format on

namespace inc {
namespace {

using namespace std::chrono_literals;

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

int Sh(const std::string& cmd) {
  int rc = system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) n++;
  return n;
}

// Liveness waits only: generous limits for a noisy VM, never a speed check.
bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit = 60s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

constexpr char kSwitch[] = "sw1";
constexpr char kWorkerMac0[] = "02:00:00:00:01:01";
constexpr char kWorkerMac1[] = "02:00:00:00:01:02";
constexpr char kPortMac0[] = "02:00:00:00:02:01";
constexpr char kPortMac1[] = "02:00:00:00:02:02";
constexpr char kWorkerIp0[] = "10.0.0.1";
constexpr char kWorkerIp1[] = "10.0.1.1";
constexpr char kPortIp0[] = "10.0.0.254";
constexpr char kPortIp1[] = "10.0.1.254";
constexpr uint32_t kTree = 42;
constexpr uint32_t kKey = 0x5eed1234;
constexpr uint32_t kPool = 16;
constexpr uint16_t kElems = 8;

// The AM side of the protocol, recording what the agent sends.
class RecordingAm final : public v1::AggregationManager::Service {
 public:
  grpc::Status RegisterSwitch(grpc::ServerContext*, const v1::RegisterSwitchRequest* req,
                              v1::RegisterSwitchResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    registrations.push_back(*req);
    resp->set_heartbeat_interval_ms(100);
    return grpc::Status::OK;
  }
  grpc::Status SwitchHeartbeat(grpc::ServerContext*, const v1::SwitchHeartbeatRequest* req,
                               v1::SwitchHeartbeatResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    heartbeats.push_back(*req);
    if (ask_reregister) {
      ask_reregister = false;
      resp->set_reregister(true);
    }
    return grpc::Status::OK;
  }
  size_t NumRegistrations() {
    std::lock_guard<std::mutex> lock(mu);
    return registrations.size();
  }
  size_t NumHeartbeats() {
    std::lock_guard<std::mutex> lock(mu);
    return heartbeats.size();
  }

  std::mutex mu;
  std::vector<v1::RegisterSwitchRequest> registrations;
  std::vector<v1::SwitchHeartbeatRequest> heartbeats;
  bool ask_reregister = false;
};

// The incswitchd process, started in the switch namespace.
class AgentProcess {
 public:
  AgentProcess(std::string netns, std::string log) : netns_(std::move(netns)), log_(std::move(log)) {}
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void Start(const std::vector<std::string>& args, const std::string& binary = Env("INCSWITCHD")) {
    std::vector<std::string> argv{binary};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      int ns = open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(120);
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) _exit(121);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(122);
    }
  }

  bool Running() {
    if (pid_ <= 0) return false;
    int status;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
  }

  // Sends sig and waits for the exit; returns the exit code (-1 if signalled).
  int Stop(int sig = SIGTERM) {
    if (pid_ > 0) {
      kill(pid_, sig);
      waitpid(pid_, &exit_status_, 0);
      pid_ = -1;
    }
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
  }

  // Runs to completion (for start-up errors); returns the exit code.
  int Wait() {
    if (pid_ > 0) {
      waitpid(pid_, &exit_status_, 0);
      pid_ = -1;
    }
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
  }

  std::string Log() const { return ReadFile(log_); }

 private:
  std::string netns_;
  std::string log_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
};

// A worker port: an AF_PACKET socket bound to an interface of the worker
// namespace.
struct WorkerPort {
  int fd = -1;
  Mac mac;
  Ipv4 ip;
  ~WorkerPort() {
    if (fd >= 0) close(fd);
  }
};

class SwitchLab : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, XDP, bpffs)";
    prefix_ = Env("CSW_PREFIX");
    if (prefix_.empty()) prefix_ = "csw" + std::to_string(getpid());
    ASSERT_FALSE(Env("INCSWITCHD").empty()) << "INCSWITCHD must name the incswitchd binary";
    static int n = 0;
    tag_ = prefix_ + "t" + std::to_string(n++);
    sw_ns_ = tag_ + "s";
    wk_ns_ = tag_ + "w";
    dir_ = "/tmp/" + tag_;
    pin_root_ = "/sys/fs/bpf/" + tag_;
    // 0700: incamd refuses a state folder others may read.
    ASSERT_EQ(Sh("mkdir -p -m 700 " + dir_), 0);
    ASSERT_EQ(Sh("mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf"), 0);
    created_ = true;
    std::string s = sw_ns_, w = wk_ns_;
    std::string script =
        "set -e; ip netns add " + s + "; ip netns add " + w + ";" + "for n in " + s + " " + w +
        "; do ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
        "net.ipv6.conf.default.disable_ipv6=1; ip -n $n link set lo up; done;" +
        "ip link add w0 address " + kWorkerMac0 + " netns " + w + " type veth peer name p0 address " +
        kPortMac0 + " netns " + s + ";" + "ip link add w1 address " + kWorkerMac1 + " netns " + w +
        " type veth peer name p1 address " + kPortMac1 + " netns " + s + ";" + "ip -n " + w + " addr add " +
        kWorkerIp0 + "/24 dev w0; ip -n " + w + " addr add " + kWorkerIp1 + "/24 dev w1;" + "ip -n " + s +
        " addr add " + kPortIp0 + "/24 dev p0; ip -n " + s + " addr add " + kPortIp1 + "/24 dev p1;" +
        "for i in 0 1; do ip -n " + w + " link set w$i up; ip -n " + s + " link set p$i up; " +
        // The veth peer caveat: the switch's XDP_TX/REDIRECT
        // into p$i reaches w$i only with GRO (or XDP) on w$i.
        "ip netns exec " + w + " ethtool -K w$i gro on tx off >/dev/null; done";
    ASSERT_EQ(Sh(script), 0) << script;
  }

  void TearDown() override {
    agents_.clear();
    am_server_.reset();
    if (!created_) return;
    Sh("ip netns del " + sw_ns_ + " 2>/dev/null; ip netns del " + wk_ns_ + " 2>/dev/null; rm -rf " +
       pin_root_ + " " + dir_);
  }

  std::string AgentSocket() const { return "unix:" + dir_ + "/agent.sock"; }
  std::string AmSocket() const { return "unix:" + dir_ + "/am.sock"; }

  std::vector<std::string> BaseArgs() const {
    return {"--name",      kSwitch,       "--port",     "p0",      "--port",          "p1",
            "--listen",    AgentSocket(), "--pin-root", pin_root_, "--slot-capacity", "256",
            "--log-level", "debug",       "--insecure"};
  }

  AgentProcess* StartAgent(std::vector<std::string> extra = {}) {
    auto args = BaseArgs();
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.push_back(
        std::make_unique<AgentProcess>(sw_ns_, dir_ + "/agent" + std::to_string(agents_.size()) + ".log"));
    AgentProcess* agent = agents_.back().get();
    agent->Start(args);
    return agent;
  }

  // Waits until the agent answers Health; false (with its log printed) if it
  // exits first.
  bool WaitServing(AgentProcess* agent) {
    stub_ = v1::SwitchAgent::NewStub(grpc::CreateChannel(AgentSocket(), grpc::InsecureChannelCredentials()));
    bool ok = WaitFor([&] {
      if (!agent->Running()) return true;
      v1::HealthResponse resp;
      return Health(&resp).ok() && resp.serving();
    });
    if (!ok || !agent->Running()) {
      ADD_FAILURE() << "agent not serving; its log:\n" << agent->Log();
      return false;
    }
    return true;
  }

  grpc::Status Health(v1::HealthResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    return stub_->Health(&ctx, v1::HealthRequest(), resp);
  }

  grpc::Status Configure(const v1::TreeConfig& tree, bool* changed = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::ConfigureTreeRequest req;
    *req.mutable_tree() = tree;
    v1::ConfigureTreeResponse resp;
    grpc::Status st = stub_->ConfigureTree(&ctx, req, &resp);
    if (changed) *changed = resp.changed();
    return st;
  }

  grpc::Status Remove(uint32_t id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::RemoveTreeRequest req;
    req.set_tree_id(id);
    v1::RemoveTreeResponse resp;
    return stub_->RemoveTree(&ctx, req, &resp);
  }

  grpc::Status Stats(uint32_t id, v1::SwitchStats* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::GetStatsRequest req;
    req.set_tree_id(id);
    v1::GetStatsResponse resp;
    grpc::Status st = stub_->GetStats(&ctx, req, &resp);
    *out = resp.stats();
    return st;
  }

  static v1::Endpoint Child(const std::string& port, const char* mac, const char* ip, uint32_t rank) {
    v1::Endpoint e;
    e.set_port(port);
    e.set_peer_mac(mac);
    e.set_peer_ip(ip);
    e.set_peer_qpn(0x300 + rank);    // the worker's QP
    e.set_switch_qpn(0x200 + rank);  // the switch QP the worker's frames target
    e.set_rkey(0x1000 + rank);
    e.set_va_base(0x10000000ull * (rank + 1));
    e.set_slot_stride(4096);
    e.set_member_lo(rank);
    e.set_member_hi(rank + 1);
    e.set_peer_name("w" + std::to_string(rank));
    return e;
  }

  static v1::TreeConfig Tree() {
    v1::TreeConfig t;
    t.set_tree_id(kTree);
    t.set_key(kKey);
    t.set_role(v1::SINGLE);
    t.set_pool_size(kPool);
    t.set_elems_per_packet(240);
    t.set_slot_base(32);
    t.add_dtypes(v1::INT32);
    t.add_ops(v1::SUM);
    t.add_collectives(v1::ALLREDUCE);
    *t.add_children() = Child("p0", kWorkerMac0, kWorkerIp0, 0);
    *t.add_children() = Child("p1", kWorkerMac1, kWorkerIp1, 1);
    t.set_job_id("lab");
    t.set_generation(1);
    return t;
  }

  // Opens AF_PACKET sockets on w0 and w1 inside the worker namespace.
  void OpenWorkers() {
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int wk = open(("/run/netns/" + wk_ns_).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(self, 0);
    ASSERT_GE(wk, 0);
    ASSERT_EQ(setns(wk, CLONE_NEWNET), 0);
    const char* names[2] = {"w0", "w1"};
    const char* ips[2] = {kWorkerIp0, kWorkerIp1};
    const char* macs[2] = {kWorkerMac0, kWorkerMac1};
    for (int i = 0; i < 2; i++) {
      workers_[i].fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
      sockaddr_ll addr{};
      addr.sll_family = AF_PACKET;
      addr.sll_protocol = htons(ETH_P_ALL);
      addr.sll_ifindex = static_cast<int>(if_nametoindex(names[i]));
      bool bound = workers_[i].fd >= 0 && addr.sll_ifindex > 0 &&
                   bind(workers_[i].fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      EXPECT_TRUE(bound) << "AF_PACKET on " << names[i] << ": " << strerror(errno);
      workers_[i].mac = *Mac::Parse(macs[i]);
      workers_[i].ip = *Ipv4::Parse(ips[i]);
    }
    EXPECT_EQ(setns(self, CLONE_NEWNET), 0);
    close(self);
    close(wk);
  }

  void SendContribution(int rank, uint32_t msg, const std::vector<int32_t>& values) {
    FrameSpec f;
    f.src_mac = workers_[rank].mac;
    f.dst_mac = *Mac::Parse(rank == 0 ? kPortMac0 : kPortMac1);
    f.src_ip = workers_[rank].ip;
    f.dst_ip = *Ipv4::Parse(rank == 0 ? kPortIp0 : kPortIp1);
    f.src_qpn = 0x300 + rank;
    f.dest_qpn = wire_.switch_qpn[rank];
    f.psn = msg;
    f.inc.collective = INC_COLL_ALLREDUCE;
    f.inc.dtype = INC_DTYPE_INT32;
    f.inc.op = INC_OP_SUM;
    f.inc.tree_id = static_cast<uint16_t>(wire_.tree);
    f.inc.rank = static_cast<uint16_t>(wire_.rank_at_switch[rank]);
    f.inc.msg_id = msg;
    f.inc.slot = static_cast<uint16_t>(msg % wire_.pool);
    f.inc.count = static_cast<uint16_t>(values.size());
    f.inc.key = wire_.key;
    f.payload = reinterpret_cast<const uint8_t*>(values.data());
    f.payload_len = values.size() * 4;
    auto frame = BuildFrame(f);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    ASSERT_EQ(send(workers_[rank].fd, frame->data(), frame->size(), 0), static_cast<ssize_t>(frame->size()))
        << strerror(errno);
  }

  // Reads frames on a worker port until the RESULT of msg arrives; returns
  // its summed values (empty on timeout).
  std::vector<int32_t> ReadResult(int rank, uint32_t msg, ParsedFrame* out = nullptr) {
    uint8_t buf[4096];
    auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{workers_[rank].fd, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      sockaddr_ll from{};
      socklen_t len = sizeof(from);
      ssize_t n = recvfrom(workers_[rank].fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      auto parsed = ParseFrame(buf, static_cast<size_t>(n));
      if (!parsed.ok() || !(parsed->inc.flags & INC_FLAG_RESULT) || parsed->inc.msg_id != msg) continue;
      std::vector<int32_t> values(parsed->payload_len / 4);
      std::memcpy(values.data(), parsed->payload, values.size() * 4);
      if (out) {
        *out = *parsed;
        out->payload = nullptr;  // points into buf
      }
      return values;
    }
    return {};
  }

  // Both workers contribute to msg; both must get the element-wise sum.
  void AggregateOnce(uint32_t msg) {
    std::vector<int32_t> a(kElems), b(kElems), want(kElems);
    for (int i = 0; i < kElems; i++) {
      a[i] = static_cast<int32_t>(msg * 100 + i + 1);
      b[i] = -3 * i + 1000;
      want[i] = a[i] + b[i];
    }
    SendContribution(0, msg, a);
    SendContribution(1, msg, b);
    for (int rank = 0; rank < 2; rank++) {
      ParsedFrame frame;
      auto got = ReadResult(rank, msg, &frame);
      ASSERT_EQ(got, want) << "result of message " << msg << " at rank " << rank;
      EXPECT_TRUE(frame.icrc_ok) << "result frame ICRC";
      EXPECT_EQ(frame.dst_ip, workers_[rank].ip);
      EXPECT_EQ(frame.dst_mac, workers_[rank].mac);
      EXPECT_EQ(frame.src_ip.ToString(), rank == 0 ? kPortIp0 : kPortIp1);
      EXPECT_EQ(frame.dest_qpn, 0x300u + rank) << "result goes to the worker's QP";
      EXPECT_EQ(frame.inc.tree_id, wire_.tree);
    }
  }

  void StartAm() {
    am_ = std::make_unique<RecordingAm>();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(AmSocket(), grpc::InsecureServerCredentials());
    builder.RegisterService(am_.get());
    am_server_ = builder.BuildAndStart();
    ASSERT_NE(am_server_, nullptr);
  }

  // What the workers put on the wire: the test's own tree, or what the AM
  // assigned.
  struct Wire {
    uint32_t tree = kTree;
    uint32_t key = kKey;
    uint32_t pool = kPool;
    uint32_t switch_qpn[2] = {0x200, 0x201};
    uint32_t rank_at_switch[2] = {0, 1};
  } wire_;
  std::string prefix_, tag_, sw_ns_, wk_ns_, dir_, pin_root_;
  bool created_ = false;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
  std::unique_ptr<v1::SwitchAgent::Stub> stub_;
  WorkerPort workers_[2];
  std::unique_ptr<RecordingAm> am_;
  std::unique_ptr<grpc::Server> am_server_;
};

TEST_F(SwitchLab, ServesCapabilitiesConfiguresAggregatesReportsStatsAndRemoves) {
  AgentProcess* agent = StartAgent();
  ASSERT_TRUE(WaitServing(agent));

  v1::GetCapabilitiesResponse caps;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetCapabilities(&ctx, v1::GetCapabilitiesRequest(), &caps).ok());
  }
  EXPECT_EQ(caps.switch_name(), kSwitch);
  EXPECT_EQ(caps.capabilities().slot_capacity(), 256u);
  EXPECT_EQ(caps.capabilities().free_slots(), 256u);
  EXPECT_EQ(caps.capabilities().max_children(), 64u);
  ASSERT_EQ(caps.ports_size(), 2);
  EXPECT_EQ(caps.ports(0).name(), "p0");
  EXPECT_EQ(caps.ports(0).mac(), kPortMac0);
  EXPECT_EQ(caps.ports(1).ip(), kPortIp1);
  EXPECT_TRUE(caps.ports(1).xdp_attached());
  EXPECT_EQ(caps.ports(1).xdp_mode(), "native");
  EXPECT_TRUE(caps.ports(0).up());
  EXPECT_EQ(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP program on p0";

  bool changed = false;
  ASSERT_TRUE(Configure(Tree(), &changed).ok());
  EXPECT_TRUE(changed);
  ASSERT_TRUE(Configure(Tree(), &changed).ok());
  EXPECT_FALSE(changed) << "the same config again is a no-op";

  v1::HealthResponse health;
  ASSERT_TRUE(Health(&health).ok());
  ASSERT_EQ(health.tree_ids_size(), 1);
  EXPECT_EQ(health.tree_ids(0), kTree);

  OpenWorkers();
  AggregateOnce(0);
  AggregateOnce(1);

  v1::SwitchStats stats;
  ASSERT_TRUE(Stats(kTree, &stats).ok());
  ASSERT_EQ(stats.trees_size(), 1);
  EXPECT_EQ(stats.trees(0).tree_id(), kTree);
  EXPECT_GE(stats.trees(0).counters().completions(), 2u);
  EXPECT_GE(stats.trees(0).counters().rx_packets(), 4u);
  std::map<uint32_t, uint32_t> qpn_of_rank;
  for (const auto& m : stats.members()) qpn_of_rank[m.rank()] = m.switch_qpn();
  EXPECT_EQ(qpn_of_rank[0], 0x200u);
  EXPECT_EQ(qpn_of_rank[1], 0x201u);
  EXPECT_GE(stats.global().at("rx_packets"), 4u);

  // A contribution with the wrong key is dropped and counted by reason.
  std::vector<int32_t> v(kElems, 1);
  auto before = stats;
  {
    FrameSpec f;  // as SendContribution, key flipped
    f.src_mac = workers_[0].mac;
    f.dst_mac = *Mac::Parse(kPortMac0);
    f.src_ip = workers_[0].ip;
    f.dst_ip = *Ipv4::Parse(kPortIp0);
    f.dest_qpn = 0x200;
    f.inc.tree_id = kTree;
    f.inc.msg_id = 2;
    f.inc.slot = 2;
    f.inc.count = kElems;
    f.inc.key = kKey ^ 1;
    f.payload = reinterpret_cast<const uint8_t*>(v.data());
    f.payload_len = v.size() * 4;
    auto frame = BuildFrame(f);
    ASSERT_TRUE(frame.ok());
    ASSERT_GT(send(workers_[0].fd, frame->data(), frame->size(), 0), 0);
  }
  auto bad_key = [&] {
    v1::SwitchStats s;
    if (!Stats(0, &s).ok()) return uint64_t{0};
    for (const auto& d : s.drops())
      if (d.reason() == "bad_key") return d.packets();
    return uint64_t{0};
  };
  EXPECT_TRUE(WaitFor([&] { return bad_key() >= 1; }, 20s)) << "bad_key drop counted";

  v1::RemoveTreeResponse removed;
  ASSERT_TRUE(Remove(kTree).ok());
  ASSERT_TRUE(Health(&health).ok());
  EXPECT_EQ(health.tree_ids_size(), 0);
  grpc::Status again = Remove(kTree);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND) << again.error_message();

  EXPECT_EQ(agent->Stop(SIGTERM), 0) << agent->Log();
  EXPECT_NE(Sh("test -e " + pin_root_ + "/" + kSwitch), 0) << "pins removed on a plain exit";
  EXPECT_NE(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP detached on a plain exit";
  const std::string log = agent->Log();
  EXPECT_NE(log.find("received SIGTERM"), std::string::npos) << log;
  EXPECT_NE(log.find("is a veth"), std::string::npos) << "logs the veth peer caveat";
}

TEST_F(SwitchLab, GenericXdpModeAttachesInSkbModeAndAggregates) {
  AgentProcess* agent = StartAgent({"--xdp-mode", "generic"});
  ASSERT_TRUE(WaitServing(agent));
  v1::GetCapabilitiesResponse caps;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetCapabilities(&ctx, v1::GetCapabilitiesRequest(), &caps).ok());
  }
  ASSERT_EQ(caps.ports_size(), 2);
  EXPECT_EQ(caps.ports(0).xdp_mode(), "generic");
  EXPECT_TRUE(caps.ports(0).xdp_attached());
  EXPECT_EQ(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdpgeneric"), 0) << "SKB-mode XDP on p0";
  ASSERT_TRUE(Configure(Tree()).ok());
  OpenWorkers();
  AggregateOnce(0);
  AggregateOnce(1);
  EXPECT_EQ(agent->Stop(SIGTERM), 0) << agent->Log();
  EXPECT_NE(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP detached on a plain exit";
}

TEST_F(SwitchLab, BadRequestsGetPreciseStatusCodes) {
  AgentProcess* agent = StartAgent();
  ASSERT_TRUE(WaitServing(agent));
  auto expect = [&](const v1::TreeConfig& t, grpc::StatusCode code, const std::string& words) {
    grpc::Status st = Configure(t);
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    EXPECT_NE(st.error_message().find(words), std::string::npos) << st.error_message();
  };
  auto t = Tree();
  t.set_tree_id(0);
  expect(t, grpc::StatusCode::INVALID_ARGUMENT, "tree_id 0 is out of range");
  t = Tree();
  t.mutable_children(1)->set_port("eth9");
  expect(t, grpc::StatusCode::NOT_FOUND, "port 'eth9' is not a port of this switch");
  t = Tree();
  t.set_slot_base(250);
  expect(t, grpc::StatusCode::RESOURCE_EXHAUSTED, "exceed this switch's slot capacity 256");
  t = Tree();
  t.set_role(v1::LEAF);
  expect(t, grpc::StatusCode::INVALID_ARGUMENT, "role LEAF needs a parent");
  t = Tree();
  t.set_pool_size(0);
  expect(t, grpc::StatusCode::INVALID_ARGUMENT, "pool_size must be > 0");
  t = Tree();
  t.set_elems_per_packet(100000);
  expect(t, grpc::StatusCode::INVALID_ARGUMENT, "elems_per_packet 100000 exceeds");

  ASSERT_TRUE(Configure(Tree()).ok());
  t = Tree();
  t.set_tree_id(kTree + 1);
  t.set_slot_base(40);  // overlaps [32, 48)
  expect(t, grpc::StatusCode::ALREADY_EXISTS, "overlap tree 42's [32, 48)");

  {
    grpc::ClientContext ctx;
    v1::ConfigureTreeRequest empty;
    v1::ConfigureTreeResponse resp;
    EXPECT_EQ(stub_->ConfigureTree(&ctx, empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(Remove(7).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Remove(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::SwitchStats stats;
  EXPECT_EQ(Stats(7, &stats).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::HealthResponse health;
  ASSERT_TRUE(Health(&health).ok());
  ASSERT_EQ(health.tree_ids_size(), 1) << "rejected requests left nothing behind";
  EXPECT_EQ(agent->Stop(SIGTERM), 0) << agent->Log();
}

TEST_F(SwitchLab, RestartWithKeptDatapathKeepsTreesLiveAndAggregating) {
  AgentProcess* first = StartAgent({"--keep-datapath-on-exit"});
  ASSERT_TRUE(WaitServing(first));
  ASSERT_TRUE(Configure(Tree()).ok());
  OpenWorkers();
  AggregateOnce(0);
  ASSERT_EQ(first->Stop(SIGTERM), 0) << first->Log();
  EXPECT_NE(first->Log().find("keeping the data path"), std::string::npos) << first->Log();
  EXPECT_EQ(Sh("test -d " + pin_root_ + "/" + kSwitch), 0) << "maps stay pinned";
  EXPECT_EQ(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP stays attached";

  // While no agent runs, the data path still aggregates.
  AggregateOnce(1);

  AgentProcess* second = StartAgent();
  ASSERT_TRUE(WaitServing(second));
  EXPECT_NE(second->Log().find("re-adopted"), std::string::npos) << second->Log();
  v1::HealthResponse health;
  ASSERT_TRUE(Health(&health).ok());
  ASSERT_EQ(health.tree_ids_size(), 1) << second->Log();
  EXPECT_EQ(health.tree_ids(0), kTree);

  bool changed = true;
  ASSERT_TRUE(Configure(Tree(), &changed).ok());
  EXPECT_FALSE(changed) << "the AM re-sending the live tree changes nothing";
  AggregateOnce(2);
  AggregateOnce(3);

  v1::SwitchStats stats;
  ASSERT_TRUE(Stats(kTree, &stats).ok());
  ASSERT_EQ(stats.trees_size(), 1);
  EXPECT_GE(stats.trees(0).counters().completions(), 4u) << "counters survived the restart";

  ASSERT_EQ(second->Stop(SIGTERM), 0) << second->Log();
  EXPECT_NE(Sh("test -e " + pin_root_ + "/" + kSwitch), 0) << "pins removed on a plain exit";
}

// SIGUSR2 is what incswitchd@.service sends on `systemctl restart`
// (RestartKillSignal=): without --keep-datapath-on-exit the agent still
// leaves the data path for the next one, while SIGTERM (stop) detaches.
TEST_F(SwitchLab, RestartSignalKeepsTheDatapathWithoutTheFlag) {
  AgentProcess* first = StartAgent();
  ASSERT_TRUE(WaitServing(first));
  ASSERT_TRUE(Configure(Tree()).ok());
  OpenWorkers();
  AggregateOnce(0);
  ASSERT_EQ(first->Stop(SIGUSR2), 0) << first->Log();
  EXPECT_NE(first->Log().find("received SIGUSR2: stopping, leaving XDP attached"), std::string::npos)
      << first->Log();
  EXPECT_EQ(Sh("test -d " + pin_root_ + "/" + kSwitch), 0) << "maps stay pinned";
  EXPECT_EQ(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP stays attached";
  AggregateOnce(1);

  AgentProcess* second = StartAgent();
  ASSERT_TRUE(WaitServing(second));
  EXPECT_NE(second->Log().find("re-adopted"), std::string::npos) << second->Log();
  AggregateOnce(2);
  ASSERT_EQ(second->Stop(SIGTERM), 0) << second->Log();
  EXPECT_NE(second->Log().find("received SIGTERM: stopping, detaching XDP"), std::string::npos)
      << second->Log();
  EXPECT_NE(Sh("test -e " + pin_root_ + "/" + kSwitch), 0) << "pins removed on a stop";
  EXPECT_NE(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "XDP detached on a stop";
}

TEST_F(SwitchLab, AmUnreachableThenRegisteredHeartbeatsLinkDownAndRecreatedPort) {
  AgentProcess* agent = StartAgent({"--am", AmSocket()});
  ASSERT_TRUE(WaitServing(agent));
  ASSERT_TRUE(Configure(Tree()).ok());
  EXPECT_TRUE(WaitFor([&] { return Count(agent->Log(), "RegisterSwitch with AM") >= 3; }))
      << "retries registration; log:\n"
      << agent->Log();
  v1::HealthResponse health;
  EXPECT_TRUE(Health(&health).ok()) << "keeps serving while the AM is away";

  StartAm();
  ASSERT_TRUE(WaitFor([&] { return am_->NumRegistrations() >= 1; })) << agent->Log();
  {
    std::lock_guard<std::mutex> lock(am_->mu);
    const auto& reg = am_->registrations[0];
    EXPECT_EQ(reg.switch_name(), kSwitch);
    EXPECT_EQ(reg.agent_address(), AgentSocket());
    EXPECT_EQ(reg.capabilities().slot_capacity(), 256u);
    EXPECT_EQ(reg.capabilities().free_slots(), 256u - kPool);
    ASSERT_EQ(reg.ports_size(), 2);
    EXPECT_EQ(reg.ports(0).name(), "p0");
    EXPECT_GT(reg.ports(0).ifindex(), 0u);
    EXPECT_EQ(reg.ports(0).mac(), kPortMac0);
    EXPECT_EQ(reg.ports(0).ip(), kPortIp0);
    EXPECT_EQ(reg.ports(0).mtu(), 1500u);
    EXPECT_TRUE(reg.ports(0).up());
    EXPECT_TRUE(reg.ports(0).xdp_attached());
    EXPECT_EQ(reg.ports(0).xdp_mode(), "native");
    ASSERT_EQ(reg.live_tree_ids_size(), 1);
    EXPECT_EQ(reg.live_tree_ids(0), kTree);
  }
  ASSERT_TRUE(WaitFor([&] { return am_->NumHeartbeats() >= 2; })) << agent->Log();
  {
    std::lock_guard<std::mutex> lock(am_->mu);
    const auto& hb = am_->heartbeats.back();
    EXPECT_EQ(hb.switch_name(), kSwitch);
    EXPECT_EQ(hb.free_slots(), 256u - kPool);
    ASSERT_EQ(hb.live_tree_ids_size(), 1);
    ASSERT_EQ(hb.ports_size(), 2);
    EXPECT_TRUE(hb.ports(1).up());
    am_->ask_reregister = true;  // as a restarted AM would
  }
  ASSERT_TRUE(WaitFor([&] { return am_->NumRegistrations() >= 2; })) << "registers again on reregister=true";

  // Link down on the worker side takes p1's carrier away: the next
  // heartbeats report it.
  ASSERT_EQ(Sh("ip -n " + wk_ns_ + " link set w1 down"), 0);
  EXPECT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(am_->mu);
    const auto& hb = am_->heartbeats.back();
    return hb.ports_size() == 2 && !hb.ports(1).up() && hb.ports(0).up();
  })) << agent->Log();
  EXPECT_NE(agent->Log().find("port p1: link down"), std::string::npos);

  // The veth pair is deleted and created again: the agent re-attaches XDP to
  // the new p1 and reports it up with its new ifindex.
  uint32_t old_ifindex = 0;
  {
    std::lock_guard<std::mutex> lock(am_->mu);
    old_ifindex = am_->heartbeats.back().ports(1).ifindex();
  }
  ASSERT_EQ(Sh("ip -n " + wk_ns_ + " link del w1 && ip link add w1 address " + kWorkerMac1 + " netns " +
               wk_ns_ + " type veth peer name p1 address " + kPortMac1 + " netns " + sw_ns_ + " && ip -n " +
               sw_ns_ + " addr add " + kPortIp1 + "/24 dev p1 && ip -n " + sw_ns_ +
               " link set p1 up && ip -n " + wk_ns_ + " link set w1 up"),
            0);
  EXPECT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(am_->mu);
    const auto& p1 = am_->heartbeats.back().ports(1);
    return p1.up() && p1.xdp_attached() && p1.ifindex() != old_ifindex;
  })) << agent->Log();
  EXPECT_EQ(Sh("ip -n " + sw_ns_ + " link show p1 | grep -q xdp"), 0) << "XDP on the new p1";

  EXPECT_EQ(agent->Stop(SIGTERM), 0) << agent->Log();
}

// The real incamd (helper B's daemon) in the switch namespace: it programs
// the tree through the agent when two members join, re-adopts it after an
// agent restart with a kept data path (the AM re-sends the config, which
// changes nothing), and removes it when the members' heartbeats stop.
TEST_F(SwitchLab, RealAmProgramsReconcilesAfterAgentRestartAndDismantles) {
  const std::string incamd = Env("INCAMD");
  if (incamd.empty() || access(incamd.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "incamd is not built (INCAMD='" << incamd << "')";
  }
  std::ofstream(dir_ + "/topology.json")
      << R"({
    "switches": [{"name": "sw1", "kind": "leaf"}],
    "hosts": [
      {"name": "h0", "ip": ")"
      << kWorkerIp0 << R"(", "mac": ")" << kWorkerMac0 << R"(", "switch_name": "sw1", "switch_port": "p0"},
      {"name": "h1", "ip": ")"
      << kWorkerIp1 << R"(", "mac": ")" << kWorkerMac1
      << R"(", "switch_name": "sw1", "switch_port": "p1"}]})";
  std::ofstream(dir_ + "/am.json") << R"({"listen": ")" << AmSocket() << R"(", "topology_file": ")" << dir_
                                   << R"(/topology.json", "member_heartbeat_timeout_ms": 1500,
    "member_heartbeat_interval_ms": 200, "switch_heartbeat_interval_ms": 200,
    "switch_heartbeat_timeout_ms": 5000, "join_timeout_ms": 60000, "log_level": "debug",
    "state_path": "incamd.db"})";
  agents_.push_back(std::make_unique<AgentProcess>(sw_ns_, dir_ + "/incamd.log"));
  AgentProcess* am = agents_.back().get();
  am->Start({"--config", dir_ + "/am.json", "--insecure"}, incamd);
  auto am_stub =
      v1::AggregationManager::NewStub(grpc::CreateChannel(AmSocket(), grpc::InsecureChannelCredentials()));
  auto switch_alive = [&](bool want_tree, uint32_t tree) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    v1::ListSwitchesResponse resp;
    if (!am_stub->ListSwitches(&ctx, v1::ListSwitchesRequest(), &resp).ok()) return false;
    for (const auto& sw : resp.switches()) {
      if (sw.name() != kSwitch || !sw.alive()) continue;
      if (!want_tree) return true;
      for (uint32_t id : sw.tree_ids())
        if (id == tree) return true;
    }
    return false;
  };

  const std::vector<std::string> agent_args{
      "--name",     kSwitch,     "--port",          "p0",   "--port",
      "p1",         "--listen",  "127.0.0.1:50061", "--am", AmSocket(),
      "--pin-root", pin_root_,   "--slot-capacity", "256",  "--log-level",
      "debug",      "--insecure"};
  auto args = agent_args;
  args.push_back("--keep-datapath-on-exit");
  agents_.push_back(std::make_unique<AgentProcess>(sw_ns_, dir_ + "/agent-am0.log"));
  AgentProcess* first = agents_.back().get();
  first->Start(args);
  ASSERT_TRUE(WaitFor([&] { return switch_alive(false, 0); }))
      << "switch registered with incamd\n--- agent:\n"
      << first->Log() << "\n--- incamd:\n"
      << am->Log();

  // Two members join (JoinGroup returns when the group is complete).
  v1::MemberAssignment assigned[2];
  grpc::Status joined[2];
  std::vector<std::thread> joins;
  for (int rank = 0; rank < 2; rank++) {
    joins.emplace_back([&, rank] {
      v1::JoinGroupRequest req;
      req.set_job_id("labjob");
      req.set_rank(rank);
      req.set_world_size(2);
      req.set_pool_size(kPool);
      auto* m = req.mutable_member();
      m->set_host(rank == 0 ? "h0" : "h1");
      m->set_qpn(0x300 + rank);
      m->set_rkey(0x1000 + rank);
      m->set_va_base(0x10000000ull * (rank + 1));
      m->set_slot_stride(4096);
      m->set_transport(static_cast<v1::Transport>(1));  // AF_XDP (a macro in <sys/socket.h>)
      v1::JoinGroupResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 60s);
      joined[rank] = am_stub->JoinGroup(&ctx, req, &resp);
      assigned[rank] = resp.assignment();
    });
  }
  for (auto& t : joins) t.join();
  ASSERT_TRUE(joined[0].ok() && joined[1].ok())
      << joined[0].error_message() << " / " << joined[1].error_message() << "\n--- incamd:\n"
      << am->Log() << "\n--- agent:\n"
      << first->Log();
  ASSERT_EQ(assigned[0].tree_id(), assigned[1].tree_id());
  EXPECT_EQ(assigned[0].switch_name(), kSwitch);
  EXPECT_EQ(assigned[0].switch_ip(), kPortIp0);
  EXPECT_EQ(assigned[1].switch_mac(), kPortMac1);
  wire_.tree = assigned[0].tree_id();
  wire_.key = assigned[0].key();
  wire_.pool = assigned[0].pool_size();
  for (int rank = 0; rank < 2; rank++) {
    wire_.switch_qpn[rank] = assigned[rank].switch_qpn();
    wire_.rank_at_switch[rank] = assigned[rank].rank_at_switch();
  }

  // Members heartbeat until the test stops them.
  std::atomic<bool> members_alive{true};
  std::thread heartbeats([&] {
    while (members_alive) {
      for (int rank = 0; rank < 2; rank++) {
        v1::MemberHeartbeatRequest req;
        req.set_job_id("labjob");
        req.set_rank(rank);
        req.set_tree_id(wire_.tree);
        v1::MemberHeartbeatResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 2s);
        (void)am_stub->MemberHeartbeat(&ctx, req, &resp);
      }
      std::this_thread::sleep_for(150ms);
    }
  });
  struct Joiner {
    std::atomic<bool>& flag;
    std::thread& t;
    ~Joiner() {
      flag = false;
      if (t.joinable()) t.join();
    }
  } joiner{members_alive, heartbeats};

  OpenWorkers();
  AggregateOnce(0);

  // Agent restart with the data path kept: the AM learns the live tree from
  // RegisterSwitch, re-sends its config (no change) and the tree keeps working.
  ASSERT_EQ(first->Stop(SIGTERM), 0) << first->Log();
  AggregateOnce(1);
  agents_.push_back(std::make_unique<AgentProcess>(sw_ns_, dir_ + "/agent-am1.log"));
  AgentProcess* second = agents_.back().get();
  second->Start(agent_args);
  const std::string no_change = "tree " + std::to_string(wire_.tree) + ": already programmed as requested";
  EXPECT_TRUE(WaitFor([&] { return second->Log().find(no_change) != std::string::npos; }))
      << "the AM re-sent the live tree\n--- agent:\n"
      << second->Log() << "\n--- incamd:\n"
      << am->Log();
  EXPECT_NE(second->Log().find("live trees: " + std::to_string(wire_.tree)), std::string::npos)
      << second->Log();
  EXPECT_TRUE(WaitFor([&] { return switch_alive(true, wire_.tree); }));
  AggregateOnce(2);

  // Members stop heartbeating: the AM dismantles the tree on the switch.
  members_alive = false;
  heartbeats.join();
  const std::string removed = "RemoveTree " + std::to_string(wire_.tree) + ": done";
  EXPECT_TRUE(WaitFor([&] { return second->Log().find(removed) != std::string::npos; }))
      << "the AM removed the tree\n--- agent:\n"
      << second->Log() << "\n--- incamd:\n"
      << am->Log();

  EXPECT_EQ(second->Stop(SIGTERM), 0) << second->Log();
  EXPECT_NE(Sh("test -e " + pin_root_ + "/" + kSwitch), 0) << "pins removed on a plain exit";
  EXPECT_EQ(am->Stop(SIGTERM), 0) << am->Log();
}

// Everything found before the data path is touched (command line, config,
// interfaces) exits 2 with the problem named, and leaves no pins.
TEST_F(SwitchLab, StartupErrorsExitTwoNamingTheProblemAndLeaveNoPins) {
  std::ofstream(dir_ + "/bad.json") << R"({"switchName": "x", "ports": [{"name": "p0", "mtu": 9000}]})";
  std::ofstream(dir_ + "/good.json")
      << R"({"switchName": "x", "ports": [{"name": "p0"}], "xdpMode": "native"})";
  std::ofstream(dir_ + "/tls.json") << R"({"switchName": "x", "ports": [{"name": "p0"}],
      "tls": {"cert": "/nonexistent/x.pem", "key": "/nonexistent/x.key", "ca": "/nonexistent/ca.pem"}})";
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::string words;
  };
  const Case cases[] = {
      {"no name", {"--port", "p0", "--listen", AgentSocket()}, "switch_name is required"},
      {"no ports", {"--name", "x", "--listen", AgentSocket()}, "no ports"},
      {"missing interface",
       {"--name", "x", "--port", "nosuch0", "--listen", AgentSocket(), "--pin-root", pin_root_},
       "interface 'nosuch0' not found"},
      {"unknown config field", {"--config", dir_ + "/bad.json"}, "unknown field 'ports[0].mtu'"},
      {"bad flag value", {"--config", dir_ + "/good.json", "--xdp-mode", "offload"}, "xdp-mode"},
      {"unknown flag", {"--config", dir_ + "/good.json", "--bogus"}, "--bogus"},
      {"listen port above 65535 (gRPC would listen on 34463)",
       {"--config", dir_ + "/good.json", "--listen", "127.0.0.1:99999", "--pin-root", pin_root_},
       "listen: \"127.0.0.1:99999\": port 99999 is not in 0..65535"},
      {"AM port above 65535",
       {"--config", dir_ + "/good.json", "--am", "127.0.0.1:70000"},
       "am_address: \"127.0.0.1:70000\": port 70000 is not in 0..65535"},
      {"advertised port 0",
       {"--config", dir_ + "/good.json", "--advertise", "10.0.0.1:0"},
       "--advertise \"10.0.0.1:0\": port 0 cannot be dialled"},
      {"log format", {"--config", dir_ + "/good.json", "--log-format", "xml"}, "--log-format"},
      {"neither TLS nor insecure",
       {"--config", dir_ + "/good.json", "--listen", AgentSocket(), "--pin-root", pin_root_},
       "no transport security configured"},
      {"certificate file missing",
       {"--config", dir_ + "/tls.json", "--listen", AgentSocket(), "--pin-root", pin_root_},
       "certificate file /nonexistent/x.pem"},
  };
  for (const Case& c : cases) {
    agents_.push_back(
        std::make_unique<AgentProcess>(sw_ns_, dir_ + "/fail" + std::to_string(agents_.size()) + ".log"));
    AgentProcess* a = agents_.back().get();
    a->Start(c.args);
    EXPECT_EQ(a->Wait(), 2) << c.name << "\n" << a->Log();
    EXPECT_NE(a->Log().find(c.words), std::string::npos) << c.name << ": " << a->Log();
  }
  EXPECT_NE(Sh("test -e " + pin_root_ + "/x"), 0) << "a failed start leaves no pins";
  EXPECT_NE(Sh("ip -n " + sw_ns_ + " link show p0 | grep -q xdp"), 0) << "a failed start attaches no XDP";
}

TEST_F(SwitchLab, VersionFlagPrintsTheProjectVersionAndExitsZero) {
  agents_.push_back(std::make_unique<AgentProcess>(sw_ns_, dir_ + "/version.log"));
  AgentProcess* a = agents_.back().get();
  a->Start({"--version"});
  EXPECT_EQ(a->Wait(), 0);
  EXPECT_EQ(a->Log(), std::string("incswitchd ") + kVersion + "\n");
}

}  // namespace
}  // namespace inc
