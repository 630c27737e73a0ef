// SPDX-License-Identifier: Apache-2.0
// Shared by the data-path selftests (selftests/datapath/*_test.cc, one per
// data-path header or role): the private network namespace with kPorts veth
// pairs, a loaded switch, peers, tree specs, INC frames (selftests/inc_frames.h,
// built independently by common/frame.h), the host reference of every
// collective, and RunMessage.
#pragma once

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../inc_frames.h"
#include "../transit_frames.h"
#include "common/frame.h"
#include "common/icrc.h"
#include "common/log.h"
#include "datapath/datapath.h"

namespace inc::dp {

constexpr int kPorts = 72;  // dpt0..dpt71 (switch side) <-> dpt<i>p
constexpr uint16_t kMaxElems32 = INC_MAX_PAYLOAD_BYTES / 4;
constexpr uint16_t kMaxElems64 = INC_MAX_PAYLOAD_BYTES / 8;
// Port MTU: the largest frame (a leaf's partial with its certificate
// trailer), without its Ethernet header.
constexpr int kPortMtu = INC_FRAME_OVERHEAD + INC_MAX_WIRE_PAYLOAD_BYTES - 14;
inline std::string g_skip;  // non-empty: why BPF tests cannot run here
inline const std::string kPinRoot = "/sys/fs/bpf/incin-dpt" + std::to_string(getpid());

inline std::string PortName(int i) {
  return "dpt" + std::to_string(i);
}
inline std::string PeerName(int i) {
  return "dpt" + std::to_string(i) + "p";
}

inline int Sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

// A private network namespace for the whole test process (gone when it
// exits), with kPorts veth pairs; switch-side port i has 10.77.i.1/24.
inline std::string SetupNetns() {
  if (geteuid() != 0) return "needs root";
  struct statfs fs {};
  if (statfs("/sys/fs/bpf", &fs) != 0 || fs.f_type != 0xcafe4a11) return "bpffs not mounted at /sys/fs/bpf";
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  Sh("sysctl -w net.ipv6.conf.all.disable_ipv6=1");
  Sh("sysctl -w net.ipv6.conf.default.disable_ipv6=1");
  std::string batch = "/tmp/dpt-links-" + std::to_string(getpid());
  FILE* f = std::fopen(batch.c_str(), "w");
  if (!f) return "cannot write " + batch;
  std::fprintf(f, "link set lo up\n");
  for (int i = 0; i < kPorts; i++) {
    std::fprintf(f, "link add %s mtu %d type veth peer name %s mtu %d\n", PortName(i).c_str(), kPortMtu,
                 PeerName(i).c_str(), kPortMtu);
    std::fprintf(f, "addr add 10.77.%d.1/24 dev %s\n", i, PortName(i).c_str());
    std::fprintf(f, "link set %s up\nlink set %s up\n", PortName(i).c_str(), PeerName(i).c_str());
  }
  std::fclose(f);
  int rc = Sh("ip -batch " + batch);
  unlink(batch.c_str());
  if (rc != 0) return "creating veth pairs failed";
  return "";
}

// ----------------------------------------------------------------- peers --

// A member or neighbour switch behind a switch port; the link's addresses
// and QPs are in selftest::IncLink.
struct Peer : selftest::IncLink {
  int port_index = 0;
  std::string port;
  uint32_t ifindex = 0;
  uint32_t rkey = 0, stride = 4096;
  uint64_t va = 0;
  uint16_t member_lo = 0, member_hi = 0;

