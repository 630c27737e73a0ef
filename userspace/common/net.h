// SPDX-License-Identifier: Apache-2.0
// Addresses as value types: parsing with clear errors, formatting, and the
// interface facts (ifindex, MAC, IPv4, MTU) that daemons read from the kernel.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace inc {

struct Mac {
  std::array<uint8_t, 6> bytes{};
  static Expected<Mac> Parse(const std::string& text);  // "02:00:00:00:00:01"
  std::string ToString() const;
  bool operator==(const Mac& o) const { return bytes == o.bytes; }
  bool operator!=(const Mac& o) const { return !(*this == o); }
};

// IPv4 address in host byte order (so comparisons and arithmetic are natural);
// be() gives the network-order value for wire and map structs.
struct Ipv4 {
  uint32_t host = 0;
  static Expected<Ipv4> Parse(const std::string& text);  // dotted quad
  std::string ToString() const;
  uint32_t be() const;
  static Ipv4 FromBe(uint32_t be);
  bool operator==(const Ipv4& o) const { return host == o.host; }
  bool operator!=(const Ipv4& o) const { return !(*this == o); }
};

// "host:port" as gRPC takes it: host a name, a dotted quad, an IPv6 address
// in brackets ("[::1]:50051"; host keeps the brackets) or empty (every
// address), port 0..65535 in decimal. gRPC itself takes a larger port modulo
// 65536 without a word, which is why daemons check theirs first.
struct HostPort {
  std::string host;
  uint32_t port = 0;
  static Expected<HostPort> Parse(const std::string& text);
};

// A gRPC server address: "unix:PATH" or HostPort (port 0 lets the kernel
// pick one). `what` names the flag or field in the error.
Status ValidateListenAddress(const std::string& address, const std::string& what);
// An address to dial: as ValidateListenAddress but with a port in 1..65535;
// a gRPC target with a scheme ("dns:", "ipv4:", "unix:", ...) is left to gRPC.
Status ValidateDialAddress(const std::string& address, const std::string& what);

struct InterfaceInfo {
  std::string name;
  uint32_t ifindex = 0;
  Mac mac;
  Ipv4 ip;  // first IPv4 address, 0 if none
  uint32_t mtu = 0;
  bool up = false;
};

// Reads ifindex, MAC, first IPv4 address, MTU and link state of an interface
// in the caller's network namespace.
Expected<InterfaceInfo> GetInterfaceInfo(const std::string& ifname);

}  // namespace inc
