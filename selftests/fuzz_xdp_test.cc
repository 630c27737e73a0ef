// SPDX-License-Identifier: Apache-2.0
// fuzz.xdp_frames: the switch's XDP ingress program (bpf/inc_switch.bpf.c,
// loaded through inc::dp::Datapath with three live trees: single-level,
// leaf with a parent, root with a child switch, and one best-path route)
// gets valid seed frames (contributions of every collective and dtype,
// retransmissions, a parent's RESULT and PULL, a child switch's partial and
// pull answer, ARN and RSVP datagrams, transit RoCE, plain UDP, ARP)
// mutated at random (bit flips, byte sets, truncation, extension,
// header-field edits, splices, another ingress port) through
// BPF_PROG_TEST_RUN, and checks after every frame and every batch:
//   - the run succeeds and the verdict is DROP, PASS, TX or REDIRECT;
//   - counters add up: every frame counts rx_packets once, at most one drop,
//     a drop verdict is a counted drop, a consumed contribution or an
//     ignored pull, a PASS is counted as pass, the drop reasons sum to the
//     drop total;
//   - a frame counted as dropped leaves the slot copy it addresses
//     byte-identical, and at the end of each batch the whole slot map equals
//     a mirror that only frames the data path accepted may change.
// Time budget INC_FUZZ_SECONDS (default 45) or exactly INC_FUZZ_FRAMES
// frames; INC_FUZZ_SEED fixes the PRNG seed (printed either way).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "arn/message.h"
#include "common/frame.h"
#include "common/log.h"
#include "credit/rsvp.h"
#include "datapath/datapath.h"
#include "datapath/forwarding.h"
#include "inc_frames.h"
#include "transit_frames.h"
#include "veth_netns.h"

