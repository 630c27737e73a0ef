// SPDX-License-Identifier: Apache-2.0
// The per-switch RSVP credit signalling state machine, pure logic:
// the clock, the sending of a message on an interface and the report of
// events are injected, so incswitchd drives it from its RSVP socket and the
// unit tests drive a small in-memory network. Design: docs/credit.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "credit/ledger.h"
#include "credit/rsvp.h"

namespace inc::credit {

struct Interface {
  std::string name;
  uint32_t ip = 0;            // this node's address on the link (host order)
  uint32_t neighbour_ip = 0;  // the node at the other end
  uint32_t cost = 0;          // lower is preferred as the primary next hop
};

enum class Role { kSenderGateway, kTransit, kReceiverGateway };
const char* RoleName(Role r);
enum class HopState { kPrimary, kBackup, kFailed };
const char* HopStateName(HopState s);

struct NodeConfig {
  std::string name;
  std::vector<Interface> interfaces;
  uint64_t key_id = 1;  // 48 bits; our signing key
  SipKey key{};
  KeyRing peer_keys;  // keys we accept besides our own
  uint32_t heartbeat_ms = 300;
  uint64_t reserve_bytes = 1ull << 20;  // buffer this node holds per flow
  CreditUnit unit = CreditUnit::kBytes;
  uint64_t quantum_bytes = 64 * 1024;  // credit return batch
  uint32_t flush_ms = 10;              // return a partial batch after this
  uint32_t refresh_ms = 1000;          // sender gateway re-floods PATH; 0 = never
  // Destinations behind this node (address, prefix length; host order): a
  // PATH of a flow to one of them makes this node the flow's receiver
  // gateway, so the PATH goes no further.
  std::vector<std::pair<uint32_t, uint8_t>> local_prefixes;
};

// Per flow, on the nodes that know it in advance (the gateways). A transit
// node that has no FlowConfig learns the flow from the PATH and floods it on
// every interface but the one it came in on.
struct FlowConfig {
  FlowId flow;
  Role role = Role::kTransit;
  std::vector<std::string> downstream;  // interfaces toward the receiver
};

struct Event {
  enum class Kind { kNextHopAdded, kPrimaryChanged, kNextHopFailed, kNoPath, kFlowEnded, kNextHopRecovered };
  Kind kind;
  FlowId flow;
  std::string interface;  // the next hop's, when there is one
  uint32_t hop = 0;
};
const char* EventKindName(Event::Kind k);

struct NextHopStatus {
  std::string interface;
  uint32_t address = 0;
  HopState state = HopState::kBackup;
  uint64_t buffer = 0, granted = 0, consumed = 0, available = 0, outstanding = 0;
  uint64_t last_return_ns = 0;
};
struct UpstreamStatus {
  std::string interface;
  uint32_t address = 0;
  uint64_t freed_total = 0, pending = 0, resv_messages = 0, resv_bytes = 0, data_bytes = 0;
  double overhead = 0;  // credit bytes on the wire / data bytes freed
};
struct FlowStatus {
  FlowId flow;
  Role role = Role::kTransit;
  std::vector<NextHopStatus> next_hops;  // primary first
  std::vector<UpstreamStatus> upstreams;
  uint64_t queued_bytes = 0;
  uint64_t messages_in = 0, messages_out = 0;
};
struct NodeCounters {
  uint64_t received = 0, sent = 0;
  RejectCounts rejects{};
  uint64_t unknown_interface = 0;  // a message on an interface we do not have
  uint64_t wrong_neighbour = 0;    // RSVP_HOP is not that interface's neighbour
  uint64_t unknown_flow = 0;       // RESV/PathTear for a flow we hold no state of
  uint64_t unexpected = 0;         // e.g. a RESV at the receiver gateway
  uint64_t resv_tears = 0;         // ResvTears believed: a next hop gave up a flow
};

class Node {
 public:
  using Clock = std::function<uint64_t()>;  // nanoseconds, monotonic
  using SendFn = std::function<void(const std::vector<uint8_t>& message, const std::string& interface)>;
  using EventFn = std::function<void(const Event&)>;

  static Expected<std::unique_ptr<Node>> Create(NodeConfig config, Clock clock, SendFn send,
                                                EventFn on_event);

