// SPDX-License-Identifier: Apache-2.0
#include "credit/node.h"

#include <algorithm>

namespace inc::credit {
namespace {

constexpr uint64_t kNsPerMs = 1000000;

KeyRing AcceptedKeys(const NodeConfig& c) {
  KeyRing keys = c.peer_keys;
  keys[c.key_id & kKeyIdMask] = c.key;
  return keys;
}

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kSenderGateway: return "sender_gateway";
    case Role::kTransit: return "transit";
    case Role::kReceiverGateway: return "receiver_gateway";
  }
  return "unknown";
}

const char* HopStateName(HopState s) {
  switch (s) {
    case HopState::kPrimary: return "primary";
    case HopState::kBackup: return "backup";
    case HopState::kFailed: return "failed";
  }
  return "unknown";
}

const char* EventKindName(Event::Kind k) {
  switch (k) {
    case Event::Kind::kNextHopAdded: return "next_hop_added";
    case Event::Kind::kPrimaryChanged: return "primary_changed";
    case Event::Kind::kNextHopFailed: return "next_hop_failed";
    case Event::Kind::kNoPath: return "no_path";
    case Event::Kind::kFlowEnded: return "flow_ended";
    case Event::Kind::kNextHopRecovered: return "next_hop_recovered";
  }
  return "unknown";
}

Expected<std::unique_ptr<Node>> Node::Create(NodeConfig config, Clock clock, SendFn send, EventFn on_event) {
  if (!clock || !send) return InvalidArgument("credit node: clock and send callback are required");
  if (config.interfaces.empty()) return InvalidArgument("credit node " + config.name + ": no interfaces");
  for (size_t i = 0; i < config.interfaces.size(); i++)
    for (size_t j = i + 1; j < config.interfaces.size(); j++)
      if (config.interfaces[i].name == config.interfaces[j].name)
        return InvalidArgument("credit node " + config.name + ": interface " + config.interfaces[i].name +
                               " twice");
  if (config.heartbeat_ms < 3) return InvalidArgument("credit node: heartbeat_ms must be >= 3");
  if (config.reserve_bytes == 0) return InvalidArgument("credit node: reserve_bytes must be > 0");
  if (config.quantum_bytes == 0 || config.quantum_bytes > config.reserve_bytes)
    return InvalidArgument("credit node: quantum_bytes must be in 1..reserve_bytes (" +
                           std::to_string(config.reserve_bytes) + ")");
  if (config.unit == CreditUnit::kMegabytes &&
      (config.reserve_bytes % kBytesPerMegabyte || config.reserve_bytes / kBytesPerMegabyte > UINT32_MAX))
    return InvalidArgument("credit node: reserve_bytes must be a whole number of MB (2^20) for the MB unit");
  return std::unique_ptr<Node>(
      new Node(std::move(config), std::move(clock), std::move(send), std::move(on_event)));
}

Status Node::Retune(uint64_t quantum_bytes, uint32_t flush_ms, uint32_t refresh_ms) {
  if (quantum_bytes == 0 || quantum_bytes > config_.reserve_bytes)
    return InvalidArgument("credit node: quantum_bytes must be in 1..reserve_bytes (" +
                           std::to_string(config_.reserve_bytes) + ")");
  config_.quantum_bytes = quantum_bytes;
  config_.flush_ms = flush_ms;
  config_.refresh_ms = refresh_ms;
  for (auto& [id, f] : flows_)
    for (auto& [name, up] : f.upstreams) up.batcher.Rebatch(quantum_bytes, uint64_t{flush_ms} * kNsPerMs);
  return Status::Ok();
}

Status Node::Rekey(uint64_t key_id, const SipKey& key, const KeyRing& accepted) {
  auto same_id = accepted.find(key_id & kKeyIdMask);
  if (same_id != accepted.end() && same_id->second != key)
    return InvalidArgument("credit node: key id " + std::to_string(key_id) +
                           " is both the signing key's and an accepted key's, with another key");
  config_.key_id = key_id & kKeyIdMask;
  config_.key = key;
  config_.peer_keys = accepted;
  receiver_.SetKeys(AcceptedKeys(config_));
  signer_ = Signer(config_.key_id, config_.key, signer_.next_seq());
  return Status::Ok();
}

