// SPDX-License-Identifier: Apache-2.0
#include "switch/config.h"

#include <arpa/inet.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "common/daemon.h"
#include "common/log.h"
#include "common/metrics_tls.h"

namespace inc::sw {
namespace {

namespace pb = google::protobuf;

const pb::FieldDescriptor* FindField(const pb::Descriptor* d, const std::string& key) {
  if (const auto* f = d->FindFieldByName(key)) return f;
  for (int i = 0; i < d->field_count(); i++) {
    if (d->field(i)->json_name() == key) return d->field(i);
  }
  return nullptr;
}

std::string KnownFields(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); i++) {
    if (i) out += ", ";
    out += d->field(i)->json_name();
  }
  return out;
}

// Deepest [ / { nesting, outside strings, of JSON text (malformed text gives
// some number; the parser then rejects it).
size_t JsonNestingDepth(const std::string& json) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return deepest;
}

// Walks the JSON object against the message type so an unknown key is
// reported by name and path; protobuf's own parser only says "Cannot find
// field".
Status CheckKnownFields(const pb::Struct& object, const pb::Descriptor* d, const std::string& path) {
  for (const auto& [key, value] : object.fields()) {
    const std::string where = path.empty() ? key : path + "." + key;
    const pb::FieldDescriptor* f = FindField(d, key);
    if (!f) {
      return InvalidArgument("unknown field '" + where + "' in " + d->name() + " (known: " + KnownFields(d) +
                             ")");
    }
    if (f->type() != pb::FieldDescriptor::TYPE_MESSAGE) continue;
    if (f->is_repeated() && value.has_list_value()) {
      const auto& list = value.list_value().values();
      for (int i = 0; i < list.size(); i++) {
        if (list[i].has_struct_value()) {
          INC_RETURN_IF_ERROR(CheckKnownFields(list[i].struct_value(), f->message_type(),
                                               where + "[" + std::to_string(i) + "]"));
        }
      }
    } else if (value.has_struct_value()) {
      INC_RETURN_IF_ERROR(CheckKnownFields(value.struct_value(), f->message_type(), where));
    }
  }
  return Status::Ok();
}

void FillDefaults(v1::SwitchAgentConfig* c) {
  if (c->pin_root().empty()) c->set_pin_root(kDefaultPinRoot);
  if (c->slot_capacity() == 0) c->set_slot_capacity(kDefaultSlotCapacity);
  if (c->xdp_mode().empty()) c->set_xdp_mode("native");
  if (c->heartbeat_interval_ms() == 0) c->set_heartbeat_interval_ms(kDefaultHeartbeatMs);
  if (c->log_level().empty()) c->set_log_level("info");
  if (c->log_format().empty()) c->set_log_format("text");
  if (c->metrics_tls().empty()) c->set_metrics_tls("off");
}

// All IPv4 addresses of an interface, in host order.
std::vector<Ipv4> InterfaceAddresses(const std::string& ifname) {
  std::vector<Ipv4> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name) {
      out.push_back(Ipv4{ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr)});
    }
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

v1::SwitchAgentConfig DefaultConfig() {
  v1::SwitchAgentConfig c;
  FillDefaults(&c);
  return c;
}

Expected<v1::SwitchAgentConfig> ParseConfigJson(const std::string& json) {
  // protobuf 3.21 takes time quadratic in the nesting depth to read JSON into
  // a Struct (a 100 KB file of nested [ took over a minute); a config is at
  // most a few levels deep.
  if (size_t depth = JsonNestingDepth(json); depth > kMaxConfigJsonNesting) {
    return InvalidArgument("not a config: JSON nested " + std::to_string(depth) + " levels deep (at most " +
                           std::to_string(kMaxConfigJsonNesting) + ")");
  }
  pb::Struct object;
  pb::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto st = pb::util::JsonStringToMessage(json, &object, strict);
  if (!st.ok()) {
    return InvalidArgument("not a JSON object: " + std::string(st.message()));
  }
  INC_RETURN_IF_ERROR(CheckKnownFields(object, v1::SwitchAgentConfig::descriptor(), ""));

  v1::SwitchAgentConfig config;
  st = pb::util::JsonStringToMessage(json, &config, strict);
  if (!st.ok()) {
    return InvalidArgument("bad SwitchAgentConfig: " + std::string(st.message()));
  }
  FillDefaults(&config);
  return config;
}

Expected<v1::SwitchAgentConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoStatus("config file " + path, errno);
  std::stringstream buf;
  buf << in.rdbuf();
  auto config = ParseConfigJson(buf.str());
  if (!config.ok()) return config.status().WithContext("config file " + path);
  // Certificate paths are relative to the file's folder, as in incamd's.
  const auto slash = path.rfind('/');
  auto relative_to_file = [&](const std::string& p) {
    return p.empty() || p[0] == '/' || slash == std::string::npos ? p : path.substr(0, slash + 1) + p;
  };
  if (config->has_tls()) {
    v1::TlsConfig* tls = config->mutable_tls();
    tls->set_cert(relative_to_file(tls->cert()));
    tls->set_key(relative_to_file(tls->key()));
    tls->set_ca(relative_to_file(tls->ca()));
  }
  return config;
}

