// SPDX-License-Identifier: Apache-2.0
// incswitchd's credit side (docs/credit.md "The agent"): runs the
// RSVP credit signalling (inc::credit::Node) over the RSVP socket, and keeps
// the XDP credit gate and the hold queue in step with it:
//   - every flow the node knows gets a gate entry: toward its primary next
//     hop (sender gateway, transit) or count-only (receiver gateway);
//   - credit the next hop grants goes into the gate's counters, bytes the
//     gate and the hold queue consumed go into the node's ledger;
//   - bytes that came from an upstream and left this switch go back to it
//     as credit (batched by the node);
//   - failover rewrites the gate entry to the new primary at once.
// One thread, driven by poll() on the RSVP socket and the hold-queue
// sockets with a 1 ms tick.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "credit/node.h"
#include "datapath/credit_table.h"
#include "datapath/datapath.h"
#include "datapath/hold_queue.h"
#include "inc/v1/inc.pb.h"
#include "switch/credit/credit_config.h"
#include "switch/credit/rsvp_socket.h"

namespace inc::sw {

class CreditAgent {
 public:
  // `data_ports`: every data port of the switch (each gets a hold-queue
  // socket: held frames may come in on any of them).
  static Expected<std::unique_ptr<CreditAgent>> Start(CreditSettings settings, const dp::Datapath& datapath,
                                                      const std::vector<std::string>& data_ports,
                                                      const std::string& switch_name);
  // Ends the flows this switch is the sender gateway of (PathTear), then
  // removes every flow from the gate.
  ~CreditAgent();
  CreditAgent(const CreditAgent&) = delete;
  CreditAgent& operator=(const CreditAgent&) = delete;

  // SIGHUP: takes next's credit return batching, PATH refresh interval,
  // signing key, key id and accepted keys (SwitchLiveFields' "credit."
  // ones); flows, ports, reserve and heartbeat stay as started.
  Status Retune(const CreditSettings& next);

  v1::CreditStatus Report() const;

 private:
  // What the agent programmed into the gate for one flow of the node.
  struct GateFlow {
    dp::CreditFlowKey key;
    uint32_t index = 0;
    credit::Role role = credit::Role::kTransit;
    std::string primary;                         // interface the gate sends to; empty = hold
    uint64_t synced_consumed = 0;                // gate 'consumed' already charged to the node
    std::map<std::string, uint64_t> freed_seen;  // upstream -> bytes already reported freed
  };

  CreditAgent(CreditSettings settings, dp::CreditTable table, RsvpSocket socket, std::string switch_name);
  void Loop();
  void Step(uint64_t now_ns);
  void ReceiveRsvp();
  void SyncFlows();
  void SyncCredit(GateFlow& g, const credit::FlowStatus& st);
  void ReturnFreed(GateFlow& g, const credit::FlowStatus& st);
  void OnEvent(const credit::Event& e);
  const CreditPort* Port(const std::string& name) const;
  void EventLocked(const std::string& what);

  const CreditSettings settings_;
  const std::string switch_name_;
  dp::CreditTable table_;
  std::unique_ptr<dp::HoldQueue> hold_;
  RsvpSocket socket_;
  std::unique_ptr<credit::Node> node_;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable std::mutex mu_;  // everything below, and node_/hold_/table_ use
  std::map<credit::FlowId, GateFlow> gate_;
  std::deque<std::string> events_;
  uint64_t send_errors_ = 0;
  uint64_t ledger_mismatch_ = 0;  // gate consumed more than the node's ledger allowed
  uint64_t signalling_bytes_ = 0;
  bool busy_ = false;  // this step saw traffic, RSVP or held frames
};

}  // namespace inc::sw
