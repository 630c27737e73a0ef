// SPDX-License-Identifier: Apache-2.0
// dp_bench: per-packet cost of the XDP ingress program, measured in the kernel
// by BPF_PROG_TEST_RUN (opts.duration), next to a floor program that only
// adds 256 int32 from the packet into a map value (bpf/bench/bench_floor.bpf.c).
//
// Two ways of timing, because test_run with repeat re-runs the SAME frame and
// a repeated contribution is a duplicate after its first run:
//   repeat  one call, repeat R: the average of R runs of one frame. Right for
//           stateless paths (floor, non-INC, unknown tree) and for the
//           duplicate-drop path.
//   fresh   one call per frame (repeat 1), every frame a new contribution
//           (new rank/message), the kernel's per-call duration averaged over
//           all frames. Includes one timer read pair per packet; the floor is
//           measured the same way so the ratio compares like with like.
// INT32 contributions and completions also run with the largest payload
// (768 elements, rows marked [3 KiB]); the pieces of bpf/bench/bench_parts.bpf.c
// that scale with the payload run at 1 and 3 KiB and print their cost per byte.
// Every number is the best (lowest) of --runs rounds; each round measures
// every case once (interleaved, so load from other processes hits all alike).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench_floor.skel.h"
#include "bench_parts.skel.h"
#include "common/icrc.h"
#include "common/log.h"
#include "dp_harness.h"

