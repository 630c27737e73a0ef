// SPDX-License-Identifier: Apache-2.0
// The best-path table (BPT) of the XDP forwarder (bpf/forward.h) as the
// agent programs it: routes per destination prefix with their next hops,
// the per-port health that local detection sets, and the forwarder's
// counters. The agent computes the whole desired route (hops, costs, ARN
// marks) and writes it in one map update, so the forwarder never sees a
// half-changed entry. See docs/arn.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/abi/forward.h"
#include "common/net.h"
#include "common/route.h"
#include "common/status.h"

namespace inc::dp {

class Datapath;

struct PortForwardCounters {
  uint64_t packets = 0;
  uint64_t bytes = 0;
};

struct ForwardStats {
  std::map<std::string, uint64_t> global;            // enum inc_fwd_stat names
  std::map<std::string, PortForwardCounters> ports;  // by egress interface
};

const char* ForwardStatName(int stat);  // enum inc_fwd_stat -> "forwarded"

// Borrows the maps of a loaded Datapath; must not outlive it.
class ForwardingTable {
 public:
  static Expected<ForwardingTable> Open(const Datapath& dp);

  // Creates or replaces a route. InvalidArgument: host bits set, more than
  // INC_BPT_MAX_HOPS hops, bad flags; NotFound: an unknown port.
  Status SetRoute(const Route& route);
  Status DeleteRoute(const Prefix& prefix);  // NotFound if absent
  Expected<std::vector<Route>> ListRoutes() const;
  // Makes the table exactly `routes` (adds, replaces, deletes).
  Status Reconcile(const std::vector<Route>& routes);

  // INC_PORT_* flags of a local port; 0 clears. NotFound: unknown port.
  Status SetPortHealth(const std::string& port, uint32_t flags);
  Expected<std::map<std::string, uint32_t>> PortHealth() const;
  // Creates the port_tx counters of a port (the forwarder only updates
  // existing entries), idempotent.
  Status TrackPort(const std::string& port);

  Expected<ForwardStats> ReadStats() const;

 private:
  ForwardingTable(int bpt, int health, int port_tx, int stats)
      : bpt_fd_(bpt), health_fd_(health), port_tx_fd_(port_tx), stats_fd_(stats) {}
  int bpt_fd_, health_fd_, port_tx_fd_, stats_fd_;
};

}  // namespace inc::dp
