// SPDX-License-Identifier: Apache-2.0
// incswitchd configuration: the SwitchAgentConfig message (protobuf JSON file)
// merged with command-line flags, validated, with defaults filled in. Pure
// logic except ResolvePorts, which asks the kernel about the interfaces.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/daemon.h"
#include "common/net.h"
#include "common/status.h"
#include "common/tls.h"
#include "inc/v1/inc.pb.h"

namespace inc::sw {

// No listen configured: the management address (ResolveListen) on this port.
inline constexpr uint32_t kDefaultListenPort = 50061;
inline constexpr char kDefaultPinRoot[] = "/sys/fs/bpf/incin";
inline constexpr uint32_t kDefaultSlotCapacity = 4096;
inline constexpr uint32_t kDefaultHeartbeatMs = 1000;
// Deepest JSON nesting ParseConfigJson reads (a real config has about 5).
inline constexpr size_t kMaxConfigJsonNesting = 64;

// Parses a SwitchAgentConfig in protobuf JSON. Unknown fields are an error
// naming the field and where it is ("ports[1].adress"). Fills defaults for
// the fields the JSON leaves out (icrc_verify stays false: the members check
// every result's ICRC, and docs/operations.md "ICRC verification" says when
// a switch should check contributions too).
Expected<v1::SwitchAgentConfig> ParseConfigJson(const std::string& json);
Expected<v1::SwitchAgentConfig> LoadConfigFile(const std::string& path);

// The config with every default applied (what an empty file means).
v1::SwitchAgentConfig DefaultConfig();

// Command-line values; unset ones leave the file's value alone.
struct FlagOverrides {
  std::optional<std::string> switch_name;
  std::optional<std::string> listen;
  std::optional<std::string> am_address;
  std::vector<std::string> ports;  // non-empty replaces the file's ports
  std::optional<std::string> pin_root;
  std::optional<uint32_t> slot_capacity;
  std::optional<bool> icrc_verify;
  std::optional<std::string> xdp_mode;
  std::optional<bool> keep_datapath_on_exit;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  std::optional<bool> insecure;
  std::optional<std::string> netconf_listen;  // --netconf-listen (docs/netconf.md)
};

// How incswitchd serves and dials the AM: mTLS with config "tls" {cert,
// key, ca}, or plaintext with "insecure": true (or --insecure); neither,
// both, or an incomplete tls object is an error that says what to set.
Expected<TransportSecurity> SwitchTransportSecurity(const v1::SwitchAgentConfig& config);

// The address to serve SwitchAgent on: listen if configured; else the
// management address, i.e. this host's source address toward am_address,
// on kDefaultListenPort (the address the AM reaches the agent at, and not
// every interface: data ports need not expose the control plane); standalone
// (no AM) 127.0.0.1.
Expected<std::string> ResolveListen(const v1::SwitchAgentConfig& config);

void ApplyFlags(const FlagOverrides& flags, v1::SwitchAgentConfig* config);

// Checks what can be checked without the kernel: a name, at least one port,
// no duplicate ports, xdp_mode, log level and format, slot capacity, port
// IPs, the listen and AM addresses (ports in range).
Status ValidateConfig(const v1::SwitchAgentConfig& config);

// The fields SIGHUP applies to a running switch besides the log settings:
// ARN's sampling, repeat and hold intervals, detector thresholds and keys
// when ARN runs; credit return batching, the PATH refresh interval and the
// keys with their ids when credit runs (a key rotation without a restart).
// Paths as in inc::PlanReload ("arn.hold_ms").
std::set<std::string> SwitchLiveFields(bool arn_running, bool credit_running);

// SIGHUP: reads the config file again with the flags over it and, if it is
// valid, applies log_level, log_format and the fields named in `live`
// (through live.apply), and logs every other changed field as needing a
// restart (ports, listen, routes, ...: the data path and the services keep
// what they started with). An unreadable or invalid file changes nothing
// and is logged as an error. *running becomes the config now in force.
void ReloadConfig(const std::string& path, const FlagOverrides& flags, v1::SwitchAgentConfig* running,
                  const LiveFields& live = {});

// A configured port as the agent uses it: the interface's facts plus the
// address the port answers RoCEv2 on.
struct PortInfo {
  std::string name;
  uint32_t ifindex = 0;
  Mac mac;
  Ipv4 ip;
  uint32_t mtu = 0;
  bool up = false;  // administratively up and carrier present
  bool is_veth = false;
};

// Reads every configured port from the kernel: NotFound for a missing
// interface, InvalidArgument for a configured IP the interface doesn't have
// or a port without any IPv4 address.
Expected<std::vector<PortInfo>> ResolvePorts(const v1::SwitchAgentConfig& config);

// Link state and identity of one interface now (up = IFF_UP && IFF_RUNNING).
Expected<PortInfo> ReadPort(const std::string& ifname);

}  // namespace inc::sw