namespace inc::bench {
namespace {

constexpr size_t kElems = 256;                             // per packet, = the floor's lanes
constexpr size_t kLargeElems = INC_MAX_PAYLOAD_BYTES / 4;  // the largest frame's
constexpr int kPorts = 16;                                 // switch ports per data path (one child per port)
constexpr int kWideChildren = kPorts;  // the non-completing tree: 15 contributions per message
constexpr uint16_t kWidePool = 256;
constexpr uint16_t kFourPool = 64;

struct Config {
  int runs = 7;
  uint32_t repeat = 200000;
  int messages = 256;  // per fresh run (x 15 contributions into the 16-child tree)
  bool parts_only = false;
};

struct Row {
  std::string name;
  std::string mode;
  double ns = 0;
  size_t payload = 0;
  std::string verdict;
  std::string meaning;
};

std::vector<Row> g_rows;

// Keeps the best (lowest) value of a row over the rounds.
void Add(const std::string& name, const std::string& mode, double ns, size_t payload, uint32_t verdict,
         const std::string& meaning) {
  for (auto& r : g_rows) {
    if (r.name == name && r.mode == mode) {
      r.ns = std::min(r.ns, ns);
      return;
    }
  }
  g_rows.push_back({name, mode, ns, payload, XdpActionName(verdict), meaning});
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "dp_bench: " << what << "\n";
  std::exit(1);
}

template <typename T>
T Must(Expected<T> v, const std::string& what) {
  if (!v.ok()) Die(what + ": " + v.status().ToString());
  return std::move(*v);
}

void Must(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

std::vector<uint8_t> Lanes(uint8_t dtype, uint32_t seed, size_t elems = kElems) {
  std::vector<uint8_t> p(elems * 4);
  for (size_t i = 0; i < elems; i++) {
    uint32_t v = dtype == INC_DTYPE_FP32 ? (seed * 7 + static_cast<uint32_t>(i)) % 1000
                                         : seed * 2654435761u + static_cast<uint32_t>(i);
    std::memcpy(&p[4 * i], &v, 4);
  }
  return p;
}

// Ifindex of each child rank's port in the data path under test: the data
// path takes a child's frames only from the child's port.
std::vector<uint32_t> g_child_ports;

// The port a frame arrives on: that of the rank in its INC header.
uint32_t ChildPortOf(const std::vector<uint8_t>& frame) {
  if (frame.size() < INC_OFF_INC + 8) return 0;
  size_t rank = (size_t{frame[INC_OFF_INC + 6]} << 8) | frame[INC_OFF_INC + 7];
  return rank < g_child_ports.size() ? g_child_ports[rank] : 0;
}

// Best average over runs of one frame repeated `repeat` times.
double BestRepeat(int fd, const std::vector<uint8_t>& frame, const Config& cfg, uint32_t* verdict) {
  double best = 1e18;
  for (int r = 0; r < cfg.runs; r++) {
    auto res =
        Must(TestRun(fd, frame.data(), frame.size(), cfg.repeat, 0, false, ChildPortOf(frame)), "test_run");
    *verdict = res.retval;
    best = std::min(best, double(res.duration_ns));
  }
  return best;
}

// Fresh mode: `make_run(run)` returns the run's frames in send order and the
// indices of the frames to time; returns the best mean over runs.
using FrameSet = std::pair<std::vector<std::vector<uint8_t>>, std::vector<bool>>;
double BestFresh(int fd, const Config& cfg, const std::function<FrameSet(int)>& make_run, uint32_t expect,
                 uint32_t* verdict, bool live = false) {
  double best = 1e18;
  for (int r = 0; r < cfg.runs; r++) {
    auto [frames, timed] = make_run(r);
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < frames.size(); i++) {
      bool live_run = live && timed[i];
      auto res = Must(TestRun(fd, frames[i].data(), frames[i].size(), 1, timed[i] ? 4096 : 0, live_run,
                              ChildPortOf(frames[i])),
                      "test_run");
      if (!timed[i]) continue;
      if (live_run) {
        res.retval = expect;  // live runs report no verdict; the counters are checked instead
      } else if (res.retval != expect)
        Die("frame " + std::to_string(i) + " of run " + std::to_string(r) + ": verdict " +
            XdpActionName(res.retval) + ", expected " + XdpActionName(expect) +
            " (is the data path dropping it? see drop counters)");
      *verdict = res.retval;
      sum += res.duration_ns;
      n++;
    }
    best = std::min(best, double(sum) / double(n));
  }
  return best;
}

struct Case {
  std::string label;
  uint8_t dtype;
  size_t elems = kElems;
};

void BenchDatapath(bool verify, const Config& cfg, const std::string& port_prefix, uint32_t* msg_base) {
  std::string tag = verify ? " +icrc" : " -icrc";
  dp::Options opts;
  opts.switch_name = "a2bench" + std::to_string(getpid()) + (verify ? "v" : "n");
  opts.slot_capacity = 1024;
  opts.verify_icrc = verify;
  auto dp = Must(dp::Datapath::Open(opts), "Datapath::Open");
  std::vector<std::string> ports;
  for (int i = 0; i < kPorts; i++) {
    ports.push_back(port_prefix + std::to_string(i));
    Must(dp->AttachPort(ports.back()), "AttachPort " + ports.back());
  }
  const std::string& port = ports[0];
  int fd = Must(IngressProgFd(*dp, port), "ingress program fd");
  g_child_ports.clear();
  for (const auto& p : ports) g_child_ports.push_back(if_nametoindex(p.c_str()));

  TreeParams wide;  // kWideChildren children; the last never sends, so nothing completes
  wide.tree_id = 11;
  wide.children = kWideChildren;
  wide.pool_size = kWidePool;
  wide.ports = ports;
  dp::TreeSpec wide_spec = MakeTree(wide);
  wide_spec.slot_base = 0;
  Must(dp->ConfigureTree(wide_spec), "ConfigureTree wide");
  TreeParams four;  // 4 children: the 4th contribution completes and replicates
  four.tree_id = 12;
  four.children = 4;
  four.pool_size = kFourPool;
  four.ports = ports;
  dp::TreeSpec four_spec = MakeTree(four);
  four_spec.slot_base = kWidePool;
  Must(dp->ConfigureTree(four_spec), "ConfigureTree four");

  uint32_t verdict = 0;
  auto int_lanes = Lanes(INC_DTYPE_INT32, 1);
  // Parse only: an ordinary UDP frame of the same size (not port 4791).
  {
    Contribution c;
    c.payload = int_lanes.data();
    c.payload_len = int_lanes.size();
    c.count = kElems;
    auto frame = Must(ContributionFrame(wide, c), "frame");
    frame[INC_OFF_UDP + 2] = 0x00;
    frame[INC_OFF_UDP + 3] = 0x35;  // port 53
    double ns = BestRepeat(fd, frame, cfg, &verdict);
    Add("parse only: UDP/53 frame (not INC)" + tag, "repeat", ns, 0, verdict, "parse up to UDP, XDP_PASS");
    frame[INC_OFF_UDP + 2] = 0x12;
    frame[INC_OFF_UDP + 3] = 0xb7;  // 4791 again
    frame[INC_OFF_INC + 5] = 99;    // tree 99: not configured
    Must(WriteIcrc(frame.data(), frame.size()), "ICRC");
    ns = BestRepeat(fd, frame, cfg, &verdict);
    Add("parse only: INC frame, unknown tree" + tag, "repeat", ns, 0, verdict,
        "full parse + tree lookup, drop");
  }
  for (const Case& k : {Case{"INT32", INC_DTYPE_INT32}, Case{"FP32", INC_DTYPE_FP32},
                        Case{"INT32", INC_DTYPE_INT32, kLargeElems}}) {
    // The 1 KiB rows keep their names; 3 KiB rows say so. Live runs at 1 KiB.
    std::string size = k.elems == kElems ? "" : " [3 KiB]";
    bool live = k.dtype == INC_DTYPE_INT32 && k.elems == kElems;
    // Non-completing contributions into the 64-child tree.
    auto contrib_run = [&](int) {
      FrameSet set;
      uint32_t base = *msg_base;
      *msg_base += cfg.messages;
      for (int m = 0; m < cfg.messages; m++) {
        for (int rank = 0; rank < kWideChildren - 1; rank++) {
          auto lanes = Lanes(k.dtype, base + m + rank, k.elems);
          Contribution c;
          c.rank = rank;
          c.msg = base + m;
          c.dtype = k.dtype;
          c.exponent = k.dtype == INC_DTYPE_FP32 ? -12 : 0;
          c.payload = lanes.data();
          c.payload_len = lanes.size();
          c.count = k.elems;
          set.first.push_back(Must(ContributionFrame(wide, c), "frame"));
          set.second.push_back(true);
        }
      }
      return set;
    };
    double ns = BestFresh(fd, cfg, contrib_run, XDP_DROP, &verdict);
    Add(k.label + " SUM contribution, not completing" + size + tag, "fresh", ns, k.elems * 4, verdict,
        "validate + stage + lock + add " + std::to_string(k.elems) +
            " lanes (mean of ranks 0..14; rank 0 copies)");
    if (live) {
      ns = BestFresh(fd, cfg, contrib_run, XDP_DROP, &verdict, true);
      Add(k.label + " SUM contribution, not completing" + tag, "live", ns, kElems * 4, verdict,
          "as above + live-frame page pool set-up (baseline for the live completion)");
    }
    // Completions in the 4-child tree: ranks 0..2 untimed, rank 3 timed.
    auto completion_run = [&](int) {
      FrameSet set;
      uint32_t base = *msg_base;
      *msg_base += cfg.messages;
      for (int m = 0; m < cfg.messages; m++) {
        for (int rank = 0; rank < 4; rank++) {
          auto lanes = Lanes(k.dtype, base + m + rank, k.elems);
          Contribution c;
          c.rank = rank;
          c.msg = base + m;
          c.dtype = k.dtype;
          c.exponent = k.dtype == INC_DTYPE_FP32 ? -12 : 0;
          c.payload = lanes.data();
          c.payload_len = lanes.size();
          c.count = k.elems;
          set.first.push_back(Must(ContributionFrame(four, c), "frame"));
          set.second.push_back(rank == 3);
        }
      }
      return set;
    };
    ns = BestFresh(fd, cfg, completion_run, XDP_REDIRECT, &verdict);
    Add(k.label + " SUM completion, 4 children" + size + tag, "fresh", ns, k.elems * 4, verdict,
        "last contribution + result into frame + crc32(R) + broadcast redirect (ingress only)");
    if (live) {
      ns = BestFresh(fd, cfg, completion_run, XDP_REDIRECT, &verdict, true);
      Add(k.label + " SUM completion + 4 copies sent" + tag, "live", ns, kElems * 4, verdict,
          "as above + devmap broadcast, 4 egress rewrites (ICRC patch), 4 veth xmits, peer XDP drop");
    }
  }
  // Duplicate: the same contribution again and again (after the first run).
  {
    Contribution c;
    c.rank = 5;
    c.msg = (*msg_base)++;
    c.payload = int_lanes.data();
    c.payload_len = int_lanes.size();
    c.count = kElems;
    auto frame = Must(ContributionFrame(wide, c), "frame");
    double ns = BestRepeat(fd, frame, cfg, &verdict);
    Add("INT32 duplicate contribution" + tag, "repeat", ns, kElems * 4, verdict,
        "validate + stage + lock, bit already set: drop");
  }
  auto stats = Must(dp->ReadStats(), "ReadStats");
  std::cerr << "dp_bench:" << tag << " counters:";
  for (const auto& [name, value] : stats.global) std::cerr << " " << name << "=" << value;
  std::cerr << "; drops:";
  for (const auto& [name, value] : stats.drops)
    if (value) std::cerr << " " << name << "=" << value;
  std::cerr << "\n";
  Must(dp->Destroy(), "Destroy");
}

void BenchFloor(const Config& cfg) {
  bench_floor* skel = bench_floor::open_and_load();
  if (!skel) Die("loading bench_floor.bpf.o failed");
  int fd = bpf_program__fd(skel->progs.bench_floor);
  TreeParams t;
  auto lanes = Lanes(INC_DTYPE_INT32, 3);
  Contribution c;
  c.payload = lanes.data();
  c.payload_len = lanes.size();
  c.count = kElems;
  auto frame = Must(ContributionFrame(t, c), "frame");
  uint32_t verdict = 0;
  double ns = BestRepeat(fd, frame, cfg, &verdict);
  Add("floor: add 256 int32 into a map value", "repeat", ns, kElems * 4, verdict,
      "bpf/bench/bench_floor.bpf.c");
  auto run = [&](int) {
    FrameSet set;
    for (int i = 0; i < (kWideChildren - 1) * cfg.messages; i++) {
      auto l = Lanes(INC_DTYPE_INT32, static_cast<uint32_t>(i));
      Contribution cc = c;
      cc.payload = l.data();
      set.first.push_back(Must(ContributionFrame(t, cc), "frame"));
      set.second.push_back(true);
    }
    return set;
  };
  ns = BestFresh(fd, cfg, run, XDP_DROP, &verdict);
  Add("floor: add 256 int32 into a map value", "fresh", ns, kElems * 4, verdict,
      "bpf/bench/bench_floor.bpf.c");
  bench_floor::destroy(skel);
}

// Pieces of the contribution path, each timed alone (bpf/bench/bench_parts.bpf.c).
// Parts marked `sized` run on a 256- and a 768-element frame (1 and 3 KiB of
// payload); the difference of the two gives their cost per byte.

std::string SizeTag(size_t payload) {
  return payload == kElems * 4 ? " [1 KiB]" : " [3 KiB]";
}

void BenchParts(const Config& cfg) {
  bench_parts* skel = bench_parts::open();
  if (!skel) Die("opening bench_parts.bpf.o failed");
  // CRC tables as the data path's loader fills them, so the CRC parts'
  // results can be checked.
  for (uint32_t i = 0; i < 256; i++) {
    uint8_t bytes[16] = {static_cast<uint8_t>(i)};
    for (int k = 0; k < 8; k++) skel->rodata->inc_crc_tbl[k][i] = Crc32Le(0, bytes, k + 1);
    for (int k = 0; k < 16; k++) skel->rodata->bench_crc_tbl16[k][i] = Crc32Le(0, bytes, k + 1);
  }
  if (bench_parts::load(skel) != 0) Die("loading bench_parts.bpf.o failed");
  for (uint32_t i = 0; i < INC_XPOW_ENTRIES; i++) {
    uint32_t v = Crc32XPow8n(4 * size_t{i});
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.xpow), &i, &v, 0) != 0) Die("filling bench_parts xpow");
  }
  uint32_t switch_ip = SwitchIp().be(), users = 1;  // bench frames are addressed to it
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.local_ips), &switch_ip, &users, 0) != 0)
    Die("filling bench_parts local_ips");
  TreeParams t;
  auto lanes = Lanes(INC_DTYPE_INT32, 5);
  std::vector<uint8_t> large_lanes;
  for (uint32_t seed = 5; large_lanes.size() < kLargeElems * 4; seed++) {
    auto more = Lanes(INC_DTYPE_INT32, seed);
    large_lanes.insert(large_lanes.end(), more.begin(), more.end());
  }
  large_lanes.resize(kLargeElems * 4);
  Contribution c;
  c.payload = lanes.data();
  c.payload_len = lanes.size();
  c.count = kElems;
  auto frame = Must(ContributionFrame(t, c), "frame");
  Contribution large = c;
  large.payload = large_lanes.data();
  large.payload_len = large_lanes.size();
  large.count = kLargeElems;
  auto large_frame = Must(ContributionFrame(t, large), "frame");
  struct Part {
    bpf_program* prog;
    const char* name;
    const char* what;
    bool sized = false;
    bool crc = false;  // result in bench_out, checked against Crc32Le(0, payload)
  };
  const Part parts[] = {
      {skel->progs.bench_parse, "part: inc_parse", "Ethernet..INC header checks incl. IPv4 checksum"},
      {skel->progs.bench_stage, "part: inc_parse + stage payload", "+ bpf_xdp_load_bytes into scratch", true},
      {skel->progs.bench_combine, "part: INT32 SUM lane loop", "inc_combine over the frame's lanes, no lock",
       true},
      {skel->progs.bench_max32, "part: FP32 MAX lane loop", "inc_combine, order-preserving key, no lock",
       true},
      {skel->progs.bench_sum64, "part: INT64 SUM lane loop", "inc_combine, wrap counts, no lock", true},
      {skel->progs.bench_max64, "part: INT64 MAX lane loop", "inc_combine, no lock", true},
      {skel->progs.bench_finish32, "part: INT32 SUM narrowing at completion",
       "inc_finish_sum: int64 lanes to int32 + OVERFLOW test", true},
      {skel->progs.bench_fsum32, "part: FP32 SUM lane loop",
       "inc_combine, int32 fixed point in place, no lock", true},
      {skel->progs.bench_fsum32_cert, "part: FP32 SUM lane loop, certificate",
       "as above + u32 abs sums (threshold code set), no lock", true},
      {skel->progs.bench_fsum64_cert, "part: FP64 SUM lane loop, certificate",
       "inc_combine, int64 fixed point in place + u64 abs sums, no lock", true},
      {skel->progs.bench_cert_check32, "part: FP32 certificate at completion",
       "inc_cert_check_sums: every abs sum against the threshold", true},
      {skel->progs.bench_sum32_pkt, "candidate: SUM lanes x8 from the packet",
       "no staging: 8 lanes per packet bounds check, tail lane by lane, no lock", true},
      {skel->progs.bench_sum32_x4_keep, "candidate: SUM lanes x4, 64-bit loads",
       "4 lanes per bound check, 2 lanes per load, opaque first-contribution mask", true},
      {skel->progs.bench_sum32_x4_add, "candidate: SUM lanes x4, 64-bit loads, no mask",
       "as above, the mask a constant that folds away (a first-contribution loop of its own)", true},
      {skel->progs.bench_combine_swar, "candidate: SWAR INT32 SUM lane loop",
       "2 lanes per u64, same overflow flag, from scratch, no lock"},
      {skel->progs.bench_combine_swar_direct_locked, "candidate: SWAR loop from packet, locked",
       "no staging copy; lock + 128 u64 words read from the packet"},
      {skel->progs.bench_combine_unroll8, "candidate: lane loop unrolled by 8",
       "one bound check per 8 lanes, same overflow flag, no lock", true},
      {skel->progs.bench_lock, "part: slot lock + unlock", "bpf_spin_lock, uncontended"},
      {skel->progs.bench_counters, "part: counters of a contribution",
       "3 global + tree + member per-CPU counters"},
      {skel->progs.bench_crc, "part: crc32 of the payload",
       "inc_crc_scratch over scratch (the data path's, Chorba fold)", true, true},
      {skel->progs.bench_crc_slice8_loop, "candidate: crc32 slice-by-8",
       "one 8-byte table step per iteration", true, true},
      {skel->progs.bench_crc_slice8_u64_loop, "candidate: crc32 slice-by-8, 64-bit indices",
       "index = (w >> (8k-2)) & 0x3fc on the whole word", true, true},
      {skel->progs.bench_crc_2way_loop, "candidate: crc32 slice-by-8, 2 streams",
       "two halves interleaved, combined by one GF(2) multiply", true, true},
      {skel->progs.bench_crc_4way_loop, "candidate: crc32 slice-by-8, 4 streams",
       "four quarters interleaved, three GF(2) multiplies", true, true},
      {skel->progs.bench_crc_slice16_loop, "candidate: crc32 slice-by-16", "16 tables, 16 bytes per step",
       true, true},
      {skel->progs.bench_crc_chorba1_loop, "candidate: crc32 Chorba, 1 word per iteration",
       "table-free fold of all but the last 5 words", true, true},
      {skel->progs.bench_crc_chorba4_loop, "candidate: crc32 Chorba, 4 words per iteration",
       "table-free fold, last 5-8 words by table", true, true},
      {skel->progs.bench_icrc, "part: ICRC verification", "inc_verify_icrc_of (84 header bytes + payload)",
       true},
      {skel->progs.bench_egress, "part: egress rewrite of one copy",
       "inc_egress (devmap program body), 1 KiB result"},
  };
  // bench_egress addresses a copy of tree 12's result to its child 0 behind
  // "port" lo (test_run's ingress device).
  inc_port_key key{};
  key.ifindex = if_nametoindex("lo");
  key.tree_id = 12;
  uint32_t rank = 0, child = inc_child_index(12, 0);
  inc_endpoint ep{};
  ep.ifindex = key.ifindex;
  ep.peer_ip = ChildIp(0).be();
  ep.switch_ip = SwitchIp().be();
  ep.peer_qpn = 0x1000;
  ep.flags = INC_EP_VALID;
  ep.member_hi = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.port_child), &key, &rank, 0) != 0 ||
      bpf_map_update_elem(bpf_map__fd(skel->maps.children), &child, &ep, 0) != 0)
    Die("filling bench_parts maps");
  TreeParams tree12;
  tree12.tree_id = 12;
  auto result = Must(ContributionFrame(tree12, c), "frame");
  int stage_fd = bpf_program__fd(skel->progs.bench_stage);
  for (const Part& part : parts) {
    for (const auto* f : {&frame, &large_frame}) {
      if (f == &large_frame && !part.sized) continue;
      const Contribution& in = f == &frame ? c : large;
      uint32_t verdict = 0;
      bool egress = part.prog == skel->progs.bench_egress;
      // Every part that reads scratch finds this frame's payload there.
      Must(TestRun(stage_fd, f->data(), f->size(), 1, 0), "stage");
      double ns = BestRepeat(bpf_program__fd(part.prog), egress ? result : *f, cfg, &verdict);
      std::string name = std::string(part.name) + (part.sized ? SizeTag(in.payload_len) : "");
      if (verdict != XDP_DROP) Die(name + ": verdict " + XdpActionName(verdict));
      if (part.crc) {
        uint32_t zero = 0, got = 0;
        if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.bench_out), &zero, &got) != 0)
          Die("reading bench_out");
        uint32_t want = Crc32Le(0, in.payload, in.payload_len);
        if (got != want) Die(name + ": crc32 " + std::to_string(got) + ", expected " + std::to_string(want));
      }
      Add(name, "repeat", ns, in.payload_len, verdict, part.what);
    }
  }
  bench_parts::destroy(skel);
}