Node::Node(NodeConfig config, Clock clock, SendFn send, EventFn on_event)
    : config_(std::move(config)),
      clock_(std::move(clock)),
      send_(std::move(send)),
      on_event_(std::move(on_event)),
      receiver_(AcceptedKeys(config_)),
      // Sequence numbers start at the clock so a restarted node is not
      // taken for a replayer by peers that remember its last number.
      signer_(config_.key_id, config_.key, clock_()) {}

const Interface* Node::FindInterface(const std::string& name) const {
  for (const auto& i : config_.interfaces)
    if (i.name == name) return &i;
  return nullptr;
}

uint32_t Node::Lih(const std::string& name) const {
  for (size_t i = 0; i < config_.interfaces.size(); i++)
    if (config_.interfaces[i].name == name) return static_cast<uint32_t>(i + 1);
  return 0;
}

Credit Node::OwnCredit(uint64_t freed_total) const {
  Credit c;
  c.unit = config_.unit;
  c.buffer = config_.unit == CreditUnit::kMegabytes ? config_.reserve_bytes / kBytesPerMegabyte
                                                    : config_.reserve_bytes;
  c.freed_total = freed_total;
  return c;
}

void Node::Emit(Event::Kind kind, const FlowId& flow, const NextHop* hop) {
  if (!on_event_) return;
  Event e{kind, flow, hop ? hop->interface : std::string(), hop ? hop->address : 0};
  on_event_(e);
}

Node::NextHop* Node::Primary(FlowEntry& f) {
  for (auto& h : f.next_hops)
    if (h.state == HopState::kPrimary) return &h;
  return nullptr;
}

void Node::Send(FlowEntry* f, Message m, const std::string& interface) {
  const Interface* i = FindInterface(interface);
  m.hop = Hop{i ? i->ip : 0, Lih(interface)};
  auto bytes = signer_.Sign(m);
  counters_.sent++;
  if (f) f->messages_out++;
  send_(bytes, interface);
}

void Node::SendResv(FlowEntry& f, Upstream& up) {
  Message m;
  m.type = MsgType::kCreditResv;
  m.flow = f.flow;
  m.period_ms = config_.heartbeat_ms / 3;  // our keepalive period
  m.credit = OwnCredit(up.batcher.freed_total());
  const Interface* i = FindInterface(up.interface);
  m.hop = Hop{i ? i->ip : 0, Lih(up.interface)};
  auto bytes = signer_.Sign(m);
  up.batcher.Sent(clock_(), bytes.size());
  counters_.sent++;
  f.messages_out++;
  send_(bytes, up.interface);
}

Status Node::ConfigureFlow(const FlowConfig& fc) {
  if (fc.role != Role::kReceiverGateway && fc.downstream.empty())
    return InvalidArgument("flow " + fc.flow.ToString() + ": a " + RoleName(fc.role) +
                           " needs at least one downstream interface");
  for (const auto& d : fc.downstream)
    if (!FindInterface(d)) return NotFound("flow " + fc.flow.ToString() + ": no interface " + d);
  if (flows_.count(fc.flow))
    return AlreadyExists("flow " + fc.flow.ToString() + " already on " + config_.name);
  FlowEntry& f = flows_[fc.flow];
  f.flow = fc.flow;
  f.role = fc.role;
  f.configured = true;
  f.downstream = fc.downstream;
  return Status::Ok();
}

Status Node::StartFlow(const FlowId& flow) {
  auto it = flows_.find(flow);
  if (it == flows_.end())
    return NotFound("flow " + flow.ToString() + " is not configured on " + config_.name);
  FlowEntry& f = it->second;
  if (f.role != Role::kSenderGateway)
    return FailedPrecondition("flow " + flow.ToString() +
                              ": only the sender gateway starts it, this node is " + RoleName(f.role));
  f.path_flooded = true;
  FloodPath(f);
  return Status::Ok();
}

void Node::FloodPath(FlowEntry& f) {
  f.last_path_ns = clock_();
  for (const auto& d : f.downstream) {
    Message m;
    m.type = MsgType::kCreditPath;
    m.flow = f.flow;
    m.period_ms = config_.heartbeat_ms;
    Send(&f, m, d);
  }
}

void Node::FloodTear(FlowEntry& f, uint8_t ttl) {
  std::vector<std::string> out = f.downstream;
  for (const auto& h : f.next_hops)
    if (std::find(out.begin(), out.end(), h.interface) == out.end()) out.push_back(h.interface);
  for (const auto& d : out) {
    Message m;
    m.type = MsgType::kPathTear;
    m.flow = f.flow;
    m.send_ttl = ttl;
    Send(&f, m, d);
  }
}

