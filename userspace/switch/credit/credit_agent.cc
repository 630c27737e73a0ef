// SPDX-License-Identifier: Apache-2.0
#include "switch/credit/credit_agent.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace inc::sw {
namespace {

constexpr size_t kMaxEvents = 64;
constexpr uint64_t kHoldLimitBytes = 64ull << 20;  // all flows together
constexpr uint32_t kMaxIdleTickMs = 8;             // poll period of an idle agent, at most
constexpr uint32_t kHoldChunks = 2048;             // per rx queue: 4 MiB of UMEM

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

credit::FlowId ToFlowId(const CreditFlowId& c) {
  credit::FlowId f;
  f.src_ip = c.src.host;
  f.dst_ip = c.dst.host;
  f.src_port = c.udp_sport;
  f.dest_qpn = c.dest_qpn;
  return f;
}

dp::CreditFlowKey ToGateKey(const credit::FlowId& f) {
  dp::CreditFlowKey k;
  k.src.host = f.src_ip;
  k.dst.host = f.dst_ip;
  k.sport = f.src_port;
  k.dest_qpn = f.dest_qpn;
  return k;
}

v1::CreditFlowKey ToProto(const credit::FlowId& f) {
  v1::CreditFlowKey k;
  Ipv4 a;
  a.host = f.src_ip;
  k.set_src_ip(a.ToString());
  a.host = f.dst_ip;
  k.set_dst_ip(a.ToString());
  k.set_udp_sport(f.src_port);
  k.set_dest_qpn(f.dest_qpn);
  return k;
}

std::string Addr(uint32_t host) {
  Ipv4 a;
  a.host = host;
  return a.ToString();
}

const credit::NextHopStatus* PrimaryOf(const credit::FlowStatus& st) {
  for (const auto& h : st.next_hops)
    if (h.state == credit::HopState::kPrimary) return &h;
  return nullptr;
}

// The keys the node believes besides its signing key.
credit::KeyRing PeerKeys(const CreditSettings& s) {
  credit::KeyRing keys;
  for (const auto& [id, key] : s.accept_keys) keys[id] = key;
  return keys;
}

}  // namespace

Expected<std::unique_ptr<CreditAgent>> CreditAgent::Start(CreditSettings settings,
                                                          const dp::Datapath& datapath,
                                                          const std::vector<std::string>& data_ports,
                                                          const std::string& switch_name) {
  auto table = dp::CreditTable::Open(datapath);
  if (!table.ok()) return table.status();
  // A table left by an earlier agent (pinned maps) holds flows nobody owns.
  if (auto old = table->ListFlows(); old.ok())
    for (const auto& f : *old) (void)table->RemoveFlow(f.key);
  auto socket = RsvpSocket::Open();
  if (!socket.ok()) return socket.status();
  std::unique_ptr<CreditAgent> a(
      new CreditAgent(std::move(settings), std::move(*table), std::move(*socket), switch_name));
  auto hold = dp::HoldQueue::Open(&a->table_, data_ports, kHoldLimitBytes, kHoldChunks);
  if (!hold.ok()) return Status(hold.status().code(), "hold queue: " + hold.status().message());
  a->hold_ = std::move(*hold);

  const CreditSettings& s = a->settings_;
  credit::NodeConfig nc;
  nc.name = switch_name;
  for (const auto& p : s.ports) {
    auto info = GetInterfaceInfo(p.name);
    if (!info.ok()) return info.status();
    if (!info->ip.host) return FailedPrecondition("credit port " + p.name + " has no IPv4 address");
    nc.interfaces.push_back({p.name, info->ip.host, p.neighbor.host, p.cost});
  }
  // Without a key every switch signs with key id 0 and the zero key: the
  // format is the same, corruption is caught, forgery is not.
  nc.key_id = s.authenticate ? s.key_id : 0;
  nc.key = s.key;
  nc.peer_keys = PeerKeys(s);
  nc.heartbeat_ms = s.heartbeat_ms;
  nc.reserve_bytes = s.reserve_bytes;
  nc.unit = s.megabyte_unit ? credit::CreditUnit::kMegabytes : credit::CreditUnit::kBytes;
  nc.quantum_bytes = s.return_quantum_bytes;
  nc.flush_ms = s.return_flush_ms;
  nc.refresh_ms = s.refresh_ms;
  for (const auto& p : s.local_prefixes) nc.local_prefixes.push_back({p.addr.host, p.length});
  CreditAgent* self = a.get();
  auto node = credit::Node::Create(
      nc, [] { return NowNs(); },
      [self](const std::vector<uint8_t>& bytes, const std::string& interface) {
        const CreditPort* p = self->Port(interface);
        if (!p) return;
        self->signalling_bytes_ += bytes.size();
        if (!self->socket_.Send(bytes, p->neighbor, p->ifindex, 64).ok()) self->send_errors_++;
      },
      [self](const credit::Event& e) { self->OnEvent(e); });
  if (!node.ok()) return node.status();
  a->node_ = std::move(*node);

  {
    std::lock_guard<std::mutex> lock(a->mu_);
    for (const auto& f : s.flows) {
      credit::FlowConfig fc;
      fc.flow = ToFlowId(f.id);
      fc.role = credit::Role::kSenderGateway;
      for (size_t i : f.ports) fc.downstream.push_back(s.ports[i].name);
      INC_RETURN_IF_ERROR(a->node_->ConfigureFlow(fc));
      INC_RETURN_IF_ERROR(a->node_->StartFlow(fc.flow));
    }
    a->SyncFlows();
  }
  a->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (a->wake_fd_ < 0) return ErrnoStatus("eventfd", errno);
  a->thread_ = std::thread([self] { self->Loop(); });
  LOG_INFO << "credit: " << s.ports.size() << " credit ports, " << s.flows.size() << " sender-gateway flows, "
           << s.local_prefixes.size() << " local prefixes, buffer " << s.reserve_bytes << " B/flow, quantum "
           << s.return_quantum_bytes << " B, heartbeat " << s.heartbeat_ms << " ms";
  return a;
}