namespace inc::dp {
namespace {

constexpr int kPorts = 8;               // fz0..fz7, port i has 10.78.i.1/24
constexpr size_t kMaxFrame = 3500;      // single-buffer XDP test_run frames
constexpr size_t kBatch = 4096;         // frames between whole-map checks
constexpr uint32_t kSlotCapacity = 32;  // slot map: 64 copies
std::string g_skip;
const std::string kPinRoot = "/sys/fs/bpf/incin-fuzz" + std::to_string(getpid());

std::string PortName(int i) {
  return "fz" + std::to_string(i);
}

std::string SetupNetns() {
  std::string why = selftest::SetupVethNetns("fz", kPorts, "0e");
  if (!why.empty()) return why;
  for (int i = 0; i < kPorts; i++) {
    if (selftest::Sh("ip addr add 10.78." + std::to_string(i) + ".1/24 dev " + PortName(i)) != 0)
      return "cannot address " + PortName(i);
  }
  return "";
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

// A peer of the switch behind port `port` (member or neighbour switch); its
// link's addresses and QPs are in selftest::IncLink.
struct Peer : selftest::IncLink {
  int port = 0;
  uint32_t ifindex = 0;
  uint16_t member_lo = 0, member_hi = 1;

  Endpoint ToEndpoint() const {
    Endpoint e;
    e.port = PortName(port);
    e.peer_mac = peer_mac;
    e.peer_ip = peer_ip;
    e.peer_qpn = peer_qpn;
    e.switch_qpn = switch_qpn;
    e.rkey = 0x100 + port;
    e.va_base = 0x10000000ull * (port + 1);
    e.slot_stride = 4096;
    e.member_lo = member_lo;
    e.member_hi = member_hi;
    return e;
  }
};

Peer MakePeer(int port, uint32_t qpn_base, uint16_t lo, uint16_t hi) {
  Peer p;
  p.port = port;
  auto info = GetInterfaceInfo(PortName(port));
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (info.ok()) {
    p.ifindex = info->ifindex;
    p.port_mac = info->mac;
    p.switch_ip = info->ip;
  }
  p.peer_mac.bytes = {0x02, 0x78, 0, 0, static_cast<uint8_t>(port), 0x02};
  p.peer_ip = Ipv4{(10u << 24) | (78u << 16) | (static_cast<uint32_t>(port) << 8) | 2u};
  p.peer_qpn = qpn_base + 0x200 + port;
  p.switch_qpn = qpn_base + 0x100 + port;
  p.member_lo = lo;
  p.member_hi = hi;
  return p;
}

struct Tree {
  TreeSpec spec;
  std::vector<Peer> children;
  Peer parent;  // LEAF only
};

// A frame and the port it arrives on (0: lo, i.e. no switch port).
struct Frame {
  std::string name;
  std::vector<uint8_t> bytes;
  uint32_t ingress = 0;
};

std::vector<uint8_t> Payload(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> p(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : p) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return p;
}

Frame FromPeer(const std::string& name, const Peer& p, const IncHeader& h,
               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f = selftest::IncFrameToSwitch(p, {.inc = h, .payload = payload, .psn = 1});
  if (f.empty()) f.assign(64, 0);  // not built (a test failure already): still a frame to mutate
  return Frame{name, std::move(f), p.ifindex};
}

// Ethernet + IPv4 (+ the given L4 bytes) from a peer to its port's address.
Frame IpFrame(const std::string& name, const Peer& p, uint8_t proto, const std::vector<uint8_t>& l4,
              Ipv4 dst) {
  std::vector<uint8_t> f(14 + 20);
  std::memcpy(&f[0], p.port_mac.bytes.data(), 6);
  std::memcpy(&f[6], p.peer_mac.bytes.data(), 6);
  f[12] = 0x08;
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  ip[1] = 0xC0;
  uint16_t tot = static_cast<uint16_t>(20 + l4.size());
  ip[2] = tot >> 8;
  ip[3] = tot & 0xff;
  ip[6] = 0x40;
  ip[8] = 64;
  ip[9] = proto;
  uint32_t sa = p.peer_ip.be(), da = dst.be();
  std::memcpy(ip + 12, &sa, 4);
  std::memcpy(ip + 16, &da, 4);
  uint16_t c = selftest::IpChecksum(ip, 20);
  ip[10] = c >> 8;
  ip[11] = c & 0xff;
  f.insert(f.end(), l4.begin(), l4.end());
  return Frame{name, f, p.ifindex};
}

std::vector<uint8_t> Udp(uint16_t sport, uint16_t dport, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> u(8);
  u[0] = sport >> 8;
  u[1] = sport & 0xff;
  u[2] = dport >> 8;
  u[3] = dport & 0xff;
  uint16_t len = static_cast<uint16_t>(8 + payload.size());
  u[4] = len >> 8;
  u[5] = len & 0xff;
  u.insert(u.end(), payload.begin(), payload.end());
  return u;
}

// ------------------------------------------------------------ map access --

// A per-CPU u64 array map read as per-key sums over CPUs, in one batch
// lookup per read (one syscall per frame matters at millions of frames).
class PerCpuCounters {
 public:
  PerCpuCounters(int fd, uint32_t entries, int ncpu)
      : fd_(fd), entries_(entries), ncpu_(ncpu), keys_(entries), values_(size_t{entries} * ncpu) {}

  std::vector<uint64_t> Read() {
    std::vector<uint64_t> sums(entries_, 0);
    uint32_t count = entries_, next = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int err = bpf_map_lookup_batch(fd_, nullptr, &next, keys_.data(), values_.data(), &count, &opts);
    if ((err == 0 || errno == ENOENT) && count == entries_) {
      for (uint32_t i = 0; i < count; i++) {
        for (int c = 0; c < ncpu_; c++) sums[keys_[i]] += values_[size_t{i} * ncpu_ + c];
      }
      return sums;
    }
    for (uint32_t k = 0; k < entries_; k++) {  // kernels without batch ops on arrays
      if (bpf_map_lookup_elem(fd_, &k, values_.data()) != 0) continue;
      for (int c = 0; c < ncpu_; c++) sums[k] += values_[c];
    }
    return sums;
  }

 private:
  int fd_;
  uint32_t entries_;
  int ncpu_;
  std::vector<uint32_t> keys_;
  std::vector<uint64_t> values_;
};

std::vector<inc_slot> ReadAllSlots(int fd, uint32_t copies) {
  std::vector<inc_slot> all(copies);
  for (uint32_t i = 0; i < copies; i++) bpf_map_lookup_elem(fd, &i, &all[i]);
  return all;
}

bool SameSlot(const inc_slot& a, const inc_slot& b) {
  return std::memcmp(&a, &b, sizeof(inc_slot)) == 0;
}

// ------------------------------------------------------------- mutation --

struct Field {
  size_t offset;
  int width;  // bytes, big-endian on the wire
};

// Header fields a field-aware mutation edits (offsets in an INC frame).
const Field kFields[] = {
    {12, 2},                 // ethertype
    {INC_OFF_IP, 1},         // version/IHL
    {INC_OFF_IP + 2, 2},     // total length
    {INC_OFF_IP + 6, 2},     // flags/fragment
    {INC_OFF_IP + 9, 1},     // protocol
    {INC_OFF_IP + 12, 4},    // source
    {INC_OFF_IP + 16, 4},    // destination
    {INC_OFF_UDP + 2, 2},    // destination port
    {INC_OFF_UDP + 4, 2},    // UDP length
    {INC_OFF_BTH, 1},        // opcode
    {INC_OFF_BTH + 1, 1},    // SE/M/PadCnt/TVer
    {INC_OFF_BTH + 5, 3},    // DestQP
    {INC_OFF_RETH + 12, 4},  // DMA length
    {INC_OFF_IMMDT, 4},      // immediate
    {INC_OFF_INC, 1},        // version/flags
    {INC_OFF_INC + 1, 1},    // collective
    {INC_OFF_INC + 2, 1},    // dtype
    {INC_OFF_INC + 3, 1},    // op
    {INC_OFF_INC + 4, 2},    // tree id
    {INC_OFF_INC + 6, 2},    // rank
    {INC_OFF_INC + 8, 4},    // msg id
    {INC_OFF_INC + 12, 2},   // slot
    {INC_OFF_INC + 14, 2},   // count
    {INC_OFF_INC + 16, 4},   // key
    {INC_OFF_INC + 20, 1},   // exponent
    {INC_OFF_INC + 21, 1},   // root rank
    {INC_OFF_INC + 22, 2},   // aux
};

uint64_t GetBe(const std::vector<uint8_t>& f, const Field& x) {
  uint64_t v = 0;
  for (int i = 0; i < x.width; i++) v = (v << 8) | f[x.offset + i];
  return v;
}

void SetBe(std::vector<uint8_t>& f, const Field& x, uint64_t v) {
  for (int i = x.width - 1; i >= 0; i--) {
    f[x.offset + i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

// IP total length, UDP length and IP header checksum after a length edit,
// so that mutations get past the parser more often.
void FixLengths(std::vector<uint8_t>& f) {
  if (f.size() < INC_OFF_UDP || f[12] != 0x08 || f[13] != 0x00) return;
  size_t ihl = (f[INC_OFF_IP] & 0xf) * 4u;
  if (ihl < 20 || f.size() < INC_OFF_IP + ihl) return;
  uint16_t tot = static_cast<uint16_t>(f.size() - INC_OFF_IP);
  f[INC_OFF_IP + 2] = tot >> 8;
  f[INC_OFF_IP + 3] = tot & 0xff;
  size_t udp = INC_OFF_IP + ihl;
  if (f[INC_OFF_IP + 9] == 17 && f.size() >= udp + 8) {
    uint16_t ul = static_cast<uint16_t>(f.size() - udp);
    f[udp + 4] = ul >> 8;
    f[udp + 5] = ul & 0xff;
  }
  f[INC_OFF_IP + 10] = f[INC_OFF_IP + 11] = 0;
  uint16_t c = selftest::IpChecksum(&f[INC_OFF_IP], ihl);
  f[INC_OFF_IP + 10] = c >> 8;
  f[INC_OFF_IP + 11] = c & 0xff;
}

// Seeds (indices) that make up one message exchange: every contribution of
// a collective, then what a parent or child switch sends about it.
using Exchange = std::vector<size_t>;

void SetMessage(std::vector<uint8_t>& f, uint32_t msg) {
  if (f.size() < INC_OFF_PAYLOAD) return;
  SetBe(f, {INC_OFF_INC + 8, 4}, msg);
  SetBe(f, {INC_OFF_IMMDT, 4}, msg);
  SetBe(f, {INC_OFF_INC + 12, 2}, msg % 8);
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<Frame>& seeds, std::vector<Exchange> exchanges,
          std::vector<uint32_t> ports)
      : rng_(seed), seeds_(seeds), exchanges_(std::move(exchanges)), ports_(std::move(ports)) {}

  Frame Next() {
    if (!queue_.empty()) {
      Frame f = std::move(queue_.front());
      queue_.erase(queue_.begin());
      return f;
    }
    // One frame in eight starts a whole exchange, unmutated, on the next
    // message id (the message clock), so that slots keep aggregating,
    // completing, waiting for and taking parents' results.
    if (Pick(8) == 0) {
      const Exchange& x = exchanges_[Pick(exchanges_.size())];
      uint32_t msg = ++clock_;
      for (size_t i : x) {
        Frame f = seeds_[i];
        SetMessage(f.bytes, msg);
        queue_.push_back(std::move(f));
      }
      return Next();
    }
    Frame f = seeds_[Pick(seeds_.size())];
    SetMessage(f.bytes, clock_ + static_cast<uint32_t>(Pick(4)));
    int rounds = 1 + static_cast<int>(Pick(3));
    for (int r = 0; r < rounds; r++) Mutate(f);
    if (Pick(2) == 0) FixLengths(f.bytes);
    if (f.bytes.size() < 14) f.bytes.resize(14, 0);
    if (f.bytes.size() > kMaxFrame) f.bytes.resize(kMaxFrame);
    return f;
  }

 private:
  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  uint8_t Byte() { return static_cast<uint8_t>(Pick(256)); }

  uint64_t Interesting(const Field& x, uint64_t current) {
    uint64_t max = x.width >= 8 ? ~0ull : (1ull << (8 * x.width)) - 1;
    // A message id far ahead makes its slot copy refuse every later one as
    // stale for 2^31 messages; mostly stay near the clock.
    if ((x.offset == INC_OFF_INC + 8 || x.offset == INC_OFF_IMMDT) && Pick(64) != 0)
      return (clock_ + Pick(64) - 32) & max;
    switch (Pick(8)) {
      case 0: return 0;
      case 1: return max;
      case 2: return (current + 1) & max;
      case 3: return (current - 1) & max;
      case 4: return (current + 1 + Pick(16)) & max;
      case 5: return max >> 1;
      case 6: {  // the same field of another seed (another tree, rank, key ...)
        const Frame& o = seeds_[Pick(seeds_.size())];
        return o.bytes.size() >= x.offset + x.width ? GetBe(o.bytes, x) : current;
      }
      default: return (static_cast<uint64_t>(rng_()) << 32 | rng_()) & max;
    }
  }

  void Mutate(Frame& f) {
    auto& b = f.bytes;
    switch (Pick(8)) {
      case 0: {  // bit flips
        int n = 1 + static_cast<int>(Pick(8));
        for (int i = 0; i < n && !b.empty(); i++) b[Pick(b.size())] ^= static_cast<uint8_t>(1u << Pick(8));
        break;
      }
      case 1: {  // byte sets
        static const uint8_t kValues[] = {0, 1, 0x7f, 0x80, 0xff};
        int n = 1 + static_cast<int>(Pick(4));
        for (int i = 0; i < n && !b.empty(); i++) b[Pick(b.size())] = Pick(2) ? kValues[Pick(5)] : Byte();
        break;
      }
      case 2:  // truncation
        if (b.size() > 14) b.resize(14 + Pick(b.size() - 14));
        break;
      case 3: {  // extension
        size_t n = 1 + Pick(Pick(4) ? 16 : 768);
        for (size_t i = 0; i < n && b.size() < kMaxFrame; i++) b.push_back(Byte());
        break;
      }
      case 4:
      case 5: {  // header field
        const Field& x = kFields[Pick(sizeof(kFields) / sizeof(kFields[0]))];
        if (b.size() >= x.offset + x.width) SetBe(b, x, Interesting(x, GetBe(b, x)));
        break;
      }
      case 6: {  // splice: this frame's headers, another's tail (or the reverse)
        const Frame& o = seeds_[Pick(seeds_.size())];
        size_t cut = Pick(std::min(b.size(), o.bytes.size()) + 1);
        b.resize(cut);
        b.insert(b.end(), o.bytes.begin() + static_cast<long>(cut), o.bytes.end());
        break;
      }
      default:  // another ingress port (or none)
        f.ingress = Pick(ports_.size() + 1) == 0 ? 0 : ports_[Pick(ports_.size())];
        break;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Frame>& seeds_;
  std::vector<Exchange> exchanges_;
  std::vector<uint32_t> ports_;
  std::vector<Frame> queue_;
  uint32_t clock_ = 0;
};

// ------------------------------------------------------------- the test --

class XdpFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
    Options o;
    o.switch_name = "fuzz";
    o.pin_root = kPinRoot;
    o.slot_capacity = kSlotCapacity;
    o.verify_icrc = false;  // deeper: mutated frames are not stopped at the ICRC
    auto d = Datapath::Open(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dp_ = std::move(*d);
    ncpu_ = libbpf_num_possible_cpus();
    ASSERT_GT(ncpu_, 0);
  }
  void TearDown() override {
    if (dp_) (void)dp_->Destroy();
  }

  // Three trees on 8 ports, each slot pool 8: 1 SINGLE (members on ports
  // 0..3), 2 LEAF (members on 4, 5; parent on 6), 3 ROOT (a child switch on
  // 7 for members 0..1, a member on 0 for member 2).
  void ConfigureTrees() {
    auto base = [](uint16_t id, uint8_t role, uint32_t slot_base) {
      TreeSpec s;
      s.tree_id = id;
      s.key = 0xF0220000u + id;
      s.role = role;
      s.pool_size = 8;
      s.slot_base = slot_base;
      s.max_elems = INC_MAX_PAYLOAD_BYTES / 4;
      return s;
    };
    Tree single{base(1, INC_ROLE_SINGLE, 0), {}, {}};
    for (int i = 0; i < 4; i++) single.children.push_back(MakePeer(i, 0, static_cast<uint16_t>(i), i + 1));
    Tree leaf{base(2, INC_ROLE_LEAF, 8),
              {MakePeer(4, 0x1000, 0, 1), MakePeer(5, 0x1000, 1, 2)},
              MakePeer(6, 0x1000, 0, 2)};
    leaf.spec.rank_at_parent = 1;
    Tree root{base(3, INC_ROLE_ROOT, 16), {MakePeer(7, 0x2000, 0, 2), MakePeer(0, 0x2000, 2, 3)}, {}};
    for (Tree* t : {&single, &leaf, &root}) {
      for (const auto& c : t->children) t->spec.children.push_back(c.ToEndpoint());
      if (t->spec.role == INC_ROLE_LEAF) t->spec.parent = t->parent.ToEndpoint();
      Status st = dp_->ConfigureTree(t->spec);
      ASSERT_TRUE(st.ok()) << st.ToString();
      trees_[t->spec.tree_id] = *t;
    }
    auto table = ForwardingTable::Open(*dp_);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    for (int i = 0; i < kPorts; i++) ASSERT_TRUE(table->TrackPort(PortName(i)).ok());
    Route r;
    r.prefix = *Prefix::Parse("10.99.0.0/16");
    r.hops.push_back(NextHop{PortName(6), selftest::HopMac(1), 10, 0});
    r.hops.push_back(NextHop{PortName(7), selftest::HopMac(2), 10, 0});
    Status st = table->SetRoute(r);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  IncHeader Header(uint16_t tree, uint16_t rank, uint32_t msg, uint8_t coll, uint8_t dtype, uint8_t op,
                   uint16_t count) {
    const TreeSpec& t = trees_.at(tree).spec;
    return selftest::MakeIncHeader({.tree_id = tree,
                                    .key = t.key,
                                    .pool = t.pool_size,
                                    .rank = rank,
                                    .msg_id = msg,
                                    .count = count,
                                    .collective = coll,
                                    .dtype = dtype,
                                    .op = op});
  }

  std::vector<Frame> Seeds() {
    std::vector<Frame> s;
    exchanges_.clear();
    const Tree& t1 = trees_.at(1);
    const Tree& t2 = trees_.at(2);
    const Tree& t3 = trees_.at(3);
    struct Kind {
      const char* name;
      uint8_t coll, dtype, op;
      uint16_t count;
      uint16_t aux = 0;  // certificate threshold code
    };
    const Kind kinds[] = {{"int32 sum", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 16},
                          {"int32 sum full", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 768},
                          {"fp32 sum", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 40},
                          {"fp32 max", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MAX, 7},
                          {"int64 sum", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 33},
                          {"int64 min", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_MIN, 5},
                          {"reduce", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_SUM, 12},
                          {"barrier", INC_COLL_BARRIER, INC_DTYPE_INT32, INC_OP_SUM, 0},
                          {"fp32 sum certified", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 41, 0x0a07},
                          {"fp64 sum certified", INC_COLL_REDUCE, INC_DTYPE_FP64, INC_OP_SUM, 19, 0x2c31}};
    for (const Kind& k : kinds) {
      uint32_t esz = inc_dtype_size(k.dtype);
      Exchange x;
      for (uint16_t r = 0; r < 4; r++) {
        IncHeader h = Header(1, r, r, k.coll, k.dtype, k.op, k.count);
        h.root_rank = 2;
        h.aux = k.aux;
        if (k.dtype == INC_DTYPE_FP32 && k.op == INC_OP_SUM) h.exponent = -9;
        x.push_back(s.size());
        s.push_back(FromPeer(std::string("t1 ") + k.name, t1.children[r], h, Payload(k.count * esz, r)));
      }
      exchanges_.push_back(x);
    }
    // Broadcast: readies, the root's data, a retransmission.
    Exchange bcast;
    for (uint16_t r = 0; r < 4; r++) {
      IncHeader h = Header(1, r, 5, INC_COLL_BROADCAST, INC_DTYPE_INT32, INC_OP_SUM, r == 1 ? 64 : 0);
      h.root_rank = 1;
      bcast.push_back(s.size());
      s.push_back(FromPeer("t1 broadcast", t1.children[r], h, Payload(r == 1 ? 256 : 0, 9)));
    }
    exchanges_.push_back(bcast);
    IncHeader rt = Header(1, 2, 3, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 16);
    rt.flags = INC_FLAG_RETRANSMIT;
    // The int32 sum, then a retransmission after the completion: a resend.
    exchanges_.push_back({exchanges_[0][0], exchanges_[0][1], exchanges_[0][2], exchanges_[0][3], s.size()});
    s.push_back(FromPeer("t1 retransmission", t1.children[2], rt, Payload(64, 2)));
    // Leaf: members, the parent's RESULT and PULL.
    Exchange leaf;
    for (uint16_t r = 0; r < 2; r++) {
      leaf.push_back(s.size());
      s.push_back(FromPeer("t2 member", t2.children[r],
                           Header(2, r, 1, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 24),
                           Payload(96, r)));
    }
    IncHeader res = Header(2, INC_RANK_RESULT, 1, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 24);
    res.flags = INC_FLAG_RESULT;
    leaf.push_back(s.size());
    s.push_back(FromPeer("t2 parent result", t2.parent, res, Payload(96, 7)));
    IncHeader pull = Header(2, INC_RANK_RESULT, 1, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 0);
    pull.flags = INC_FLAG_PULL;
    leaf.push_back(s.size());  // after the result: answered with it
    s.push_back(FromPeer("t2 parent pull", t2.parent, pull, {}));
    exchanges_.push_back(leaf);
    // Root: the child switch's partial and pull answer, the direct member.
    size_t partial = s.size();
    s.push_back(FromPeer("t3 child switch partial", t3.children[0],
                         Header(3, 0, 2, INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 20),
                         Payload(160, 3)));
    s.push_back(FromPeer("t3 member", t3.children[1],
                         Header(3, 1, 2, INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 20),
                         Payload(160, 4)));
    IncHeader answer = Header(3, 0, 2, INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 20);
    answer.flags = INC_FLAG_RESULT;
    s.push_back(FromPeer("t3 pull answer", t3.children[0], answer, Payload(160, 5)));
    exchanges_.push_back({partial, partial + 1});      // completes at the root
    exchanges_.push_back({partial + 1, partial + 2});  // adopted from the child switch
    IncHeader again = Header(3, 0, 2, INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 20);
    again.flags = INC_FLAG_RETRANSMIT;
    s.push_back(FromPeer("t3 child switch retransmission", t3.children[0], again, Payload(160, 3)));
    exchanges_.push_back({partial, partial + 1, s.size() - 1});  // counted: becomes a pull
    // Root, certified FP32 sum: the child switch's partial with its
    // certificate trailer, and the direct member (certifies nothing).
    IncHeader cp = Header(3, 0, 4, INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 30);
    cp.aux = 0x0311 | INC_AUX_TRAILER;
    size_t cert_partial = s.size();
    s.push_back(FromPeer("t3 child switch partial with trailer", t3.children[0], cp,
                         Payload(120 + INC_CERT_TRAILER_BYTES, 6)));
    IncHeader cm = Header(3, 1, 4, INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 30);
    cm.aux = 0x0311;
    s.push_back(FromPeer("t3 member certified", t3.children[1], cm, Payload(120, 8)));
    exchanges_.push_back({cert_partial, cert_partial + 1});
    // Not INC: ARN, RSVP, transit RoCE, DNS, ARP.
    const Peer& p0 = t1.children[0];
    arn::Message am;
    am.origin = 7;
    am.peer = 8;
    am.seq = 3;
    s.push_back(IpFrame("arn", p0, 17, Udp(INC_ARN_PORT, INC_ARN_PORT, arn::Encode(am, arn::AuthKey{})),
                        p0.switch_ip));
    credit::Message rsvp;
    rsvp.flow.src_ip = p0.peer_ip.be();
    rsvp.flow.dst_ip = Ipv4{0x0A630101u}.be();
    s.push_back(IpFrame("rsvp", p0, 46, credit::Encode(rsvp, 1, SipKey{}, 1), p0.switch_ip));
    Frame transit =
        FromPeer("transit roce", p0, Header(1, 0, 0, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 8),
                 Payload(32, 1));
    Ipv4 far{0x0A630101u};  // 10.99.1.1, behind the route
    uint32_t far_be = far.be();
    std::memcpy(&transit.bytes[INC_OFF_IP + 16], &far_be, 4);
    FixLengths(transit.bytes);
    s.push_back(transit);
    s.push_back(IpFrame("dns", p0, 17, Udp(5353, 53, Payload(40, 1)), far));
    Frame arp{"arp", std::vector<uint8_t>(60, 0), p0.ifindex};
    arp.bytes[12] = 0x08;
    arp.bytes[13] = 0x06;
    s.push_back(arp);
    return s;
  }

  // The slot copy a frame addresses, if its tree is configured and its slot
  // in range (index into the slot map), else -1.
  int AddressedCopy(const std::vector<uint8_t>& f) const {
    if (f.size() < INC_OFF_PAYLOAD) return -1;
    uint16_t tree = static_cast<uint16_t>(f[INC_OFF_INC + 4] << 8 | f[INC_OFF_INC + 5]);
    auto it = trees_.find(tree);
    if (it == trees_.end()) return -1;
    uint32_t msg = static_cast<uint32_t>(GetBe(f, {INC_OFF_INC + 8, 4}));
    uint32_t slot = static_cast<uint32_t>(GetBe(f, {INC_OFF_INC + 12, 2}));
    const TreeSpec& t = it->second.spec;
    if (slot >= t.pool_size) return -1;
    return static_cast<int>((t.slot_base + slot) * INC_SLOT_COPIES + ((msg / t.pool_size) & 1));
  }

  std::unique_ptr<Datapath> dp_;
  int ncpu_ = 0;
  std::map<uint16_t, Tree> trees_;
  std::vector<Exchange> exchanges_;  // filled by Seeds()
};

struct Tally {
  uint64_t frames = 0, crashes = 0, violations = 0;
  std::map<uint32_t, uint64_t> verdicts;
  std::vector<std::string> first;  // the first few violations, for the log
  void Violation(const std::string& what) {
    violations++;
    if (first.size() < 10) first.push_back(what);
  }
};

const char* VerdictName(uint32_t v) {
  switch (v) {
    case XDP_ABORTED: return "aborted";
    case XDP_DROP: return "drop";
    case XDP_PASS: return "pass";
    case XDP_TX: return "tx";
    case XDP_REDIRECT: return "redirect";
    default: return "other";
  }
}

std::string Hex(const std::vector<uint8_t>& v, size_t max = 128) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < v.size() && i < max; i++) {
    std::snprintf(b, sizeof(b), "%02x", v[i]);
    s += b;
  }
  return s;
}

TEST_F(XdpFuzz, MutatedFramesNeverCrashNorChangeSlotsTheyAreDroppedForAndCountersAddUp) {
  ConfigureTrees();
  if (HasFatalFailure()) return;
  const uint64_t seed = EnvU64(
      "INC_FUZZ_SEED", static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  const uint64_t frame_limit = EnvU64("INC_FUZZ_FRAMES", 0);
  const uint64_t seconds = EnvU64("INC_FUZZ_SECONDS", 45);
  std::printf("fuzz.xdp_frames: seed %llu (INC_FUZZ_SEED=%llu reproduces), %s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              frame_limit ? ("limit " + std::to_string(frame_limit) + " frames").c_str()
                          : ("limit " + std::to_string(seconds) + " s").c_str());
  std::fflush(stdout);

  std::vector<Frame> seeds = Seeds();
  if (HasFatalFailure()) return;
  std::vector<uint32_t> ports;
  for (int i = 0; i < kPorts; i++) ports.push_back(if_nametoindex(PortName(i).c_str()));
  Mutator mutator(seed, seeds, exchanges_, ports);

  const int prog = dp_->ingress_prog_fd();
  const int slots_fd = dp_->map_fd(Datapath::MapId::kSlots);
  const int stats_fd = dp_->map_fd(Datapath::MapId::kStats);
  const int drops_fd = dp_->map_fd(Datapath::MapId::kDrops);
  ASSERT_GE(slots_fd, 0);
  ASSERT_GE(stats_fd, 0);
  ASSERT_GE(drops_fd, 0);
  const uint32_t copies = kSlotCapacity * INC_SLOT_COPIES;

  std::vector<inc_slot> mirror = ReadAllSlots(slots_fd, copies);
  PerCpuCounters stats_map(stats_fd, INC_STAT__MAX, ncpu_), drops_map(drops_fd, INC_DROP__MAX, ncpu_);
  std::vector<uint64_t> stats = stats_map.Read(), drops = drops_map.Read();

  Tally tally;
  std::vector<uint8_t> out(8192);
  inc_slot before{}, after{};
  const auto start = std::chrono::steady_clock::now();
  auto done = [&] {
    if (frame_limit) return tally.frames >= frame_limit;
    return std::chrono::steady_clock::now() - start >= std::chrono::seconds(seconds);
  };
  uint64_t batch_frames = 0, batches = 0;
  while (!done()) {
    Frame f = mutator.Next();
    int copy = AddressedCopy(f.bytes);
    if (copy >= 0 && static_cast<uint32_t>(copy) < copies) {
      uint32_t k = static_cast<uint32_t>(copy);
      bpf_map_lookup_elem(slots_fd, &k, &before);
    } else {
      copy = -1;
    }
    xdp_md ctx{};
    ctx.data_end = static_cast<uint32_t>(f.bytes.size());
    ctx.ingress_ifindex = f.ingress;
    LIBBPF_OPTS(bpf_test_run_opts, opts);
    opts.data_in = f.bytes.data();
    opts.data_size_in = static_cast<uint32_t>(f.bytes.size());
    opts.data_out = out.data();
    opts.data_size_out = static_cast<uint32_t>(out.size());
    opts.repeat = 1;
    if (f.ingress) {
      opts.ctx_in = &ctx;
      opts.ctx_size_in = sizeof(ctx);
    }
    tally.frames++;
    batch_frames++;
    if (bpf_prog_test_run_opts(prog, &opts) != 0) {
      tally.crashes++;
      tally.Violation("test_run failed (" + std::string(std::strerror(errno)) + ") on " + f.name + " " +
                      Hex(f.bytes));
      stats = stats_map.Read();
      drops = drops_map.Read();
      continue;
    }
    const uint32_t v = opts.retval;
    tally.verdicts[v]++;
    std::vector<uint64_t> s_now = stats_map.Read(), d_now = drops_map.Read();
    auto delta = [&](uint32_t k) { return s_now[k] - stats[k]; };
    uint64_t reasons = 0;
    bool emit_failure = false;  // no_room / internal: a completion that could not be sent
    for (uint32_t r = 0; r < INC_DROP__MAX; r++) {
      reasons += d_now[r] - drops[r];
      if ((r == INC_DROP_NO_ROOM || r == INC_DROP_INTERNAL) && d_now[r] != drops[r]) emit_failure = true;
    }
    const uint64_t d_rx = delta(INC_STAT_RX_PACKETS), d_drop = delta(INC_STAT_DROPS);
    const uint64_t d_pass = delta(INC_STAT_PASS), d_inc = delta(INC_STAT_RX_INC);
    const uint64_t d_consumed = delta(INC_STAT_CONTRIB) + delta(INC_STAT_PULLS_IGNORED);
    stats = std::move(s_now);
    drops = std::move(d_now);
    auto what = [&] {
      return std::string(VerdictName(v)) + " of mutated '" + f.name + "' (" + std::to_string(f.bytes.size()) +
             " B, ingress " + std::to_string(f.ingress) + ") " + Hex(f.bytes);
    };
    if (v == XDP_ABORTED) tally.crashes++;
    if (v != XDP_DROP && v != XDP_PASS && v != XDP_TX && v != XDP_REDIRECT) {
      tally.Violation("verdict " + std::to_string(v) + ": " + what());
      continue;
    }
    if (d_rx != 1) tally.Violation("rx_packets +" + std::to_string(d_rx) + ": " + what());
    if (d_drop > 1) tally.Violation("drops +" + std::to_string(d_drop) + ": " + what());
    if (reasons != d_drop)
      tally.Violation("drop reasons +" + std::to_string(reasons) + ", drops +" + std::to_string(d_drop) +
                      ": " + what());
    if (d_pass + d_inc + (d_pass + d_inc == 0 ? d_drop : 0) != 1)
      tally.Violation("neither pass, INC nor a parse drop (pass +" + std::to_string(d_pass) + ", rx_inc +" +
                      std::to_string(d_inc) + "): " + what());
    if (d_drop == 1 && v != XDP_DROP) tally.Violation("counted drop with another verdict: " + what());
    if (v == XDP_DROP && d_drop == 0 && d_consumed == 0 && d_pass == 0)
      tally.Violation("uncounted drop: " + what());
    if (v == XDP_PASS && d_pass != 1) tally.Violation("pass not counted as pass: " + what());
    if (copy >= 0) {
      uint32_t k = static_cast<uint32_t>(copy);
      bpf_map_lookup_elem(slots_fd, &k, &after);
      // A completion whose result cannot be sent (no_room, internal) has
      // legitimately changed its slot before the drop.
      if (d_drop == 1 && !emit_failure && !SameSlot(before, after))
        tally.Violation("slot copy " + std::to_string(copy) + " changed by a dropped " + what());
      mirror[k] = after;  // the whole-map check holds every other copy
    }
    if (batch_frames == kBatch || done()) {
      std::vector<inc_slot> all = ReadAllSlots(slots_fd, copies);
      for (uint32_t i = 0; i < copies; i++) {
        if (!SameSlot(all[i], mirror[i]))
          tally.Violation("slot copy " + std::to_string(i) +
                          " changed by a frame that did not address it (batch ending at frame " +
                          std::to_string(tally.frames) + ")");
      }
      mirror = std::move(all);
      batch_frames = 0;
      // A mutated message id far ahead leaves its slot copy refusing the
      // clock's messages as stale; start the slots over now and then (what
      // a tree's re-creation does).
      if (++batches % 32 == 0) {
        inc_slot empty{};
        for (uint32_t i = 0; i < copies; i++) {
          bpf_map_update_elem(slots_fd, &i, &empty, BPF_ANY);
          mirror[i] = empty;
        }
      }
    }
  }
  uint64_t total_reasons = 0;
  for (uint32_t r = 0; r < INC_DROP__MAX; r++) total_reasons += drops[r];
  EXPECT_EQ(stats[INC_STAT_RX_PACKETS], tally.frames - tally.crashes) << "every frame run counted once";
  EXPECT_EQ(total_reasons, stats[INC_STAT_DROPS]) << "drop reasons sum to the drop total";
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "fuzz.xdp_frames: frames tried %llu in %.1f s (%.0f/s), crashes %llu, invariant violations %llu\n",
      static_cast<unsigned long long>(tally.frames), secs, tally.frames / secs,
      static_cast<unsigned long long>(tally.crashes), static_cast<unsigned long long>(tally.violations));
  std::printf("fuzz.xdp_frames: verdicts");
  for (const auto& [v, n] : tally.verdicts)
    std::printf(" %s %llu", VerdictName(v), static_cast<unsigned long long>(n));
  std::printf("\nfuzz.xdp_frames: drops by reason");
  for (uint32_t r = 1; r < INC_DROP__MAX; r++)
    if (drops[r])
      std::printf(" %s %llu", DropReasonName(static_cast<int>(r)), static_cast<unsigned long long>(drops[r]));
  uint64_t contrib = stats[INC_STAT_CONTRIB], completions = stats[INC_STAT_COMPLETIONS];
  std::printf(
      "\nfuzz.xdp_frames: contributions %llu, completions %llu, results adopted %llu, pull answers %llu\n",
      static_cast<unsigned long long>(contrib), static_cast<unsigned long long>(completions),
      static_cast<unsigned long long>(stats[INC_STAT_ADOPTED]),
      static_cast<unsigned long long>(stats[INC_STAT_PULL_ANSWERS]));
  for (const auto& w : tally.first) std::printf("  violation: %s\n", w.c_str());
  EXPECT_EQ(tally.crashes, 0u);
  EXPECT_EQ(tally.violations, 0u);
  EXPECT_GT(tally.frames, 0u);
  EXPECT_GT(completions, 0u) << "the seeds must reach aggregation and completion";
}

}  // namespace
}  // namespace inc::dp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  inc::SetLogLevel(inc::LogLevel::kWarn);
  inc::dp::g_skip = inc::dp::SetupNetns();
  int rc = RUN_ALL_TESTS();
  rmdir(inc::dp::kPinRoot.c_str());
  // ctest reads 77 as "skipped" (SKIP_RETURN_CODE in fuzz_tests.cmake).
  if (rc == 0 && !inc::dp::g_skip.empty()) return 77;
  return rc;
}