void ApplyFlags(const FlagOverrides& f, v1::SwitchAgentConfig* c) {
  if (f.switch_name) c->set_switch_name(*f.switch_name);
  if (f.listen) c->set_listen(*f.listen);
  if (f.am_address) c->set_am_address(*f.am_address);
  if (!f.ports.empty()) {
    c->clear_ports();
    for (const auto& p : f.ports) {
      // "--port p0" or "--port p0=10.0.0.254" (address the port answers on).
      auto* port = c->add_ports();
      auto eq = p.find('=');
      port->set_name(p.substr(0, eq));
      if (eq != std::string::npos) port->set_ip(p.substr(eq + 1));
    }
  }
  if (f.pin_root) c->set_pin_root(*f.pin_root);
  if (f.slot_capacity) c->set_slot_capacity(*f.slot_capacity);
  if (f.icrc_verify) c->set_icrc_verify(*f.icrc_verify);
  if (f.xdp_mode) c->set_xdp_mode(*f.xdp_mode);
  if (f.keep_datapath_on_exit) c->set_keep_datapath_on_exit(*f.keep_datapath_on_exit);
  if (f.log_level) c->set_log_level(*f.log_level);
  if (f.log_format) c->set_log_format(*f.log_format);
  if (f.insecure) c->set_insecure(*f.insecure);
  if (f.netconf_listen) c->mutable_netconf()->set_listen(*f.netconf_listen);
}

Expected<std::string> ResolveListen(const v1::SwitchAgentConfig& c) {
  if (!c.listen().empty()) return c.listen();
  const std::string port = std::to_string(kDefaultListenPort);
  if (c.am_address().empty()) return "127.0.0.1:" + port;
  auto am = HostPort::Parse(c.am_address());
  if (!am.ok() || am->host.empty()) {
    return InvalidArgument("no listen address, and am_address \"" + c.am_address() +
                           "\" is not host:port to find the management address by: set listen");
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(am->host.c_str(), std::to_string(am->port).c_str(), &hints, &found); rc != 0) {
    return InvalidArgument("no listen address, and the AM host \"" + am->host + "\" does not resolve (" +
                           gai_strerror(rc) + "): set listen");
  }
  // A connected UDP socket sends nothing; it only asks the kernel which
  // source address it would use toward the AM.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  int err = 0;
  if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    err = errno;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (err) return ErrnoStatus("no listen address, and no route to the AM at " + c.am_address(), err);
  return Ipv4{ntohl(local.sin_addr.s_addr)}.ToString() + ":" + port;
}

Expected<TransportSecurity> SwitchTransportSecurity(const v1::SwitchAgentConfig& c) {
  return ChooseTransportSecurity(
      {c.tls().cert(), c.tls().key(), c.tls().ca()}, c.insecure(),
      "config \"tls\": {\"cert\", \"key\", \"ca\"}, or \"insecure\": true / --insecure");
}

Status ValidateConfig(const v1::SwitchAgentConfig& c) {
  if (c.switch_name().empty()) {
    return InvalidArgument("switch_name is required (config \"switchName\" or --name)");
  }
  for (char ch : c.switch_name()) {
    // The name is a directory under the pin root.
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) {
      return InvalidArgument("switch_name '" + c.switch_name() +
                             "' may only contain letters, digits, '-', '_' and '.'");
    }
  }
  if (c.switch_name() == "." || c.switch_name() == "..") {
    return InvalidArgument("switch_name '" + c.switch_name() + "' is not a usable name");
  }
  if (c.ports().empty()) {
    return InvalidArgument("no ports: give at least one (config \"ports\" or --port IF)");
  }
  std::set<std::string> seen;
  for (int i = 0; i < c.ports_size(); i++) {
    const auto& p = c.ports(i);
    const std::string where = "ports[" + std::to_string(i) + "]";
    if (p.name().empty()) return InvalidArgument(where + ": name is required");
    if (p.name().size() >= IFNAMSIZ) {
      return InvalidArgument(where + ": interface name '" + p.name() + "' is longer than " +
                             std::to_string(IFNAMSIZ - 1) + " characters");
    }
    if (!seen.insert(p.name()).second) {
      return InvalidArgument(where + ": port '" + p.name() + "' is listed twice");
    }
    if (!p.ip().empty()) {
      auto ip = Ipv4::Parse(p.ip());
      if (!ip.ok()) return ip.status().WithContext(where + " (" + p.name() + ")");
    }
  }
  if (c.xdp_mode() != "native" && c.xdp_mode() != "generic") {
    return InvalidArgument("xdp_mode '" + c.xdp_mode() + "' is not 'native' or 'generic'");
  }
  INC_RETURN_IF_ERROR(ValidateLogSettings(c.log_level(), c.log_format()));
  if (c.slot_capacity() == 0 || c.slot_capacity() > (1u << 20)) {
    return InvalidArgument("slot_capacity " + std::to_string(c.slot_capacity()) +
                           " is out of range 1..1048576");
  }
  if (!c.listen().empty()) INC_RETURN_IF_ERROR(ValidateListenAddress(c.listen(), "listen"));
  if (!c.am_address().empty()) INC_RETURN_IF_ERROR(ValidateDialAddress(c.am_address(), "am_address"));
  if (!c.metrics_listen().empty()) {
    auto metrics = HostPort::Parse(c.metrics_listen());
    if (!metrics.ok()) return metrics.status().WithContext("metrics_listen");
  }
  INC_RETURN_IF_ERROR(ValidateMetricsTls(c.metrics_tls(), c.insecure()));
  if (c.heartbeat_interval_ms() < 10 || c.heartbeat_interval_ms() > 600000) {
    return InvalidArgument("heartbeat_interval_ms " + std::to_string(c.heartbeat_interval_ms()) +
                           " is out of range 10..600000");
  }
  return Status::Ok();
}