  Endpoint ToEndpoint() const {
    Endpoint e;
    e.port = port;
    e.peer_mac = peer_mac;
    e.peer_ip = peer_ip;
    e.peer_qpn = peer_qpn;
    e.switch_qpn = switch_qpn;
    e.rkey = rkey;
    e.va_base = va;
    e.slot_stride = stride;
    e.member_lo = member_lo;
    e.member_hi = member_hi;
    return e;
  }
};

// A member (or neighbour switch) behind switch port `port_index`.
inline Peer MakePeer(int port_index, uint16_t member) {
  Peer p;
  p.port_index = port_index;
  p.port = PortName(port_index);
  auto info = GetInterfaceInfo(p.port);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (info.ok()) {
    p.port_mac = info->mac;
    p.switch_ip = info->ip;
    p.ifindex = info->ifindex;
  }
  p.peer_mac.bytes = {0x02, 0x55, 0, 0, static_cast<uint8_t>(port_index), 0x02};
  p.peer_ip = Ipv4{(10u << 24) | (77u << 16) | (static_cast<uint32_t>(port_index) << 8) | 2u};
  p.peer_qpn = 0x200 + port_index;
  p.switch_qpn = 0x100 + port_index;
  p.rkey = 0xAB00 + port_index;
  p.va = 0x10000000ull * (port_index + 1);
  p.member_lo = member;
  p.member_hi = member + 1;
  return p;
}

// ----------------------------------------------------------- test runs --

// One BPF_PROG_TEST_RUN (selftests/transit_frames.h, shared with the
// forwarder and credit selftests).
using selftest::RunResult;
using selftest::TestRun;

inline std::string Hex(const std::vector<uint8_t>& v) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < v.size(); i++) {
    std::snprintf(b, sizeof(b), "%02x", v[i]);
    s += b;
    if (i % 32 == 31)
      s += "\n";
    else if (i % 4 == 3)
      s += " ";
  }
  return s;
}

// Payload helpers: elements little-endian as in host memory.
template <typename T>
inline std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The switch under test, with its pins removed at the end.
struct Switch {
  std::unique_ptr<Datapath> dp;
  explicit Switch(const std::string& name, bool verify_icrc = true, uint32_t capacity = 1024) {
    Options o;
    o.switch_name = name;
    o.pin_root = kPinRoot;
    o.slot_capacity = capacity;
    o.verify_icrc = verify_icrc;
    auto d = Datapath::Open(o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) dp = std::move(*d);
  }
  ~Switch() {
    if (dp) (void)dp->Destroy();
  }
  int prog() const { return dp->ingress_prog_fd(); }
  uint64_t Drops(const std::string& reason) const {
    auto s = dp->ReadStats();
    return s.ok() ? s->drops.at(reason) : ~0ull;
  }
  std::map<std::string, uint64_t> AllDrops() const {
    auto s = dp->ReadStats();
    return s.ok() ? s->drops : std::map<std::string, uint64_t>{};
  }
  uint64_t Stat(const std::string& name) const {
    auto s = dp->ReadStats();
    return s.ok() ? s->global.at(name) : ~0ull;
  }
};

inline std::string UniqueName(const std::string& what) {
  static int n = 0;
  return "dpt" + std::to_string(getpid()) + "-" + what + std::to_string(n++);
}

struct TreeParams {
  uint16_t tree_id = 1;
  uint32_t key = 0x5EC12E7;
  uint16_t pool = 8;
  uint32_t slot_base = 0;
  uint16_t max_elems = 240;
  uint8_t role = INC_ROLE_SINGLE;
};

inline TreeSpec MakeTree(const TreeParams& t, const std::vector<Peer>& children) {
  TreeSpec s;
  s.tree_id = t.tree_id;
  s.key = t.key;
  s.role = t.role;
  s.pool_size = t.pool;
  s.slot_base = t.slot_base;
  s.max_elems = t.max_elems;
  for (const auto& c : children) s.children.push_back(c.ToEndpoint());
  return s;
}

inline IncHeader Header(const TreeParams& t, uint16_t rank, uint32_t msg, uint16_t count,
                        uint8_t coll = INC_COLL_ALLREDUCE, uint8_t dtype = INC_DTYPE_INT32,
                        uint8_t op = INC_OP_SUM) {
  return selftest::MakeIncHeader({.tree_id = t.tree_id,
                                  .key = t.key,
                                  .pool = t.pool,
                                  .rank = rank,
                                  .msg_id = msg,
                                  .count = count,
                                  .collective = coll,
                                  .dtype = dtype,
                                  .op = op});
}

