// SPDX-License-Identifier: Apache-2.0
// am_bench: how fast the AM builds trees and answers JoinGroup.
//  1. Tree build + resource allocation for 1024 members over 64 leaves and 8
//     spines, on the simulated topology (no gRPC in the timed part).
//  2. JoinGroup throughput over real gRPC on loopback: 1024 members join
//     concurrently; the 72 switches are in-process SwitchAgent recorders.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "am/convert.h"
#include "am/manager.h"
#include "am/resources.h"
#include "am/service.h"
#include "am/tests/recording_agent.h"
#include "am/topology.h"
#include "am/tree_builder.h"
#include "common/log.h"

using namespace inc;
using namespace inc::am;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kLeaves = 64, kSpines = 8, kHostsPerLeaf = 16;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Summary {
  double min, median, max;
};
Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

int BenchBuild(const v1::TopologyFile& file) {
  Topology topo = *TopologyFromProto(file);
  std::map<std::string, SwitchView> views;
  ResourcePool pool;
  for (const auto& s : file.switches()) {
    auto reg = testing::MakeRegistration(file, s.name(), "127.0.0.1:1", 65536);
    SwitchView v;
    v.name = s.name();
    v.registered = v.alive = true;
    v.caps = *CapsFromProto(reg.capabilities());
    for (const auto& p : reg.ports()) v.ports[p.name()] = *PortFromProto(p);
    views[v.name] = v;
    pool.SetSwitchCapacity(s.name(), 65536);
  }
  std::vector<MemberPlacement> members;
  for (uint32_t r = 0; r < static_cast<uint32_t>(file.hosts_size()); ++r)
    members.push_back({r, file.hosts(r).name()});
  Requirements req;
  std::vector<double> build, alloc;
  for (int i = 0; i < 50; ++i) {
    for (auto& [n, v] : views) pool.Describe(n, &v);
    auto t0 = Clock::now();
    auto plan = BuildTreePlan(topo, views, members, req);
    auto t1 = Clock::now();
    if (!plan) {
      std::fprintf(stderr, "build failed: %s\n", plan.status().ToString().c_str());
      return 1;
    }
    auto a = pool.Allocate(*plan);
    auto t2 = Clock::now();
    if (!a) {
      std::fprintf(stderr, "allocation failed: %s\n", a.status().ToString().c_str());
      return 1;
    }
    build.push_back(Ms(t1 - t0));
    alloc.push_back(Ms(t2 - t1));
    pool.Free(*plan, *a);
  }
  Summary b = Summarize(build), al = Summarize(alloc);
  std::printf(
      "tree build (1024 members, 64 leaves, 8 spines), 50 runs: min %.3f ms, median %.3f ms, max %.3f ms\n",
      b.min, b.median, b.max);
  std::printf(
      "resource allocation (65 switches of the tree: 1152 QPNs, 65 slot ranges): min %.3f ms, median %.3f "
      "ms, max %.3f "
      "ms\n",
      al.min, al.median, al.max);

  // The same through the manager (CreateTree: build + allocate + the tree's view).
  AmOptions opts;
  Manager m(opts, topo);
  for (const auto& s : file.switches())
    (void)m.RegisterSwitch(
        *RegistrationFromProto(testing::MakeRegistration(file, s.name(), "127.0.0.1:1", 65536)));
  std::vector<double> create;
  for (int i = 0; i < 20; ++i) {
    CreateTreeRequest c;
    c.job = "bench" + std::to_string(i);
    for (const auto& h : file.hosts()) c.hosts.push_back(h.name());
    auto t0 = Clock::now();
    auto t = m.CreateTree(c);
    create.push_back(Ms(Clock::now() - t0));
    if (!t) {
      std::fprintf(stderr, "CreateTree failed: %s\n", t.status().ToString().c_str());
      return 1;
    }
    (void)m.DestroyTree(t->tree_id, "");
  }
  Summary c = Summarize(create);
  std::printf(
      "Manager::CreateTree (1024 hosts, no gRPC), 20 runs: min %.3f ms, median %.3f ms, max %.3f ms\n", c.min,
      c.median, c.max);
  return 0;
}

