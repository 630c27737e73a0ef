// SPDX-License-Identifier: Apache-2.0
#include "am/tests/recording_agent.h"

#include <cstdio>
#include <set>

namespace inc::am::testing {

RecordingAgent::~RecordingAgent() {
  Shutdown();
}

void RecordingAgent::Start() {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
}

void RecordingAgent::Shutdown() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_.reset();
  }
}

void RecordingAgent::FailConfigure(grpc::Status status) {
  std::lock_guard<std::mutex> lk(mu_);
  configure_status_ = std::move(status);
}

std::vector<v1::TreeConfig> RecordingAgent::configures() {
  std::lock_guard<std::mutex> lk(mu_);
  return configures_;
}
std::vector<uint32_t> RecordingAgent::removes() {
  std::lock_guard<std::mutex> lk(mu_);
  return removes_;
}
std::map<uint32_t, v1::TreeConfig> RecordingAgent::trees() {
  std::lock_guard<std::mutex> lk(mu_);
  return trees_;
}

grpc::Status RecordingAgent::GetCapabilities(grpc::ServerContext*, const v1::GetCapabilitiesRequest*,
                                             v1::GetCapabilitiesResponse* resp) {
  resp->set_switch_name(name_);
  return grpc::Status::OK;
}

grpc::Status RecordingAgent::ConfigureTree(grpc::ServerContext*, const v1::ConfigureTreeRequest* req,
                                           v1::ConfigureTreeResponse* resp) {
  std::lock_guard<std::mutex> lk(mu_);
  configures_.push_back(req->tree());
  if (!configure_status_.ok()) return configure_status_;
  auto& slot = trees_[req->tree().tree_id()];
  resp->set_changed(slot.SerializeAsString() != req->tree().SerializeAsString());
  slot = req->tree();
  return grpc::Status::OK;
}

grpc::Status RecordingAgent::RemoveTree(grpc::ServerContext*, const v1::RemoveTreeRequest* req,
                                        v1::RemoveTreeResponse* resp) {
  std::lock_guard<std::mutex> lk(mu_);
  removes_.push_back(req->tree_id());
  resp->set_existed(trees_.erase(req->tree_id()) > 0);
  return grpc::Status::OK;
}

grpc::Status RecordingAgent::GetStats(grpc::ServerContext*, const v1::GetStatsRequest* req,
                                      v1::GetStatsResponse* resp) {
  std::lock_guard<std::mutex> lk(mu_);
  v1::SwitchStats* s = resp->mutable_stats();
  s->set_switch_name(name_);
  for (const auto& [id, cfg] : trees_) {
    if (req->tree_id() && req->tree_id() != id) continue;
    v1::TreeCounters* tc = s->add_trees();
    tc->set_tree_id(id);
    // Stand-in counter a test can check: children configured.
    tc->mutable_counters()->set_rx_packets(cfg.children_size());
  }
  return grpc::Status::OK;
}

grpc::Status RecordingAgent::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                    v1::HealthResponse* resp) {
  std::lock_guard<std::mutex> lk(mu_);
  resp->set_switch_name(name_);
  resp->set_serving(true);
  for (const auto& [id, cfg] : trees_) resp->add_tree_ids(id);
  return grpc::Status::OK;
}

namespace {
std::string Two(int v) {
  char b[16];
  std::snprintf(b, sizeof b, "%02d", v);
  return b;
}
std::string HostIp(int g) {
  return "10.1." + std::to_string(g / 200) + "." + std::to_string(g % 200 + 10);
}
std::string HostMac(int g) {
  char b[32];
  std::snprintf(b, sizeof b, "02:10:00:00:%02x:%02x", (g >> 8) & 0xff, g & 0xff);
  return b;
}
}  // namespace

