// SPDX-License-Identifier: Apache-2.0
#include "common/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace inc {

Expected<Mac> Mac::Parse(const std::string& text) {
  Mac mac;
  unsigned v[6];
  char tail;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &tail) != 6 ||
      text.size() != 17) {
    return InvalidArgument("bad MAC address '" + text + "' (want xx:xx:xx:xx:xx:xx)");
  }
  for (int i = 0; i < 6; i++) mac.bytes[i] = static_cast<uint8_t>(v[i]);
  return mac;
}

std::string Mac::ToString() const {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3],
                bytes[4], bytes[5]);
  return buf;
}

Expected<Ipv4> Ipv4::Parse(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) {
    return InvalidArgument("bad IPv4 address '" + text + "'");
  }
  return Ipv4{ntohl(a.s_addr)};
}

std::string Ipv4::ToString() const {
  in_addr a{};
  a.s_addr = htonl(host);
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

uint32_t Ipv4::be() const {
  return htonl(host);
}
Ipv4 Ipv4::FromBe(uint32_t be) {
  return Ipv4{ntohl(be)};
}

Expected<HostPort> HostPort::Parse(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("\"" + text + "\" is not host:port");
  HostPort out;
  out.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (!out.host.empty() && out.host.front() == '[') {
    if (out.host.size() < 3 || out.host.back() != ']')
      return InvalidArgument("\"" + text + "\": an IPv6 host must be in brackets, [addr]:port");
  } else if (out.host.find(':') != std::string::npos) {
    return InvalidArgument("\"" + text + "\" is not host:port (an IPv6 host goes in brackets: [addr]:port)");
  }
  bool digits = !port.empty() && port.size() <= 10;
  uint64_t value = 0;
  for (char c : port) {
    digits = digits && c >= '0' && c <= '9';
    if (digits) value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!digits) return InvalidArgument("\"" + text + "\": port \"" + port + "\" is not a number");
  if (value > 65535) return InvalidArgument("\"" + text + "\": port " + port + " is not in 0..65535");
  out.port = static_cast<uint32_t>(value);
  return out;
}

Status ValidateListenAddress(const std::string& address, const std::string& what) {
  if (address.rfind("unix:", 0) == 0) {
    if (address.size() == 5) return InvalidArgument(what + " \"unix:\" has no path");
    return Status::Ok();
  }
  if (address.empty()) return InvalidArgument(what + " is empty");
  auto hp = HostPort::Parse(address);
  if (!hp.ok()) return hp.status().WithContext(what);
  return Status::Ok();
}

Status ValidateDialAddress(const std::string& address, const std::string& what) {
  for (const char* scheme : {"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:"})
    if (address.rfind(scheme, 0) == 0) return Status::Ok();
  if (address.empty()) return InvalidArgument(what + " is empty");
  auto hp = HostPort::Parse(address);
  if (!hp.ok()) return hp.status().WithContext(what);
  if (hp->host.empty()) return InvalidArgument(what + " \"" + address + "\" has no host");
  if (hp->port == 0) return InvalidArgument(what + " \"" + address + "\": port 0 cannot be dialled");
  return Status::Ok();
}

Expected<InterfaceInfo> GetInterfaceInfo(const std::string& ifname) {
  InterfaceInfo info;
  info.name = ifname;
  if (ifname.empty() || ifname.size() >= IFNAMSIZ)
    return InvalidArgument("bad interface name '" + ifname + "'");
  info.ifindex = if_nametoindex(ifname.c_str());
  if (info.ifindex == 0) return ErrnoStatus("interface " + ifname, errno);

  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) {
    std::memcpy(info.mac.bytes.data(), ifr.ifr_hwaddr.sa_data, 6);
  }
  if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) info.mtu = static_cast<uint32_t>(ifr.ifr_mtu);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) info.up = (ifr.ifr_flags & IFF_UP) != 0;
  close(fd);

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name) {
        info.ip.host = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
        break;
      }
    }
    freeifaddrs(list);
  }
  return info;
}

}  // namespace inc