Status Node::Terminate(const FlowId& flow) {
  auto it = flows_.find(flow);
  if (it == flows_.end()) return NotFound("flow " + flow.ToString() + " is not on " + config_.name);
  if (it->second.role != Role::kSenderGateway)
    return FailedPrecondition("flow " + flow.ToString() + ": only the sender gateway ends it");
  FloodTear(it->second, 64);
  flows_.erase(it);
  Emit(Event::Kind::kFlowEnded, flow, nullptr);
  return Status::Ok();
}

void Node::Receive(const uint8_t* data, size_t len, const std::string& interface) {
  counters_.received++;
  auto m = receiver_.Accept(data, len);
  counters_.rejects = receiver_.rejects();
  if (!m.ok()) return;
  const Interface* in = FindInterface(interface);
  if (!in) {
    counters_.unknown_interface++;
    return;
  }
  if (m->hop.address != in->neighbour_ip) {
    counters_.wrong_neighbour++;
    return;
  }
  switch (m->type) {
    case MsgType::kCreditPath: OnPath(*m, *in); break;
    case MsgType::kCreditResv: OnResv(*m, *in); break;
    case MsgType::kPathTear: OnTear(*m, *in); break;
    case MsgType::kResvTear: OnResvTear(*m, *in); break;
  }
}

bool Node::IsLocal(uint32_t address) const {
  for (const auto& [prefix, len] : config_.local_prefixes) {
    uint32_t mask = len == 0 ? 0 : ~0u << (32 - len);
    if ((address & mask) == (prefix & mask)) return true;
  }
  return false;
}

void Node::OnPath(const Message& m, const Interface& in) {
  auto it = flows_.find(m.flow);
  if (it == flows_.end()) {
    // A transit node learns the flow here and floods it away from `in`.
    FlowEntry& f = flows_[m.flow];
    f.flow = m.flow;
    f.role = IsLocal(m.flow.dst_ip) ? Role::kReceiverGateway : Role::kTransit;
    f.learned_from = in.name;
    if (f.role == Role::kTransit)
      for (const auto& i : config_.interfaces)
        if (i.name != in.name) f.downstream.push_back(i.name);
    it = flows_.find(m.flow);
  }
  FlowEntry& f = it->second;
  f.messages_in++;
  if (f.role == Role::kSenderGateway) {
    counters_.unexpected++;
    return;
  }
  auto up = f.upstreams.find(in.name);
  if (up == f.upstreams.end()) {
    uint64_t flush = config_.flush_ms * kNsPerMs, keepalive = config_.heartbeat_ms / 3 * kNsPerMs;
    up = f.upstreams
             .emplace(in.name, Upstream{in.name, in.neighbour_ip,
                                        ReturnBatcher(config_.quantum_bytes, flush, keepalive)})
             .first;
  }
  // Every device on the path answers upstream with its credit at once,
  // except a transit that knows its way on is dead (it had next hops and
  // none is live): its answer would only revive it as its upstream's next
  // hop and draw data it cannot forward. It answers again once a next hop
  // does (the PATH it floods on is how that one is found alive).
  if (f.role != Role::kTransit || f.next_hops.empty() || Primary(f)) SendResv(f, up->second);
  // A transit floods the first PATH and the refreshes that come the same
  // way; PATHs from other upstreams are answered only, so meshes do not loop.
  if (f.learned_from.empty()) f.learned_from = in.name;
  if (f.role == Role::kTransit && in.name == f.learned_from && m.send_ttl > 1) {
    f.path_flooded = true;
    for (const auto& d : f.downstream) {
      if (d == in.name) continue;
      Message out = m;
      out.send_ttl = static_cast<uint8_t>(m.send_ttl - 1);
      out.period_ms = config_.heartbeat_ms;
      Send(&f, out, d);
    }
  }
}

Node::FlowEntry* Node::KnownFlow(const Message& m) {
  auto it = flows_.find(m.flow);
  if (it == flows_.end()) {
    counters_.unknown_flow++;
    return nullptr;
  }
  it->second.messages_in++;
  return &it->second;
}

Node::NextHop* Node::NextHopOn(FlowEntry& f, const std::string& interface) {
  for (auto& h : f.next_hops)
    if (h.interface == interface) return &h;
  return nullptr;
}