  Status ConfigureFlow(const FlowConfig& flow);
  // Sender gateway: flood a Credit-PATH on every downstream interface.
  Status StartFlow(const FlowId& flow);
  // Sender gateway: flood the PathTear and free the flow.
  Status Terminate(const FlowId& flow);
  // One RSVP message (the IP payload) that arrived on `interface`.
  void Receive(const uint8_t* data, size_t len, const std::string& interface);

  // Data path hooks. Consume: take credit on the primary next hop for a
  // packet; returns its interface, RESOURCE_EXHAUSTED when the credit does
  // not cover it (the caller holds the packet), UNAVAILABLE without a live
  // next hop. Forwarded: bytes that came from upstream on `from` left this
  // node's buffer; they return to that upstream in the next batch.
  Expected<std::string> Consume(const FlowId& flow, uint64_t bytes);
  Status Forwarded(const FlowId& flow, const std::string& from, uint64_t bytes);
  Status SetQueuedBytes(const FlowId& flow, uint64_t bytes);
  // Liveness checks and credit return batches due now.
  void Tick();
  // New credit return batching (quantum 1..reserve_bytes, flush interval)
  // for every upstream, and a new PATH refresh interval (0 = never). What
  // neighbours learned from us (heartbeat period, reserve) cannot change
  // without signalling it, so it is not taken here.
  Status Retune(uint64_t quantum_bytes, uint32_t flush_ms, uint32_t refresh_ms);
  // Key rotation: sign from now on with `key` under `key_id` and believe it
  // and the `accepted` ones. Our sequence numbers go on growing, so peers
  // that remember our last number under a key id take the next as fresh.
  Status Rekey(uint64_t key_id, const SipKey& key, const KeyRing& accepted);

  std::vector<FlowStatus> Flows() const;
  Expected<FlowStatus> Flow(const FlowId& flow) const;
  size_t flow_count() const { return flows_.size(); }
  const NodeCounters& counters() const { return counters_; }
  const std::string& name() const { return config_.name; }

 private:
  struct NextHop {
    std::string interface;
    uint32_t address = 0;
    HopState state = HopState::kBackup;
    CreditAccount account;
    LivenessMonitor live;
    uint64_t last_return_ns = 0;
    uint32_t cost = 0;
  };
  struct Upstream {
    std::string interface;
    uint32_t address = 0;
    ReturnBatcher batcher;
  };
  struct FlowEntry {
    FlowId flow;
    Role role = Role::kTransit;
    bool configured = false;
    bool path_flooded = false;
    std::string learned_from;  // a transit floods only PATHs from here
    uint64_t last_path_ns = 0;
    std::vector<std::string> downstream;
    std::vector<NextHop> next_hops;  // in order of arrival
    std::map<std::string, Upstream> upstreams;
    uint64_t queued_bytes = 0;
    uint64_t messages_in = 0, messages_out = 0;
  };

  Node(NodeConfig config, Clock clock, SendFn send, EventFn on_event);
  const Interface* FindInterface(const std::string& name) const;
  bool IsLocal(uint32_t address) const;
  uint32_t Lih(const std::string& name) const;
  Credit OwnCredit(uint64_t freed_total) const;
  void Send(FlowEntry* f, Message m, const std::string& interface);
  void SendResv(FlowEntry& f, Upstream& up);
  void OnPath(const Message& m, const Interface& in);
  void OnResv(const Message& m, const Interface& in);
  void OnTear(const Message& m, const Interface& in);
  void OnResvTear(const Message& m, const Interface& in);
  // The flow a RESV/ResvTear names (counted in), or null (counted unknown).
  FlowEntry* KnownFlow(const Message& m);
  NextHop* NextHopOn(FlowEntry& f, const std::string& interface);
  // Marks `hop` failed; if it was the primary, promotes the cheapest backup,
  // and a transit left without any tells its upstreams at once (ResvTear).
  void FailHop(FlowEntry& f, NextHop& hop);
  void FloodTear(FlowEntry& f, uint8_t ttl);
  void Emit(Event::Kind kind, const FlowId& flow, const NextHop* hop);
  NextHop* Primary(FlowEntry& f);
  void FloodPath(FlowEntry& f);
  void PreferCheapest(FlowEntry& f, NextHop* candidate);

  NodeConfig config_;
  Clock clock_;
  SendFn send_;
  EventFn on_event_;
  Receiver receiver_;
  Signer signer_;
  std::map<FlowId, FlowEntry> flows_;
  NodeCounters counters_;
};

}  // namespace inc::credit