// A frame from peer p to its switch.
inline std::vector<uint8_t> FromPeer(const Peer& p, const IncHeader& h, const std::vector<uint8_t>& payload,
                                     uint32_t psn = 7) {
  return selftest::IncFrameToSwitch(p, {.inc = h, .payload = payload, .psn = psn});
}

// The frame the switch must send to peer p (result or partial): addressed to
// the message's slot in p's buffer.
inline std::vector<uint8_t> ToPeer(const Peer& p, IncHeader h, const std::vector<uint8_t>& payload,
                                   uint32_t psn) {
  return selftest::IncFrameToPeer(
      p,
      {.inc = h, .payload = payload, .psn = psn, .va = p.va + uint64_t{h.slot} * p.stride, .rkey = p.rkey});
}

inline IncHeader ResultHeader(IncHeader h, uint16_t count, uint8_t extra_flags = 0) {
  h.flags = INC_FLAG_RESULT | extra_flags;
  h.rank = INC_RANK_RESULT;
  h.count = count;
  return h;
}

// The generic result frame ingress hands to the devmap broadcast: the
// completing frame with the result header and payload, and crc32_le(0, R)
// in the ICRC field for the egress program.
inline void ExpectBroadcastFrame(const std::vector<uint8_t>& out, const IncHeader& want_hdr,
                                 const std::vector<uint8_t>& want_payload) {
  auto parsed = ParseFrame(out.data(), out.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << Hex(out);
  EXPECT_EQ(parsed->inc.flags, want_hdr.flags);
  EXPECT_EQ(parsed->inc.rank, want_hdr.rank);
  EXPECT_EQ(parsed->inc.count, want_hdr.count);
  EXPECT_EQ(parsed->inc.msg_id, want_hdr.msg_id);
  EXPECT_EQ(parsed->inc.aux, want_hdr.aux) << "aux (certificate code and flags)";
  EXPECT_EQ(parsed->dma_len, sizeof(inc_hdr) + want_payload.size());
  ASSERT_EQ(parsed->payload_len, want_payload.size());
  EXPECT_EQ(std::vector<uint8_t>(parsed->payload, parsed->payload + parsed->payload_len), want_payload);
  uint32_t crc_r = Crc32Le(0, out.data() + INC_OFF_IMMDT, out.size() - INC_OFF_IMMDT - INC_ICRC_LEN);
  EXPECT_EQ(parsed->icrc_wire, crc_r) << "ICRC field must carry crc32_le(0, R) for the egress program";
}

class DatapathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  }
};

// ------------------------------------------------------ reference math --

struct Reduced {
  std::vector<uint8_t> bytes;
  bool overflow = false;
};

inline int32_t F32Key(int32_t x) {
  return x ^ ((x >> 31) & 0x7fffffff);
}

inline size_t ElemSize(uint8_t dtype) {
  return dtype == INC_DTYPE_INT64 || dtype == INC_DTYPE_FP64 ? 8 : 4;
}

template <typename T>
T BitwiseReference(uint8_t op, T a, T b) {
  return op == INC_OP_BAND ? a & b : op == INC_OP_BOR ? a | b : a ^ b;
}