CreditAgent::CreditAgent(CreditSettings settings, dp::CreditTable table, RsvpSocket socket,
                         std::string switch_name)
    : settings_(std::move(settings)),
      switch_name_(std::move(switch_name)),
      table_(std::move(table)),
      socket_(std::move(socket)) {}

CreditAgent::~CreditAgent() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (node_) {
    for (const auto& f : settings_.flows) {
      auto st = node_->Terminate(ToFlowId(f.id));
      if (st.ok()) {
        LOG_INFO << "credit: flow " << f.id.ToString() << " ended (PathTear sent)";
      }
    }
  }
  for (const auto& [id, g] : gate_) (void)table_.RemoveFlow(g.key);
  gate_.clear();
  hold_.reset();
  if (wake_fd_ >= 0) close(wake_fd_);
}

const CreditPort* CreditAgent::Port(const std::string& name) const {
  for (const auto& p : settings_.ports)
    if (p.name == name) return &p;
  return nullptr;
}

void CreditAgent::EventLocked(const std::string& what) {
  LOG_INFO << "credit: " << what;
  events_.push_back(what);
  while (events_.size() > kMaxEvents) events_.pop_front();
}

void CreditAgent::OnEvent(const credit::Event& e) {
  std::string what = std::string(credit::EventKindName(e.kind)) + " " + e.flow.ToString();
  if (!e.interface.empty()) what += " via " + e.interface;
  EventLocked(what);
}

Status CreditAgent::Retune(const CreditSettings& next) {
  std::lock_guard<std::mutex> lock(mu_);
  INC_RETURN_IF_ERROR(node_->Retune(next.return_quantum_bytes, next.return_flush_ms, next.refresh_ms));
  return node_->Rekey(next.authenticate ? next.key_id : 0, next.key, PeerKeys(next));
}

void CreditAgent::Loop() {
  std::vector<pollfd> fds;
  fds.push_back({wake_fd_, POLLIN, 0});
  fds.push_back({socket_.fd(), POLLIN, 0});
  for (int fd : hold_->fds()) fds.push_back({fd, POLLIN, 0});
  // 1 ms while anything moves: credit returns and held frames must not wait
  // for a packet. Idle, the tick backs off (RSVP and held frames wake the
  // loop at once), so an idle switch costs little CPU; what it delays is the
  // first credit return of a flow that starts through XDP alone.
  const int idle_tick_ms =
      static_cast<int>(std::clamp<uint32_t>(settings_.heartbeat_ms / 4, 1, kMaxIdleTickMs));
  int tick_ms = 1;
  while (!stop_) {
    poll(fds.data(), fds.size(), tick_ms);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    Step(NowNs());
    tick_ms = busy_ ? 1 : std::min(tick_ms * 2, idle_tick_ms);
  }
}