int BenchJoin(const v1::TopologyFile& file) {
  std::map<std::string, std::unique_ptr<testing::RecordingAgent>> agents;
  for (const auto& s : file.switches()) {
    auto a = std::make_unique<testing::RecordingAgent>(s.name());
    a->Start();
    agents[s.name()] = std::move(a);
  }
  AmOptions opts;
  opts.member_heartbeat_timeout_ms = 600000;
  opts.switch_heartbeat_timeout_ms = 600000;
  Manager m(opts, *TopologyFromProto(file));
  AmService service(&m);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  m.Start();
  const std::string target = "127.0.0.1:" + std::to_string(port);
  for (const auto& s : file.switches()) {
    auto reg =
        RegistrationFromProto(testing::MakeRegistration(file, s.name(), agents[s.name()]->address(), 65536));
    if (!reg || !m.RegisterSwitch(*reg).ok()) return 1;
  }
  // Several channels (separate connections) so no per-connection stream limit
  // holds members back.
  constexpr int kChannels = 16;
  std::vector<std::unique_ptr<v1::AggregationManager::Stub>> stubs;
  for (int i = 0; i < kChannels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("bench.channel", i);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(v1::AggregationManager::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  const int world = file.hosts_size();
  for (int round = 0; round < 3; ++round) {
    struct Call {
      grpc::ClientContext ctx;
      v1::JoinGroupResponse resp;
      grpc::Status status;
      std::unique_ptr<grpc::ClientAsyncResponseReader<v1::JoinGroupResponse>> rpc;
    };
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Call>> calls;
    const std::string job = "join" + std::to_string(round);
    auto t0 = Clock::now();
    for (int r = 0; r < world; ++r) {
      auto c = std::make_unique<Call>();
      auto req = testing::MakeJoin(job, r, world, file.hosts(r).name(), 120000);
      c->rpc = stubs[r % kChannels]->AsyncJoinGroup(&c->ctx, req, &cq);
      c->rpc->Finish(&c->resp, &c->status, reinterpret_cast<void*>(static_cast<intptr_t>(r)));
      calls.push_back(std::move(c));
    }
    int failed = 0;
    for (int n = 0; n < world; ++n) {
      void* tag;
      bool ok;
      cq.Next(&tag, &ok);
      if (!calls[reinterpret_cast<intptr_t>(tag)]->status.ok()) ++failed;
    }
    auto t1 = Clock::now();
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
    if (failed) {
      std::fprintf(stderr, "%d joins failed, first: %s\n", failed, calls[0]->status.error_message().c_str());
      return 1;
    }
    auto t = m.GetTree({0, job});
    if (!t) return 1;
    std::printf(
        "round %d: 1024 concurrent JoinGroup over gRPC answered in %.1f ms (%.0f joins/s); "
        "AM build+alloc+configs %.2f ms, ConfigureTree on %d switches %.2f ms\n",
        round, Ms(t1 - t0), world / (Ms(t1 - t0) / 1000.0), t->build_us / 1000.0,
        static_cast<int>(t->switches.size()), t->program_us / 1000.0);
    auto td = Clock::now();
    (void)m.DestroyTree(t->tree_id, "");
    std::printf("round %d: DestroyTree (RemoveTree on %d switches) %.2f ms\n", round,
                static_cast<int>(t->switches.size()), Ms(Clock::now() - td));
  }
  m.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

}  // namespace

int main() {
  SetLogLevel(LogLevel::kWarn);
  auto file = testing::MakeFabric(kLeaves, kSpines, kHostsPerLeaf);
  if (int rc = BenchBuild(file)) return rc;
  return BenchJoin(file);
}