inline Reduced Reference(uint8_t dtype, uint8_t op, const std::vector<std::vector<uint8_t>>& in) {
  Reduced r;
  r.bytes = in[0];
  size_t esz = ElemSize(dtype);
  size_t n = r.bytes.size() / esz;
  for (size_t k = 1; k < in.size(); k++) {
    for (size_t i = 0; i < n; i++) {
      if (esz == 8) {
        int64_t a, b;
        std::memcpy(&a, &r.bytes[i * 8], 8);
        std::memcpy(&b, &in[k][i * 8], 8);
        int64_t v = a;
        if (op == INC_OP_SUM) {
          v = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
          // FP64 lanes are fixed point with headroom, like FP32's: no
          // OVERFLOW flag.
          if (dtype != INC_DTYPE_FP64 && ((b > 0 && a > std::numeric_limits<int64_t>::max() - b) ||
                                          (b < 0 && a < std::numeric_limits<int64_t>::min() - b)))
            r.overflow = true;
        } else if (op == INC_OP_MIN) {
          v = std::min(a, b);
        } else if (op == INC_OP_MAX) {
          v = std::max(a, b);
        } else {
          v = BitwiseReference(op, a, b);
        }
        std::memcpy(&r.bytes[i * 8], &v, 8);
      } else {
        int32_t a, b;
        std::memcpy(&a, &r.bytes[i * 4], 4);
        std::memcpy(&b, &in[k][i * 4], 4);
        int32_t v = a;
        if (op == INC_OP_SUM) {
          int64_t wide = int64_t{a} + b;
          v = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
          // FP32 lanes are fixed point with headroom: the switch adds them
          // in int32 and does not look for OVERFLOW (the bit patterns these
          // tests use do wrap; the bytes are the same).
          if (wide != v && dtype != INC_DTYPE_FP32) r.overflow = true;
        } else if (inc_op_bitwise(op)) {
          v = BitwiseReference(op, a, b);
        } else {
          bool fp = dtype == INC_DTYPE_FP32;
          int32_t ka = fp ? F32Key(a) : a, kb = fp ? F32Key(b) : b;
          if (op == INC_OP_MIN ? kb < ka : kb > ka) v = b;
        }
        std::memcpy(&r.bytes[i * 4], &v, 4);
      }
    }
  }
  return r;
}

// ------------------------------------------------- accuracy certificate --
// Computed here from the contributions, independently of the data path's
// SWAR arithmetic: exact abs sums in 128 bits, T = (C & 0xFF) << ((C >> 8) &
// 0x3F) in 128 bits.

// A_i = sum over the contributions of |lane i| (FP32: int32 lanes, FP64:
// int64 lanes).
inline std::vector<unsigned __int128> AbsSums(uint8_t dtype, const std::vector<std::vector<uint8_t>>& in) {
  size_t esz = ElemSize(dtype), n = in.empty() ? 0 : in[0].size() / esz;
  std::vector<unsigned __int128> a(n, 0);
  for (const auto& c : in) {
    for (size_t i = 0; i < n; i++) {
      int64_t v;
      if (esz == 8) {
        std::memcpy(&v, &c[i * 8], 8);
      } else {
        int32_t w;
        std::memcpy(&w, &c[i * 4], 4);
        v = w;
      }
      a[i] += v < 0 ? static_cast<unsigned __int128>(-static_cast<__int128>(v))
                    : static_cast<unsigned __int128>(v);
    }
  }
  return a;
}

inline unsigned __int128 Threshold(uint16_t code) {
  return static_cast<unsigned __int128>(code & 0xFF) << ((code >> 8) & 0x3F);
}

// Element i is certified (code != 0).
inline std::vector<bool> Certified(uint8_t dtype, uint16_t code,
                                   const std::vector<std::vector<uint8_t>>& in) {
  auto a = AbsSums(dtype, in);
  std::vector<bool> ok(a.size());
  for (size_t i = 0; i < a.size(); i++) ok[i] = a[i] >= Threshold(code);
  return ok;
}

// What a single switch says about the message: aux = C | UNCERTIFIED iff
// some element's abs sum is below T and not 0 (an all-zero element is an
// exact zero sum) or a member flagged its contribution (member_flag); 0 for
// code 0 and for messages that are not FP32/FP64 sums.
inline uint16_t ResultAux(uint8_t coll, uint8_t dtype, uint8_t op, uint16_t code,
                          const std::vector<std::vector<uint8_t>>& in, bool member_flag = false) {
  if (!inc_certified_msg(coll, dtype, op) || code == 0) return 0;
  auto a = AbsSums(dtype, in);
  bool uncertified = member_flag;
  for (auto v : a) uncertified |= v != 0 && v < Threshold(code);
  return static_cast<uint16_t>(code | (uncertified ? INC_AUX_UNCERTIFIED : 0));
}

