// SPDX-License-Identifier: Apache-2.0
// Attaching a worker-side XDP program to an interface for the lifetime of a
// transport, and putting back what was attached before, from the
// interface's own network namespace (the caller may have moved on: netlink
// works in the calling thread's namespace). Used by both member transports.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace inc::client {

class XdpAttachment {
 public:
  XdpAttachment() = default;
  ~XdpAttachment() { Detach(); }
  XdpAttachment(const XdpAttachment&) = delete;
  XdpAttachment& operator=(const XdpAttachment&) = delete;

  // Attaches prog_fd to ifindex, natively or in generic (SKB) mode,
  // replacing (and remembering) the program there.
  Status Attach(int prog_fd, uint32_t ifindex, const std::string& ifname, bool generic);
  // Restores the previous program (or none); a program someone else put
  // there meanwhile is left alone. Idempotent.
  void Detach();
  bool attached() const { return attached_; }

 private:
  int prog_fd_ = -1;
  uint32_t ifindex_ = 0;
  std::string ifname_;
  bool generic_ = false;
  uint32_t old_prog_id_ = 0;
  bool attached_ = false;
  int netns_fd_ = -1;  // namespace of ifindex_
};

}  // namespace inc::client