void Node::OnResv(const Message& m, const Interface& in) {
  FlowEntry* flow = KnownFlow(m);
  if (!flow) return;
  FlowEntry& f = *flow;
  if (f.role == Role::kReceiverGateway) {
    counters_.unexpected++;
    return;
  }
  uint64_t now = clock_();
  NextHop* hop = NextHopOn(f, in.name);
  if (!hop) {
    const Interface* iface = FindInterface(in.name);
    f.next_hops.push_back(NextHop{in.name, m.hop.address, HopState::kBackup, CreditAccount(),
                                  LivenessMonitor(config_.heartbeat_ms * kNsPerMs), now,
                                  iface ? iface->cost : 0});
    hop = &f.next_hops.back();
    Emit(Event::Kind::kNextHopAdded, f.flow, hop);
    PreferCheapest(f, hop);
  } else if (hop->state == HopState::kFailed) {
    // Alive again (it answered a refreshed PATH or its link healed). What
    // was outstanding on it is gone: the account starts a new baseline.
    hop->account = CreditAccount();
    hop->live = LivenessMonitor(config_.heartbeat_ms * kNsPerMs);
    hop->state = HopState::kBackup;
    Emit(Event::Kind::kNextHopRecovered, f.flow, hop);
    // Non-revertive: a recovered hop does not take the flow back from a
    // live primary, even if it is cheaper; moving mid-stream from the path
    // with bytes queued to an empty one would reorder the flow. It is
    // primary again only when the current primary fails (or there is none).
    if (!Primary(f)) {
      hop->state = HopState::kPrimary;
      Emit(Event::Kind::kPrimaryChanged, f.flow, hop);
    }
  }
  hop->account.Grant(m.credit->BufferBytes(), m.credit->freed_total);
  hop->live.Returned(now);
  hop->last_return_ns = now;
}

void Node::FailHop(FlowEntry& f, NextHop& hop) {
  bool was_primary = hop.state == HopState::kPrimary;
  hop.state = HopState::kFailed;
  Emit(Event::Kind::kNextHopFailed, f.flow, &hop);
  if (!was_primary) return;
  NextHop* promoted = nullptr;
  for (auto& h : f.next_hops)
    if (h.state == HopState::kBackup && (!promoted || h.cost < promoted->cost)) promoted = &h;
  if (promoted) {
    promoted->state = HopState::kPrimary;
    Emit(Event::Kind::kPrimaryChanged, f.flow, promoted);
    return;
  }
  Emit(Event::Kind::kNoPath, f.flow, nullptr);
  if (f.role != Role::kTransit) return;
  for (const auto& [name, up] : f.upstreams) {
    Message m;
    m.type = MsgType::kResvTear;
    m.flow = f.flow;
    Send(&f, m, name);
  }
}

// A next hop gave the flow up (it has no way on): fail it now rather than
// after a heartbeat of silence.
void Node::OnResvTear(const Message& m, const Interface& in) {
  FlowEntry* flow = KnownFlow(m);
  if (!flow) return;
  FlowEntry& f = *flow;
  NextHop* hop = NextHopOn(f, in.name);
  if (!hop) {
    counters_.unexpected++;  // only a next hop of the flow may give it up
    return;
  }
  counters_.resv_tears++;
  if (hop->state != HopState::kFailed) FailHop(f, *hop);
}

void Node::PreferCheapest(FlowEntry& f, NextHop* candidate) {
  // The cheapest live next hop is the primary; on equal cost the one that
  // answered first keeps it (no flapping between equal paths).
  NextHop* primary = Primary(f);
  if (primary && primary->cost <= candidate->cost) return;
  if (primary) primary->state = HopState::kBackup;
  candidate->state = HopState::kPrimary;
  Emit(Event::Kind::kPrimaryChanged, f.flow, candidate);
}

void Node::OnTear(const Message& m, const Interface& in) {
  auto it = flows_.find(m.flow);
  if (it == flows_.end()) {
    counters_.unknown_flow++;  // e.g. the second copy over another path
    return;
  }
  FlowEntry& f = it->second;
  if (!f.upstreams.count(in.name)) {
    counters_.unexpected++;  // only an upstream may end the flow
    return;
  }
  if (f.role == Role::kTransit && m.send_ttl > 1) {
    FlowEntry copy = f;
    copy.downstream.erase(std::remove(copy.downstream.begin(), copy.downstream.end(), in.name),
                          copy.downstream.end());
    FloodTear(copy, static_cast<uint8_t>(m.send_ttl - 1));
  }
  FlowId flow = f.flow;
  flows_.erase(it);
  Emit(Event::Kind::kFlowEnded, flow, nullptr);
}