// A leaf's trailer: 12 little-endian words, bit i set iff element i is
// certified over the leaf's members.
inline std::vector<uint8_t> Trailer(const std::vector<bool>& certified) {
  std::vector<uint64_t> w(INC_CERT_TRAILER_WORDS, 0);
  for (size_t i = 0; i < certified.size(); i++)
    if (certified[i]) w[i / 64] |= uint64_t{1} << (i % 64);
  return Bytes(w);
}

// Deterministic pseudo-random payload of n elements for rank/message.
inline std::vector<uint8_t> Payload(uint8_t dtype, uint16_t n, uint32_t seed, bool big = false) {
  std::vector<uint8_t> b;
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (uint16_t i = 0; i < n; i++) {
    if (dtype == INC_DTYPE_FP64) {
      // Block fixed point: within 2^(62 - h) of zero, either sign.
      int64_t v = static_cast<int64_t>(next() % (uint64_t{1} << 50)) - (int64_t{1} << 49);
      auto* p = reinterpret_cast<uint8_t*>(&v);
      b.insert(b.end(), p, p + 8);
    } else if (dtype == INC_DTYPE_INT64) {
      int64_t v = big ? static_cast<int64_t>(next()) : static_cast<int64_t>(next() % 2000001) - 1000000;
      auto* p = reinterpret_cast<uint8_t*>(&v);
      b.insert(b.end(), p, p + 8);
    } else if (dtype == INC_DTYPE_FP32) {
      float f = static_cast<float>(static_cast<int64_t>(next() % 20001) - 10000) / 7.0f;
      auto* p = reinterpret_cast<uint8_t*>(&f);
      b.insert(b.end(), p, p + 4);
    } else {
      int32_t v = big ? static_cast<int32_t>(next()) : static_cast<int32_t>(next() % 2000001) - 1000000;
      auto* p = reinterpret_cast<uint8_t*>(&v);
      b.insert(b.end(), p, p + 4);
    }
  }
  return b;
}

// ------------------------------------------------------------ AllReduce --

