// SPDX-License-Identifier: Apache-2.0
#include "common/route.h"

namespace inc {

Expected<Prefix> Prefix::Parse(const std::string& text) {
  Prefix p;
  std::string ip = text;
  auto slash = text.find('/');
  if (slash != std::string::npos) {
    ip = text.substr(0, slash);
    std::string len = text.substr(slash + 1);
    if (len.empty() || len.size() > 2 || len.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(len) > 32)
      return InvalidArgument("prefix '" + text + "': length must be 0..32");
    p.length = static_cast<uint8_t>(std::stoi(len));
  }
  auto addr = Ipv4::Parse(ip);
  if (!addr.ok()) return InvalidArgument("prefix '" + text + "': " + addr.status().message());
  p.addr = *addr;
  if (p.addr.host & ~MaskOf(p.length))
    return InvalidArgument("prefix '" + text + "': host bits set (did you mean " +
                           Ipv4{p.addr.host & MaskOf(p.length)}.ToString() + "/" + std::to_string(p.length) +
                           "?)");
  return p;
}

std::string Prefix::ToString() const {
  return addr.ToString() + "/" + std::to_string(length);
}

bool Prefix::Contains(Ipv4 ip) const {
  return (ip.host & MaskOf(length)) == addr.host;
}

}  // namespace inc
