// SPDX-License-Identifier: Apache-2.0
// The RSVP transport of the credit agent (docs/credit.md): a raw
// IPv4 socket for IP protocol 46. RSVP messages travel hop by hop between
// credit-aware switches, so a message goes out of one named interface to one
// neighbour address, and every received message says which interface it came
// in on and from whom. The kernel writes and checks the IP header; the
// payload is the RSVP message as the codec made it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/status.h"

namespace inc::sw {

constexpr int kIpProtoRsvp = 46;

struct RsvpDatagram {
  std::vector<uint8_t> message;  // the RSVP message (IP header stripped)
  Ipv4 source;
  Ipv4 destination;
  uint32_t ifindex = 0;  // interface it arrived on
  uint8_t ttl = 0;
};

class RsvpSocket {
 public:
  // Opens the socket (needs CAP_NET_RAW). DSCP CS6, like other network
  // control traffic, so credit returns are not queued behind data.
  static Expected<RsvpSocket> Open();
  RsvpSocket(RsvpSocket&& o) noexcept;
  RsvpSocket& operator=(RsvpSocket&& o) noexcept;
  RsvpSocket(const RsvpSocket&) = delete;
  RsvpSocket& operator=(const RsvpSocket&) = delete;
  ~RsvpSocket();

  int fd() const { return fd_; }
  // Sends `message` to `to` out of interface `ifindex` (0 = by the routing
  // table), with IP TTL `ttl` (RSVP's Send_TTL travels in the message too).
  Status Send(const std::vector<uint8_t>& message, Ipv4 to, uint32_t ifindex, uint8_t ttl = 64);
  // Receives one datagram without blocking: NOT_FOUND when none is waiting.
  Expected<RsvpDatagram> Receive();

 private:
  explicit RsvpSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace inc::sw
