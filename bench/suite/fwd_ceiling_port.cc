// SPDX-License-Identifier: Apache-2.0
#include "fwd_ceiling_port.h"

#include <arpa/inet.h>
#include <net/if.h>

#include <cstring>
#include <sstream>

#include "bench/fwd_ceiling.h"
#include "common/icrc.h"
#include "inc_wire.h"

namespace inc::bench {
namespace {

// A zero-payload frame of the given UDP length carrying what a member sends
// (result=false) or what fwd_ceiling turns it into (result=true).
std::vector<uint8_t> SkeletonFrame(const PortSpec& p, uint32_t udp_len, bool result) {
  std::vector<uint8_t> f(INC_OFF_UDP + udp_len, 0);
  f[12] = 0x08;
  f[14] = 0x45;
  uint16_t ip_len = htons(static_cast<uint16_t>(20 + udp_len));
  std::memcpy(&f[INC_OFF_IP + 2], &ip_len, 2);
  f[INC_OFF_IP + 9] = 17;
  uint32_t src = (result ? p.switch_ip : p.member_ip).be(), dst = (result ? p.member_ip : p.switch_ip).be();
  std::memcpy(&f[INC_OFF_IP + 12], &src, 4);
  std::memcpy(&f[INC_OFF_IP + 16], &dst, 4);
  uint16_t be_len = htons(static_cast<uint16_t>(udp_len));
  std::memcpy(&f[INC_OFF_UDP + 4], &be_len, 2);
  uint32_t qpn = htonl(result ? p.member_qpn : p.switch_qpn);
  std::memcpy(&f[INC_OFF_BTH + 4], &qpn, 4);
  f[INC_OFF_INC] = static_cast<uint8_t>(INC_VERSION << 4 | (result ? INC_FLAG_RESULT : 0));
  return f;
}

}  // namespace

Expected<PortSpec> ParsePort(const std::string& text) {
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) f.push_back(part);
  if (f.size() != 5)
    return InvalidArgument("--port '" + text + "': want IFACE,MEMBER_IP,SWITCH_IP,MEMBER_QPN,SWITCH_QPN");
  PortSpec p;
  p.iface = f[0];
  p.ifindex = if_nametoindex(f[0].c_str());
  if (p.ifindex == 0) return NotFound("--port '" + text + "': no interface " + f[0]);
  auto mip = Ipv4::Parse(f[1]);
  if (!mip.ok()) return mip.status().WithContext("--port member ip");
  auto sip = Ipv4::Parse(f[2]);
  if (!sip.ok()) return sip.status().WithContext("--port switch ip");
  p.member_ip = *mip;
  p.switch_ip = *sip;
  try {
    p.member_qpn = static_cast<uint32_t>(std::stoul(f[3], nullptr, 0));
    p.switch_qpn = static_cast<uint32_t>(std::stoul(f[4], nullptr, 0));
  } catch (const std::exception&) {
    return InvalidArgument("--port '" + text + "': QPNs must be numbers");
  }
  if (p.member_qpn > INC_QPN_MASK || p.switch_qpn > INC_QPN_MASK)
    return InvalidArgument("--port '" + text + "': QPNs are 24 bits");
  return p;
}

Status FillPort(const PortSpec& p, fwd_port* out) {
  std::memset(out, 0, sizeof(*out));
  out->member_qpn = p.member_qpn;
  for (uint32_t len = INC_OFF_PAYLOAD - INC_OFF_UDP + INC_ICRC_LEN; len < FWD_MAX_UDP_LEN; len++) {
    auto a = SkeletonFrame(p, len, false), b = SkeletonFrame(p, len, true);
    auto ca = ComputeIcrc(a.data(), a.size());
    auto cb = ComputeIcrc(b.data(), b.size());
    if (!ca.ok()) return ca.status();
    if (!cb.ok()) return cb.status();
    out->icrc_delta[len] = *ca ^ *cb;
  }
  return Status::Ok();
}

}  // namespace inc::bench