// Runs one message through a single-level tree: every child contributes;
// all but the last are consumed, the last yields the broadcast result; then
// every child retransmits and gets its own addressed copy back (XDP_TX),
// byte-exact with a valid ICRC. Returns false on a fatal mismatch.
// `code`: the certificate threshold code every contribution carries in aux;
// the result and every resent copy must carry ResultAux.
inline void RunMessage(Switch& sw, const TreeParams& t, const std::vector<Peer>& kids, uint32_t msg,
                       uint8_t coll, uint8_t dtype, uint8_t op,
                       const std::vector<std::vector<uint8_t>>& contrib, uint8_t root,
                       std::vector<uint32_t>* psn, bool retransmit_all = true, uint16_t code = 0,
                       uint64_t flagging_members = 0) {
  size_t esz = ElemSize(dtype);
  std::vector<uint8_t> want;
  bool ovf = false;
  uint16_t aux = 0;
  if (coll == INC_COLL_BROADCAST) {
    for (const auto& c : contrib)
      if (!c.empty()) want = c;
  } else if (coll != INC_COLL_BARRIER) {
    auto r = Reference(dtype, op, contrib);
    want = r.bytes;
    ovf = r.overflow;
    aux = ResultAux(coll, dtype, op, code, contrib, flagging_members != 0);
  }
  uint16_t count = static_cast<uint16_t>(want.size() / esz);
  IncHeader last_hdr;
  for (size_t i = 0; i < kids.size(); i++) {
    IncHeader h = Header(t, static_cast<uint16_t>(i), msg, static_cast<uint16_t>(contrib[i].size() / esz),
                         coll, dtype, op);
    h.root_rank = root;
    h.aux = static_cast<uint16_t>(code | ((flagging_members >> i) & 1 ? INC_AUX_UNCERTIFIED : 0));
    auto r = TestRun(sw.prog(), FromPeer(kids[i], h, contrib[i]), kids[i].ifindex);
    ASSERT_EQ(r.err, 0);
    if (i + 1 < kids.size()) {
      ASSERT_EQ(r.retval, XDP_DROP) << "contribution " << i << " of msg " << msg << " must be consumed";
      continue;
    }
    ASSERT_EQ(r.retval, XDP_REDIRECT) << "last contribution must broadcast the result";
    last_hdr = h;
    IncHeader rh = ResultHeader(h, count, ovf ? INC_FLAG_OVERFLOW : 0);
    rh.aux = aux;
    ExpectBroadcastFrame(r.out, rh, want);
  }
  if (!retransmit_all) return;
  for (size_t i = 0; i < kids.size(); i++) {
    IncHeader h = Header(t, static_cast<uint16_t>(i), msg, static_cast<uint16_t>(contrib[i].size() / esz),
                         coll, dtype, op);
    h.root_rank = root;
    h.aux = static_cast<uint16_t>(code | ((flagging_members >> i) & 1 ? INC_AUX_UNCERTIFIED : 0));
    h.flags = INC_FLAG_RETRANSMIT;
    auto r = TestRun(sw.prog(), FromPeer(kids[i], h, contrib[i]), kids[i].ifindex);
    ASSERT_EQ(r.err, 0);
    if (coll == INC_COLL_BROADCAST && !contrib[i].empty()) {
      // The root's side resending data replicates the result to every child
      // (it may be the only frame with room for it).
      ASSERT_EQ(r.retval, XDP_REDIRECT) << "root-side retransmission must rebroadcast";
      IncHeader bh = last_hdr;
      bh.flags = INC_FLAG_RESULT;
      bh.rank = INC_RANK_RESULT;
      bh.count = count;
      bh.aux = aux;
      ExpectBroadcastFrame(r.out, bh, want);
      continue;
    }
    ASSERT_EQ(r.retval, XDP_TX) << "retransmission from child " << i << " must get the result back";
    bool gets_data = coll != INC_COLL_REDUCE || (root >= kids[i].member_lo && root < kids[i].member_hi);
    IncHeader rh = last_hdr;
    rh.flags = INC_FLAG_RESULT | (ovf ? INC_FLAG_OVERFLOW : 0);
    rh.rank = INC_RANK_RESULT;
    rh.count = gets_data ? count : 0;
    rh.aux = aux;  // the same on every copy, element-less Reduce notices too
    std::vector<uint8_t> payload = gets_data ? want : std::vector<uint8_t>{};
    auto expected = ToPeer(kids[i], rh, payload, (*psn)[i]++);
    EXPECT_EQ(Hex(r.out), Hex(expected)) << "result copy to child " << i;
    EXPECT_TRUE(CheckIcrc(r.out.data(), r.out.size())) << "ICRC of the copy to child " << i;
  }
}

// A link between two switches of a tree that takes its two endpoints:
// `up` is the parent as the child switch sees it, `down` the child as the
// parent sees it.
struct SwitchLink {
  Peer up, down;
};

// Switches ignore VA, rkey and stride toward each other.
inline SwitchLink LinkSwitches(int child_port, int parent_port, uint32_t parent_qpn, uint32_t child_qpn,
                               uint16_t member_lo, uint16_t member_hi) {
  SwitchLink l{MakePeer(child_port, 0), MakePeer(parent_port, 0)};
  l.up.peer_mac = l.down.port_mac;
  l.up.peer_ip = l.down.switch_ip;
  l.down.peer_mac = l.up.port_mac;
  l.down.peer_ip = l.up.switch_ip;
  l.up.peer_qpn = l.down.switch_qpn = parent_qpn;
  l.up.switch_qpn = l.down.peer_qpn = child_qpn;
  l.up.va = l.down.va = 0;
  l.up.rkey = l.down.rkey = 0;
  l.up.stride = l.down.stride = 0;
  l.down.member_lo = member_lo;
  l.down.member_hi = member_hi;
  return l;
}

inline std::vector<Peer> Kids(int n, int first_port = 0) {
  std::vector<Peer> v;
  for (int i = 0; i < n; i++) v.push_back(MakePeer(first_port + i, static_cast<uint16_t>(i)));
  return v;
}

}  // namespace inc::dp