v1::TopologyFile MakeFabric(int leaves, int spines, int hosts_per_leaf) {
  v1::TopologyFile t;
  for (int l = 0; l < leaves; ++l) {
    auto* s = t.add_switches();
    s->set_name("leaf" + Two(l));
    s->set_kind("leaf");
  }
  for (int s = 0; s < spines; ++s) {
    auto* sw = t.add_switches();
    sw->set_name("spine" + std::to_string(s));
    sw->set_kind("spine");
  }
  for (int l = 0; l < leaves; ++l)
    for (int i = 0; i < hosts_per_leaf; ++i) {
      int g = l * hosts_per_leaf + i;
      auto* h = t.add_hosts();
      h->set_name("h" + Two(l) + "_" + std::to_string(i));
      h->set_ip(HostIp(g));
      h->set_mac(HostMac(g));
      h->set_switch_name("leaf" + Two(l));
      h->set_switch_port("h" + std::to_string(i));
    }
  for (int l = 0; l < leaves; ++l)
    for (int s = 0; s < spines; ++s) {
      auto* k = t.add_links();
      k->set_a("leaf" + Two(l));
      k->set_a_port("up" + std::to_string(s));
      k->set_b("spine" + std::to_string(s));
      k->set_b_port("dn" + Two(l));
    }
  return t;
}

v1::RegisterSwitchRequest MakeRegistration(const v1::TopologyFile& topo, const std::string& name,
                                           const std::string& agent_address, uint32_t slot_capacity) {
  std::set<std::string> ports;
  for (const auto& h : topo.hosts())
    if (h.switch_name() == name) ports.insert(h.switch_port());
  for (const auto& l : topo.links()) {
    if (l.a() == name) ports.insert(l.a_port());
    if (l.b() == name) ports.insert(l.b_port());
  }
  int switch_index = 0;
  for (int i = 0; i < topo.switches_size(); ++i)
    if (topo.switches(i).name() == name) switch_index = i;
  v1::RegisterSwitchRequest r;
  r.set_switch_name(name);
  r.set_agent_address(agent_address);
  auto* c = r.mutable_capabilities();
  for (int v = 1; v <= 6; ++v) c->add_dtypes(static_cast<v1::DataType>(v));
  for (int v = 1; v <= 3; ++v) c->add_ops(static_cast<v1::ReduceOp>(v));
  for (int v = 1; v <= 6; ++v) c->add_collectives(static_cast<v1::Collective>(v));
  c->set_max_children(64);
  c->set_slot_capacity(slot_capacity);
  c->set_free_slots(slot_capacity);
  c->set_max_trees(1023);
  c->set_max_elems_per_packet(504);
  int p = 0;
  for (const auto& name_of_port : ports) {
    auto* port = r.add_ports();
    port->set_name(name_of_port);
    port->set_ifindex(100 + p);
    char mac[32];
    std::snprintf(mac, sizeof mac, "02:20:00:%02x:%02x:01", switch_index & 0xff, p & 0xff);
    port->set_mac(mac);
    port->set_ip("10.2." + std::to_string(switch_index) + "." + std::to_string(p + 1));
    port->set_mtu(1500);
    port->set_up(true);
    port->set_xdp_attached(true);
    port->set_xdp_mode("native");
    ++p;
  }
  return r;
}

v1::JoinGroupRequest MakeJoin(const std::string& job, uint32_t rank, uint32_t world, const std::string& host,
                              uint32_t timeout_ms) {
  v1::JoinGroupRequest j;
  j.set_job_id(job);
  j.set_rank(rank);
  j.set_world_size(world);
  j.set_timeout_ms(timeout_ms);
  auto* m = j.mutable_member();
  m->set_host(host);
  m->set_qpn(0x1000 + rank);
  m->set_rkey(0xabc0 + rank);
  m->set_va_base(0x7f0000000000ull + rank * 0x100000ull);
  m->set_slot_stride(1024);
  m->set_transport(v1::TRANSPORT_AF_XDP);
  return j;
}

}  // namespace inc::am::testing