void CreditAgent::Step(uint64_t now_ns) {
  ReceiveRsvp();
  if (hold_->Intake()) busy_ = true;
  SyncFlows();
  hold_->Drain(now_ns);
  node_->Tick();
  auto held = hold_->Held();
  for (const auto& [id, g] : gate_) {
    auto it = held.find(g.key);
    uint64_t bytes = it == held.end() ? 0 : it->second.bytes;
    if (bytes) busy_ = true;
    (void)node_->SetQueuedBytes(id, bytes);
  }
}

void CreditAgent::ReceiveRsvp() {
  for (int i = 0; i < 256; i++) {
    auto d = socket_.Receive();
    if (!d.ok()) return;
    busy_ = true;
    std::string in;
    for (const auto& p : settings_.ports)
      if (p.ifindex == d->ifindex) in = p.name;
    // A message on a port without credit signalling is counted by the node.
    node_->Receive(d->message.data(), d->message.size(),
                   in.empty() ? "ifindex " + std::to_string(d->ifindex) : in);
  }
}

// Desired state (the node's flows and their primaries) onto the gate.
void CreditAgent::SyncFlows() {
  auto flows = node_->Flows();
  std::set<credit::FlowId> live;
  for (const auto& st : flows) {
    live.insert(st.flow);
    auto it = gate_.find(st.flow);
    if (it == gate_.end()) {
      GateFlow g;
      g.key = ToGateKey(st.flow);
      g.role = st.role;
      dp::CreditHop hop;
      hop.count_only = st.role == credit::Role::kReceiverGateway;
      auto index = table_.AddFlow(g.key, hop);
      if (!index.ok()) {
        EventLocked("cannot add flow " + st.flow.ToString() + " to the gate: " + index.status().ToString());
        continue;
      }
      g.index = *index;
      hold_->ForgetIndex(g.index);
      it = gate_.emplace(st.flow, g).first;
      EventLocked(std::string("gate: flow ") + st.flow.ToString() + " as " + credit::RoleName(st.role));
    }
    GateFlow& g = it->second;
    if (g.role != credit::Role::kReceiverGateway) SyncCredit(g, st);
    ReturnFreed(g, st);
  }
  for (auto it = gate_.begin(); it != gate_.end();) {
    if (live.count(it->first)) {
      ++it;
      continue;
    }
    (void)table_.RemoveFlow(it->second.key);
    hold_->Forget(it->second.key);
    hold_->ForgetIndex(it->second.index);
    EventLocked("gate: flow " + it->first.ToString() + " removed");
    it = gate_.erase(it);
  }
}

// The gate sends against the primary next hop's credit: the bytes it
// consumed since the last step are charged to the node's ledger, and the
// gate's 'granted' is set so that its available credit equals the ledger's.
void CreditAgent::SyncCredit(GateFlow& g, const credit::FlowStatus& st) {
  const credit::NextHopStatus* primary = PrimaryOf(st);
  std::string want = primary ? primary->interface : "";
  dp::CreditCounters c = table_.ReadIndex(g.index);
  uint64_t delta = c.consumed - g.synced_consumed;
  if (want != g.primary) {
    // Failover (or the first RESV). Bytes the gate sent toward the old
    // primary since the last step are not charged to the new one: they are
    // the failed hop's (docs/credit.md "What happens to the bytes in
    // flight"); the new primary starts from its own account.
    dp::CreditHop hop;
    if (primary) {
      const CreditPort* p = Port(primary->interface);
      if (p) {
        hop.port = p->name;
        hop.mac = p->next_hop_mac;
      }
    }
    // Zero credit first, so no frame goes to the new hop on the old credit.
    (void)table_.SetGranted(g.key, c.consumed);
    if (auto s = table_.SetNextHop(g.key, hop); !s.ok()) EventLocked("gate: " + s.ToString());
    g.primary = want;
    g.synced_consumed = c.consumed;
    delta = 0;
    EventLocked("gate: flow " + st.flow.ToString() + " -> " + (want.empty() ? "hold (no next hop)" : want));
  }
  if (!primary) return;
  if (delta) {
    busy_ = true;
    auto r = node_->Consume(st.flow, delta);
    if (!r.ok()) ledger_mismatch_++;
    g.synced_consumed = c.consumed;
  }
  auto now = node_->Flow(st.flow);
  if (!now.ok()) return;
  const credit::NextHopStatus* p = PrimaryOf(*now);
  if (!p) return;
  (void)table_.SetGranted(g.key, g.synced_consumed + p->available);
}