std::set<std::string> SwitchLiveFields(bool arn_running, bool credit_running) {
  std::set<std::string> fields;
  if (arn_running) {
    fields.insert({"arn.sample_interval_ms", "arn.repeat_interval_ms", "arn.hold_ms", "arn.congested_above",
                   "arn.clear_below", "arn.raise_samples", "arn.clear_samples", "arn.key_hex", "arn.key_file",
                   "arn.accept_key_hex", "arn.accept_key_file"});
  }
  if (credit_running) {
    fields.insert({"credit.return_quantum_bytes", "credit.return_flush_ms", "credit.refresh_ms",
                   "credit.key_hex", "credit.key_file", "credit.key_id", "credit.accept_keys"});
  }
  return fields;
}

void ReloadConfig(const std::string& path, const FlagOverrides& flags, v1::SwitchAgentConfig* running,
                  const LiveFields& live) {
  if (path.empty()) {
    LOG_INFO << "SIGHUP: no --config file, nothing to reload";
    return;
  }
  auto reread = LoadConfigFile(path);
  if (reread.ok()) {
    std::vector<FlagOverride> overrides;
    if (flags.log_level) overrides.push_back({"--log-level", "log_level", *flags.log_level});
    if (flags.log_format) overrides.push_back({"--log-format", "log_format", *flags.log_format});
    LogFlagOverrides(*reread, overrides, path);
    ApplyFlags(flags, &*reread);
  }
  Status st = reread.ok() ? ValidateConfig(*reread) : reread.status();
  if (!st.ok()) {
    LOG_ERROR << "SIGHUP: config " << path << " not reloaded, the running one stays: " << st.message();
    return;
  }
  if (ApplyReload(*reread, "incswitchd", running, live) == 0) {
    LOG_INFO << "SIGHUP: config " << path << " reread, nothing changed";
  }
}

Expected<PortInfo> ReadPort(const std::string& ifname) {
  auto info = GetInterfaceInfo(ifname);
  if (!info.ok()) {
    if (info.status().code() == Code::kNotFound ||
        info.status().message().find("No such device") != std::string::npos) {
      return NotFound("interface '" + ifname + "' not found in this network namespace");
    }
    return info.status();
  }
  PortInfo port;
  port.name = ifname;
  port.ifindex = info->ifindex;
  port.mac = info->mac;
  port.ip = info->ip;
  port.mtu = info->mtu;

  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
    port.up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
  }
  ethtool_drvinfo drv{};
  drv.cmd = ETHTOOL_GDRVINFO;
  ifr.ifr_data = reinterpret_cast<char*>(&drv);
  if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) port.is_veth = std::strcmp(drv.driver, "veth") == 0;
  close(fd);
  return port;
}

Expected<std::vector<PortInfo>> ResolvePorts(const v1::SwitchAgentConfig& config) {
  std::vector<PortInfo> out;
  for (const auto& p : config.ports()) {
    auto port = ReadPort(p.name());
    if (!port.ok()) return port.status().WithContext("port '" + p.name() + "'");
    if (!p.ip().empty()) {
      auto want = Ipv4::Parse(p.ip());
      if (!want.ok()) return want.status().WithContext("port '" + p.name() + "'");
      bool found = false;
      for (const auto& a : InterfaceAddresses(p.name())) found |= a == *want;
      if (!found) {
        return InvalidArgument("port '" + p.name() + "': configured ip " + p.ip() +
                               " is not an address of the interface");
      }
      port->ip = *want;
    } else if (port->ip.host == 0) {
      return InvalidArgument("port '" + p.name() +
                             "' has no IPv4 address (RoCEv2 peers address the switch by IP): "
                             "assign one or set ports[].ip");
    }
    out.push_back(*port);
  }
  return out;
}

}  // namespace inc::sw