const Row* Find(const std::string& name, const std::string& mode) {
  for (const auto& r : g_rows)
    if (r.name == name && r.mode == mode) return &r;
  return nullptr;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace
}  // namespace inc::bench

int main(int argc, char** argv) {
  using namespace inc::bench;
  Config cfg;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> long {
      if (i + 1 >= argc) Die("missing value after " + a);
      return std::strtol(argv[++i], nullptr, 0);
    };
    if (a == "--runs") {
      cfg.runs = static_cast<int>(next());
    } else if (a == "--repeat") {
      cfg.repeat = static_cast<uint32_t>(next());
    } else if (a == "--messages") {
      cfg.messages = static_cast<int>(next());
    } else if (a == "--parts") {
      cfg.parts_only = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: dp_bench [--runs N (7)] [--repeat R (200000)] [--messages M (256)] [--parts]\n"
                   "BPF_PROG_TEST_RUN timing of the incin XDP ingress program on CPU 0 (root; runs in a\n"
                   "private network namespace). Prints ns/packet, payload Gbit/s per core and ratios.\n"
                   "--parts: only the pieces of bpf/bench/bench_parts.bpf.c (no data path, no floor).\n";
      return 0;
    } else {
      Die("unknown argument " + a + " (see --help)");
    }
  }
  if (cfg.runs < 1 || cfg.repeat < 1 || cfg.messages < 1) Die("bad arguments");
  inc::SetLogLevel(inc::LogLevel::kWarn);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Die("cannot pin to CPU 0");
  Must(EnterPrivateNetns(), "private netns");
  // The far ends drop what the switch sends with an XDP program (a veth
  // accepts redirected frames only if its peer runs XDP or GRO).
  bench_floor* sink = bench_floor::open_and_load();
  if (!sink) Die("loading bench_floor.bpf.o failed");
  for (const char* prefix : {"a2bv", "a2bn"}) {
    for (int i = 0; i < kPorts; i++) {
      std::string port = prefix + std::to_string(i);
      Must(AddVethPair(port), "veth " + port);
      int peer = static_cast<int>(if_nametoindex((port + "p").c_str()));
      if (bpf_xdp_attach(peer, bpf_program__fd(sink->progs.bench_sink), XDP_FLAGS_DRV_MODE, nullptr) != 0)
        Die("attaching the sink to " + port + "p");
    }
  }

  // Rounds: every case once per round, best of the rounds. Interleaving the
  // cases spreads load from other processes over all of them alike, so the
  // ratios stay meaningful on a busy machine.
  Config once = cfg;
  once.runs = 1;
  uint32_t msg_base = 0;
  for (int round = 0; round < cfg.runs; round++) {
    if (!cfg.parts_only) BenchFloor(once);
    BenchParts(once);
    if (cfg.parts_only) continue;
    BenchDatapath(false, once, "a2bn", &msg_base);
    BenchDatapath(true, once, "a2bv", &msg_base);
  }

  utsname u{};
  uname(&u);
  std::printf(
      "dp_bench: %s, kernel %s, %ld CPUs; CPU 0; best of %d rounds; repeat %u; fresh/live = %d frames/run\n",
      CpuModel().c_str(), u.release, sysconf(_SC_NPROCESSORS_ONLN), cfg.runs, cfg.repeat,
      cfg.messages * (kWideChildren - 1));
  std::printf("%-52s %-6s %9s %10s %-12s %s\n", "case", "mode", "ns/pkt", "Gbit/s", "verdict",
              "what is timed");
  for (const auto& r : g_rows) {
    std::string gbps = r.payload ? std::to_string(r.payload * 8.0 / r.ns).substr(0, 6) : "-";
    std::printf("%-52s %-6s %9.1f %10s %-12s %s\n", r.name.c_str(), r.mode.c_str(), r.ns, gbps.c_str(),
                r.verdict.c_str(), r.meaning.c_str());
  }
  // Sized parts: cost per byte from the 1 KiB and 3 KiB rows.
  for (const auto& r : g_rows) {
    size_t at = r.name.find(" [1 KiB]");
    if (at == std::string::npos) continue;
    std::string base = r.name.substr(0, at);
    const Row* big = Find(base + " [3 KiB]", r.mode);
    if (!big) continue;
    std::printf("per byte: %-52s %.3f ns/byte (3 KiB - 1 KiB); %.3f / %.3f ns/byte of the whole part\n",
                base.c_str(), (big->ns - r.ns) / double(big->payload - r.payload), r.ns / double(r.payload),
                big->ns / double(big->payload));
  }
  const Row* floor = Find("floor: add 256 int32 into a map value", "fresh");
  const Row* off = Find("INT32 SUM contribution, not completing -icrc", "fresh");
  const Row* on = Find("INT32 SUM contribution, not completing +icrc", "fresh");
  const Row* parse = Find("parse only: INC frame, unknown tree -icrc", "repeat");
  for (const char* tag : {"-icrc", "+icrc"}) {
    std::string t = tag;
    const Row* cf = Find("INT32 SUM contribution, not completing " + t, "fresh");
    const Row* cl = Find("INT32 SUM contribution, not completing " + t, "live");
    const Row* pf = Find("INT32 SUM completion, 4 children " + t, "fresh");
    const Row* pl = Find("INT32 SUM completion + 4 copies sent " + t, "live");
    if (cf && cl && pf && pl) {
      double replication = (pl->ns - cl->ns) - (pf->ns - cf->ns);
      std::printf(
          "%s: completion incl. sending 4 copies ~ %.0f ns = ingress completion %.0f + redirect, 4 egress "
          "rewrites and 4 veth xmits %.0f (%.0f per copy; live minus live-baseline)\n",
          tag, pf->ns + replication, pf->ns, replication, replication / 4);
    }
  }
  if (floor && off && on && parse) {
    double icrc = on->ns - off->ns;
    std::printf("ratio INT32 contribution (-icrc) / floor (both fresh):      %.2fx  (target <= 1.5x)\n",
                off->ns / floor->ns);
    std::printf(
        "ICRC verify cost (+icrc - -icrc) = %.1f ns; / aggregation (-icrc contribution) = %.2fx  "
        "(target <= 2x)\n",
        icrc, icrc / off->ns);
    std::printf("ICRC verify cost / (contribution - unknown-tree parse) = %.2fx\n",
                icrc / (off->ns - parse->ns));
  }
  bench_floor::destroy(sink);
  return 0;
}