// Bytes that came in from an upstream and left this switch (by XDP or the
// hold queue) go back to that upstream as credit.
void CreditAgent::ReturnFreed(GateFlow& g, const credit::FlowStatus& st) {
  for (const auto& up : st.upstreams) {
    const CreditPort* p = Port(up.interface);
    if (!p) continue;
    auto it = g.freed_seen.find(up.interface);
    if (it == g.freed_seen.end()) {
      (void)table_.WatchIngress(g.index, p->ifindex);
      it = g.freed_seen.emplace(up.interface, 0).first;
    }
    auto xdp = table_.IngressBytes(g.index, p->ifindex);
    uint64_t total = (xdp.ok() ? *xdp : 0) + hold_->SentBytes(g.index, p->ifindex);
    if (total != it->second) {
      busy_ = true;
      (void)node_->Forwarded(st.flow, up.interface, total - it->second);
      it->second = total;
    }
  }
}

v1::CreditStatus CreditAgent::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::CreditStatus r;
  r.set_switch_name(switch_name_);
  r.set_enabled(true);
  uint64_t now = NowNs();
  auto held = hold_->Held();
  uint64_t data_bytes = 0;
  for (const auto& st : node_->Flows()) {
    auto* f = r.add_flows();
    *f->mutable_flow() = ToProto(st.flow);
    f->set_role(credit::RoleName(st.role));
    for (const auto& h : st.next_hops) {
      auto* hop = f->add_hops();
      hop->set_port(h.interface);
      hop->set_neighbor(Addr(h.address));
      hop->set_state(credit::HopStateName(h.state));
      hop->set_granted(h.granted);
      hop->set_consumed(h.consumed);
      hop->set_available(h.available);
      hop->set_last_return_ms_ago(
          h.last_return_ns && now > h.last_return_ns ? (now - h.last_return_ns) / 1000000 : 0);
    }
    for (const auto& u : st.upstreams) {
      auto* up = f->add_upstreams();
      up->set_port(u.interface);
      up->set_neighbor(Addr(u.address));
      up->set_freed_total(u.freed_total);
      up->set_resv_messages(u.resv_messages);
      up->set_resv_bytes(u.resv_bytes);
      up->set_overhead(u.overhead);
      data_bytes += u.data_bytes;
    }
    f->set_messages_in(st.messages_in);
    f->set_messages_out(st.messages_out);
    auto g = gate_.find(st.flow);
    if (g != gate_.end()) {
      auto it = held.find(g->second.key);
      if (it != held.end()) {
        f->set_queued_packets(it->second.frames);
        f->set_queued_bytes(it->second.bytes);
      }
      if (g->second.role != credit::Role::kReceiverGateway) {
        uint64_t consumed = table_.ReadIndex(g->second.index).consumed;
        f->set_forwarded_bytes(consumed);
        if (st.role == credit::Role::kSenderGateway) data_bytes += consumed;
      }
      for (const auto& [port, bytes] : g->second.freed_seen) {
        (void)port;
        if (g->second.role == credit::Role::kReceiverGateway)
          f->set_forwarded_bytes(f->forwarded_bytes() + bytes);
      }
    }
  }
  r.set_signalling_bytes(signalling_bytes_);
  r.set_data_bytes(data_bytes);
  const auto& c = node_->counters();
  for (size_t i = 0; i < c.rejects.size(); i++)
    (*r.mutable_rejects())[credit::RejectName(static_cast<credit::Reject>(i))] = c.rejects[i];
  auto& sig = *r.mutable_signalling();
  sig["received"] = c.received;
  sig["sent"] = c.sent;
  sig["send_errors"] = send_errors_;
  sig["unknown_interface"] = c.unknown_interface;
  sig["wrong_neighbour"] = c.wrong_neighbour;
  sig["unknown_flow"] = c.unknown_flow;
  sig["unexpected"] = c.unexpected;
  sig["resv_tears"] = c.resv_tears;
  sig["ledger_mismatch"] = ledger_mismatch_;
  if (auto stats = table_.ReadStats(); stats.ok())
    for (const auto& [k, v] : *stats) (*r.mutable_datapath())[k] = v;
  auto hs = hold_->stats();
  auto& hq = *r.mutable_hold_queue();
  hq["received"] = hs.received;
  hq["sent"] = hs.sent;
  hq["sent_bytes"] = hs.sent_bytes;
  hq["dropped_no_flow"] = hs.dropped_no_flow;
  hq["dropped_overflow"] = hs.dropped_overflow;
  hq["dropped_malformed"] = hs.dropped_malformed;
  hq["send_errors"] = hs.send_errors;
  hq["reconciled"] = hs.reconciled;
  hq["kernel_drops"] = hs.kernel_drops;
  for (const auto& e : events_) r.add_events(e);
  return r;
}

}  // namespace inc::sw
