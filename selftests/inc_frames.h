// SPDX-License-Identifier: Apache-2.0
// INC (RoCEv2) frames between a switch port and a peer behind it (a member
// or a neighbour switch), built with common/frame.h's BuildFrame, and the
// INC header of a message. Shared by the data-path selftests
// (datapath/fixture.h) and the XDP fuzzer (fuzz_xdp_test); frames that only
// cross a switch are in transit_frames.h.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/abi/wire.h"
#include "common/frame.h"
#include "common/net.h"

namespace inc::selftest {

// The INC header fields a test chooses; the rest keep IncHeader's defaults.
struct IncHeaderFields {
  uint16_t tree_id = 0;
  uint32_t key = 0;
  uint16_t pool = 1;  // the tree's slot pool: slot = msg_id % pool
  uint16_t rank = 0;
  uint32_t msg_id = 0;
  uint16_t count = 0;
  uint8_t collective = INC_COLL_ALLREDUCE;
  uint8_t dtype = INC_DTYPE_INT32;
  uint8_t op = INC_OP_SUM;
};

inline IncHeader MakeIncHeader(const IncHeaderFields& f) {
  IncHeader h;
  h.collective = f.collective;
  h.dtype = f.dtype;
  h.op = f.op;
  h.tree_id = f.tree_id;
  h.rank = f.rank;
  h.msg_id = f.msg_id;
  h.slot = static_cast<uint16_t>(f.msg_id % f.pool);
  h.count = f.count;
  h.key = f.key;
  return h;
}

// The two ends of the link between a switch port and one peer.
struct IncLink {
  Mac port_mac;  // the switch port
  Ipv4 switch_ip;
  uint32_t switch_qpn = 0;
  Mac peer_mac;
  Ipv4 peer_ip;
  uint32_t peer_qpn = 0;
};

// What an INC frame on a link carries besides the addresses.
struct IncFrame {
  IncHeader inc;
  std::vector<uint8_t> payload;
  uint32_t psn = 0;
  // RETH: toward the switch any value (the switch does not address by it),
  // toward a peer the address of the message's slot in its buffer.
  uint64_t va = 0x1234;
  uint32_t rkey = 0x99;
};

// The frame bytes, or none (and a test failure) if BuildFrame refuses.
inline std::vector<uint8_t> BuildIncFrame(FrameSpec s, const IncFrame& f) {
  s.psn = f.psn;
  s.va = f.va;
  s.rkey = f.rkey;
  s.inc = f.inc;
  s.payload = f.payload.data();
  s.payload_len = f.payload.size();
  auto b = BuildFrame(s);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : std::vector<uint8_t>{};
}

// A frame from the peer to the switch (contribution, retransmission, a
// parent's result or pull, a child switch's partial).
inline std::vector<uint8_t> IncFrameToSwitch(const IncLink& l, const IncFrame& f) {
  FrameSpec s;
  s.src_mac = l.peer_mac;
  s.dst_mac = l.port_mac;
  s.src_ip = l.peer_ip;
  s.dst_ip = l.switch_ip;
  s.src_qpn = l.peer_qpn;
  s.dest_qpn = l.switch_qpn;
  return BuildIncFrame(s, f);
}

// A frame from the switch to the peer (a result or a partial).
inline std::vector<uint8_t> IncFrameToPeer(const IncLink& l, const IncFrame& f) {
  FrameSpec s;
  s.src_mac = l.port_mac;
  s.dst_mac = l.peer_mac;
  s.src_ip = l.switch_ip;
  s.dst_ip = l.peer_ip;
  s.src_qpn = l.switch_qpn;
  s.dest_qpn = l.peer_qpn;
  return BuildIncFrame(s, f);
}

}  // namespace inc::selftest