Expected<std::string> Node::Consume(const FlowId& flow, uint64_t bytes) {
  auto it = flows_.find(flow);
  if (it == flows_.end()) return NotFound("flow " + flow.ToString() + " is not on " + config_.name);
  NextHop* p = Primary(it->second);
  if (!p) return Unavailable("flow " + flow.ToString() + ": no live next hop");
  uint64_t before = p->account.Outstanding();
  if (!p->account.Consume(bytes))
    return ResourceExhausted("flow " + flow.ToString() + ": " + std::to_string(bytes) + " bytes > " +
                             std::to_string(p->account.Available()) + " credit on " + p->interface);
  p->live.Consumed(clock_(), before);
  return p->interface;
}

Status Node::Forwarded(const FlowId& flow, const std::string& from, uint64_t bytes) {
  auto it = flows_.find(flow);
  if (it == flows_.end()) return NotFound("flow " + flow.ToString() + " is not on " + config_.name);
  auto up = it->second.upstreams.find(from);
  if (up == it->second.upstreams.end())
    return NotFound("flow " + flow.ToString() + ": " + from + " is not an upstream interface");
  up->second.batcher.Freed(bytes, clock_());
  if (up->second.batcher.ShouldSend(clock_())) SendResv(it->second, up->second);
  return Status::Ok();
}

Status Node::SetQueuedBytes(const FlowId& flow, uint64_t bytes) {
  auto it = flows_.find(flow);
  if (it == flows_.end()) return NotFound("flow " + flow.ToString() + " is not on " + config_.name);
  it->second.queued_bytes = bytes;
  return Status::Ok();
}

void Node::Tick() {
  uint64_t now = clock_();
  for (auto& [id, f] : flows_) {
    if (f.role == Role::kSenderGateway && f.path_flooded && config_.refresh_ms &&
        now - f.last_path_ns >= config_.refresh_ms * kNsPerMs)
      FloodPath(f);
    NextHop* p = Primary(f);
    if (p && p->live.Expired(now, p->account.Outstanding())) FailHop(f, *p);
    // Keepalives say "alive, only back-pressured". A transit that has lost
    // every next hop of the flow is not: besides its ResvTear, it stays
    // silent, so its upstream's heartbeat expires even if the ResvTear was
    // lost (docs/credit.md "Failure beyond a transit"). Credit for bytes it
    // did forward still goes back.
    bool can_forward = f.role == Role::kReceiverGateway || Primary(f) != nullptr;
    for (auto& [name, up] : f.upstreams)
      if (up.batcher.ShouldSend(now, can_forward && f.queued_bytes > 0)) SendResv(f, up);
  }
}

std::vector<FlowStatus> Node::Flows() const {
  std::vector<FlowStatus> out;
  for (const auto& [id, f] : flows_) out.push_back(*Flow(id));
  return out;
}

Expected<FlowStatus> Node::Flow(const FlowId& flow) const {
  auto it = flows_.find(flow);
  if (it == flows_.end()) return NotFound("flow " + flow.ToString() + " is not on " + config_.name);
  const FlowEntry& f = it->second;
  FlowStatus s;
  s.flow = f.flow;
  s.role = f.role;
  s.queued_bytes = f.queued_bytes;
  s.messages_in = f.messages_in;
  s.messages_out = f.messages_out;
  for (const auto& h : f.next_hops) {
    NextHopStatus n;
    n.interface = h.interface;
    n.address = h.address;
    n.state = h.state;
    n.buffer = h.account.buffer();
    n.granted = h.account.granted_total();
    n.consumed = h.account.consumed_total();
    n.available = h.account.Available();
    n.outstanding = h.account.Outstanding();
    n.last_return_ns = h.last_return_ns;
    s.next_hops.push_back(n);
  }
  std::stable_sort(s.next_hops.begin(), s.next_hops.end(),
                   [](const NextHopStatus& a, const NextHopStatus& b) { return a.state < b.state; });
  for (const auto& [name, up] : f.upstreams) {
    UpstreamStatus u;
    u.interface = name;
    u.address = up.address;
    u.freed_total = up.batcher.freed_total();
    u.pending = up.batcher.pending();
    u.resv_messages = up.batcher.messages();
    u.resv_bytes = up.batcher.credit_wire_bytes();
    u.data_bytes = up.batcher.data_bytes();
    u.overhead = up.batcher.OverheadRatio();
    s.upstreams.push_back(u);
  }
  return s;
}

}  // namespace inc::credit
