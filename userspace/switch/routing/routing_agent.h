// SPDX-License-Identifier: Apache-2.0
// incswitchd's routing side (docs/arn.md): programs the best-path table from
// the config, watches its ports (utilisation, transmit drops, link state),
// marks a bad port in the data path at once and tells the group by ARN
// messages, and applies the group's notices to its routes. One thread,
// driven by poll() on the ARN socket and the sampling tick.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arn/detector.h"
#include "arn/message.h"
#include "arn/paths.h"
#include "common/status.h"
#include "datapath/datapath.h"
#include "datapath/forwarding.h"
#include "inc/v1/inc.pb.h"
#include "switch/routing/arn_config.h"

namespace inc::sw {

// A port's kernel view at one instant (rtnetlink RTM_GETLINK).
struct LinkSnapshot {
  bool up = false;  // administratively up with carrier
  uint64_t tx_bytes = 0;
  uint64_t tx_dropped = 0;  // on veth: includes XDP frames a full peer ring refused
};
Expected<LinkSnapshot> ReadLink(uint32_t ifindex);

class RoutingAgent {
 public:
  static Expected<std::unique_ptr<RoutingAgent>> Start(RoutingSettings settings, const dp::Datapath& datapath,
                                                       const std::string& switch_name);
  ~RoutingAgent();
  RoutingAgent(const RoutingAgent&) = delete;
  RoutingAgent& operator=(const RoutingAgent&) = delete;

  // SIGHUP: takes next's sampling, repeat and hold intervals, detector
  // thresholds, signing key and accepted key (SwitchLiveFields' "arn."
  // ones); routes, peers and ports stay as started.
  void Retune(const RoutingSettings& next);

  v1::ArnStatus Report() const;
  // Own links that are congested or failed (for the AM heartbeat).
  std::vector<v1::ArnLinkState> UnhealthyLocalLinks() const;

 private:
  struct Watched {
    WatchedPort cfg;
    uint32_t ifindex = 0;
    arn::PortDetector detector;
    std::optional<LinkSnapshot> last;
    uint64_t last_ns = 0;
    double utilisation = 0;
    uint64_t changed_ns = 0;
    std::optional<arn::Message> active;  // notice repeated while the state lasts
  };

  RoutingAgent(RoutingSettings settings, dp::ForwardingTable table, std::string switch_name);
  Status OpenSocket();
  void Loop();
  void Sample(uint64_t now_ns);
  void OnChange(Watched& w, const arn::Change& ch, uint64_t now_ns);
  void Receive(uint64_t now_ns);
  void Send(arn::Message m);
  void RepeatActive(uint64_t now_ns);
  void ReprogramLocked();
  void EventLocked(const std::string& what);

  // The interval, detector and key fields change under mu_ (Retune); the
  // rest is fixed at start.
  RoutingSettings settings_;
  dp::ForwardingTable table_;
  const std::string switch_name_;
  int sock_ = -1;
  int wake_fd_ = -1;  // eventfd: stop
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable std::mutex mu_;  // everything below
  std::vector<Watched> watched_;
  arn::Receiver receiver_;
  arn::RemoteState remote_;
  uint32_t next_seq_ = 0;
  uint64_t sent_ = 0;
  uint64_t send_errors_ = 0;
  uint64_t last_repeat_ns_ = 0;
  std::deque<std::string> events_;
};

}  // namespace inc::sw
