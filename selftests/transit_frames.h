// SPDX-License-Identifier: Apache-2.0
// Frames that cross a switch without being INC traffic for it (RoCEv2 or
// other IPv4/UDP between hosts), what a router makes of them, and one
// BPF_PROG_TEST_RUN of a program on such a frame. Shared by the selftests of
// the best-path forwarder (forward_test) and of the credit gate
// (credit_test); INC frames come from inc_frames.h.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/net.h"

namespace inc::selftest {

// The IPv4 header checksum of len bytes at ip (checksum field included).
inline uint16_t IpChecksum(const uint8_t* ip, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

struct TransitFrame {
  Mac dst_mac;  // the switch port the frame arrives on
  Mac src_mac = *Mac::Parse("02:00:00:00:bb:01");
  uint16_t ethertype = ETH_P_IP;
  std::string src = "10.9.0.2";
  std::string dst = "10.9.2.7";
  uint8_t ihl = 5;  // > 5: IPv4 options (zeros)
  uint8_t tos = 0;
  uint8_t ttl = 64;
  uint8_t proto = IPPROTO_UDP;
  uint16_t sport = 49152;
  uint16_t dport = 4791;
  bool bth = false;          // a 12-byte RC RDMA WRITE ONLY BTH to dest_qpn after UDP
  uint32_t dest_qpn = 0;     // with bth
  size_t payload = 64;       // bytes after UDP (and the BTH)
  uint8_t payload_step = 1;  // payload byte i = i * payload_step
  size_t truncate = 0;       // cut the frame to this many bytes (0: keep)
};

inline std::vector<uint8_t> BuildTransitFrame(const TransitFrame& s) {
  const size_t l4 = 8 + (s.bth ? 12 : 0) + s.payload;
  const size_t ip_len = s.ihl * 4 + l4;
  std::vector<uint8_t> f(14 + ip_len, 0);
  std::memcpy(&f[0], s.dst_mac.bytes.data(), 6);
  std::memcpy(&f[6], s.src_mac.bytes.data(), 6);
  f[12] = s.ethertype >> 8;
  f[13] = s.ethertype & 0xff;
  uint8_t* ip = &f[14];
  ip[0] = 0x40 | s.ihl;
  ip[1] = s.tos;
  ip[2] = ip_len >> 8;
  ip[3] = ip_len & 0xff;
  ip[6] = 0x40;  // DF
  ip[8] = s.ttl;
  ip[9] = s.proto;
  uint32_t sa = Ipv4::Parse(s.src)->be(), da = Ipv4::Parse(s.dst)->be();
  std::memcpy(ip + 12, &sa, 4);
  std::memcpy(ip + 16, &da, 4);
  uint16_t c = IpChecksum(ip, s.ihl * 4);
  ip[10] = c >> 8;
  ip[11] = c & 0xff;
  uint8_t* udp = ip + s.ihl * 4;
  udp[0] = s.sport >> 8;
  udp[1] = s.sport & 0xff;
  udp[2] = s.dport >> 8;
  udp[3] = s.dport & 0xff;
  udp[4] = l4 >> 8;
  udp[5] = l4 & 0xff;
  uint8_t* payload = udp + 8;
  if (s.bth) {
    payload[0] = 0x0A;               // RC RDMA WRITE ONLY
    payload[2] = payload[3] = 0xff;  // default P_Key
    payload[5] = (s.dest_qpn >> 16) & 0xff;
    payload[6] = (s.dest_qpn >> 8) & 0xff;
    payload[7] = s.dest_qpn & 0xff;
    payload += 12;
  }
  for (size_t i = 0; i < s.payload; i++) payload[i] = static_cast<uint8_t>(i * s.payload_step);
  if (s.truncate) f.resize(s.truncate);
  return f;
}

// What a router makes of `f` when it sends it to next_hop out of a port with
// MAC egress: MACs rewritten, TTL - 1, IPv4 checksum updated.
inline std::vector<uint8_t> Routed(std::vector<uint8_t> f, const Mac& next_hop, const Mac& egress) {
  std::memcpy(&f[0], next_hop.bytes.data(), 6);
  std::memcpy(&f[6], egress.bytes.data(), 6);
  uint8_t* ip = &f[14];
  ip[8]--;
  ip[10] = ip[11] = 0;
  uint16_t c = IpChecksum(ip, (ip[0] & 0xf) * 4);
  ip[10] = c >> 8;
  ip[11] = c & 0xff;
  return f;
}

struct RunResult {
  int err = 0;  // errno of BPF_PROG_TEST_RUN
  uint32_t retval = 0;
  std::vector<uint8_t> out;
};

// One run of an XDP program on `in`; with ingress_ifindex set, the context
// says the frame arrived on that port, queue 0.
inline RunResult TestRun(int prog_fd, const std::vector<uint8_t>& in, uint32_t ingress_ifindex = 0) {
  RunResult r;
  r.out.resize(4096);
  xdp_md ctx{};
  ctx.ingress_ifindex = ingress_ifindex;
  ctx.rx_queue_index = 0;
  ctx.data_end = static_cast<uint32_t>(in.size());  // no metadata before the frame
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  opts.data_in = in.data();
  opts.data_size_in = static_cast<uint32_t>(in.size());
  opts.data_out = r.out.data();
  opts.data_size_out = static_cast<uint32_t>(r.out.size());
  if (ingress_ifindex) {
    opts.ctx_in = &ctx;
    opts.ctx_size_in = sizeof(ctx);
  }
  opts.repeat = 1;
  r.err = bpf_prog_test_run_opts(prog_fd, &opts);
  if (r.err) r.err = errno;
  r.retval = opts.retval;
  r.out.resize(opts.data_size_out);
  return r;
}

}  // namespace inc::selftest
