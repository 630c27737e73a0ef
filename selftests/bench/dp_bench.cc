// dp_bench: per-packet cost of the XDP ingress program, measured in the kernel
// by BPF_PROG_TEST_RUN (opts.duration), next to a floor program that only
// adds 256 int32 from the packet into a map value (bpf/bench_floor.bpf.c).
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
// Every number is the best (lowest) of --runs runs.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
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

#include "bench/dp_harness.h"
#include "bench_floor.skel.h"
#include "common/icrc.h"
#include "common/log.h"

namespace inc::bench {
namespace {

constexpr size_t kElems = 256;  // per packet, = the floor's lanes
constexpr uint16_t kPool = 64;

struct Config {
  int runs = 5;
  uint32_t repeat = 200000;
  int messages = 64;  // per fresh run (x 63 contributions for the 64-child tree)
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

void Add(const std::string& name, const std::string& mode, double ns, size_t payload, uint32_t verdict,
         const std::string& meaning) {
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

std::vector<uint8_t> Lanes(uint8_t dtype, uint32_t seed) {
  std::vector<uint8_t> p(kElems * 4);
  for (size_t i = 0; i < kElems; i++) {
    uint32_t v = dtype == INC_DTYPE_FP32 ? (seed * 7 + static_cast<uint32_t>(i)) % 1000
                                         : seed * 2654435761u + static_cast<uint32_t>(i);
    std::memcpy(&p[4 * i], &v, 4);
  }
  return p;
}

// Best average over runs of one frame repeated `repeat` times.
double BestRepeat(int fd, const std::vector<uint8_t>& frame, const Config& cfg, uint32_t* verdict) {
  double best = 1e18;
  for (int r = 0; r < cfg.runs; r++) {
    auto res = Must(TestRun(fd, frame.data(), frame.size(), cfg.repeat, 0), "test_run");
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
      auto res =
          Must(TestRun(fd, frames[i].data(), frames[i].size(), 1, timed[i] ? 4096 : 0, live_run), "test_run");
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
};

void BenchDatapath(bool verify, const Config& cfg, const std::string& port_prefix, uint32_t* msg_base) {
  std::string tag = verify ? " +icrc" : " -icrc";
  dp::Options opts;
  opts.switch_name = "a2bench" + std::to_string(getpid()) + (verify ? "v" : "n");
  opts.slot_capacity = 1024;
  opts.verify_icrc = verify;
  auto dp = Must(dp::Datapath::Open(opts), "Datapath::Open");
  for (int i = 0; i < 4; i++) Must(dp->AttachPort(port_prefix + std::to_string(i)), "AttachPort");
  const std::string port = port_prefix + "0";
  int fd = Must(AttachedProgFd(port), "ingress program fd");

  TreeParams wide;  // 64 children: 63 contributions per message never complete
  wide.tree_id = 11;
  wide.children = 64;
  wide.pool_size = kPool;
  wide.port = port;
  dp::TreeSpec wide_spec = MakeTree(wide);
  wide_spec.slot_base = 0;
  Must(dp->ConfigureTree(wide_spec), "ConfigureTree wide");
  TreeParams four;  // 4 children: the 4th contribution completes and replicates
  four.tree_id = 12;
  four.children = 4;
  four.pool_size = kPool;
  four.port = port;
  dp::TreeSpec four_spec = MakeTree(four);
  four_spec.slot_base = kPool;
  for (int i = 0; i < 4; i++)
    four_spec.children[i].port = port_prefix + std::to_string(i);  // one child per port
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
    frame[INC_OFF_UDP + 3] = 0xb7;  // 4791 again
    frame[INC_OFF_INC + 5] = 99;    // tree 99: not configured
    Must(WriteIcrc(frame.data(), frame.size()), "ICRC");
    ns = BestRepeat(fd, frame, cfg, &verdict);
    Add("parse only: INC frame, unknown tree" + tag, "repeat", ns, 0, verdict,
        "full parse + tree lookup, drop");
  }
  for (const Case& k : {Case{"INT32", INC_DTYPE_INT32}, Case{"FP32", INC_DTYPE_FP32}}) {
    // Non-completing contributions into the 64-child tree.
    auto contrib_run = [&](int) {
      FrameSet set;
      uint32_t base = *msg_base;
      *msg_base += cfg.messages;
      for (int m = 0; m < cfg.messages; m++) {
        for (int rank = 0; rank < 63; rank++) {
          auto lanes = Lanes(k.dtype, base + m + rank);
          Contribution c;
          c.rank = rank;
          c.msg = base + m;
          c.dtype = k.dtype;
          c.exponent = k.dtype == INC_DTYPE_FP32 ? -12 : 0;
          c.payload = lanes.data();
          c.payload_len = lanes.size();
          c.count = kElems;
          set.first.push_back(Must(ContributionFrame(wide, c), "frame"));
          set.second.push_back(true);
        }
      }
      return set;
    };
    double ns = BestFresh(fd, cfg, contrib_run, XDP_DROP, &verdict);
    Add(k.label + " SUM contribution, not completing" + tag, "fresh", ns, kElems * 4, verdict,
        "validate + stage + lock + add 256 lanes (mean of ranks 0..62; rank 0 copies)");
    // Completions in the 4-child tree: ranks 0..2 untimed, rank 3 timed.
    auto completion_run = [&](int) {
      FrameSet set;
      uint32_t base = *msg_base;
      *msg_base += cfg.messages;
      for (int m = 0; m < cfg.messages; m++) {
        for (int rank = 0; rank < 4; rank++) {
          auto lanes = Lanes(k.dtype, base + m + rank);
          Contribution c;
          c.rank = rank;
          c.msg = base + m;
          c.dtype = k.dtype;
          c.exponent = k.dtype == INC_DTYPE_FP32 ? -12 : 0;
          c.payload = lanes.data();
          c.payload_len = lanes.size();
          c.count = kElems;
          set.first.push_back(Must(ContributionFrame(four, c), "frame"));
          set.second.push_back(rank == 3);
        }
      }
      return set;
    };
    ns = BestFresh(fd, cfg, completion_run, XDP_REDIRECT, &verdict);
    Add(k.label + " SUM completion, 4 children" + tag, "fresh", ns, kElems * 4, verdict,
        "last contribution + result into frame + crc32(R) + broadcast redirect (ingress only)");
    if (k.dtype == INC_DTYPE_INT32) {
      ns = BestFresh(fd, cfg, completion_run, XDP_REDIRECT, &verdict, true);
      Add(k.label + " SUM completion + 4 copies sent" + tag, "live", ns, kElems * 4, verdict,
          "as above + devmap broadcast, 4 egress rewrites (ICRC patch), 4 veth xmits");
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
  std::cerr << "dp_bench:" << tag << " counters: contrib " << stats.global["contrib"] << ", completions "
            << stats.global["completions"] << ", drops " << stats.global["drops"] << " (duplicate "
            << stats.drops["duplicate"] << ", unknown_tree " << stats.drops["unknown_tree"]
            << "), results_tx " << stats.global["results_tx"] << "\n";
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
  Add("floor: add 256 int32 into a map value", "repeat", ns, kElems * 4, verdict, "bpf/bench_floor.bpf.c");
  auto run = [&](int) {
    FrameSet set;
    for (int i = 0; i < 63 * cfg.messages; i++) {
      auto l = Lanes(INC_DTYPE_INT32, static_cast<uint32_t>(i));
      Contribution cc = c;
      cc.payload = l.data();
      set.first.push_back(Must(ContributionFrame(t, cc), "frame"));
      set.second.push_back(true);
    }
    return set;
  };
  ns = BestFresh(fd, cfg, run, XDP_DROP, &verdict);
  Add("floor: add 256 int32 into a map value", "fresh", ns, kElems * 4, verdict, "bpf/bench_floor.bpf.c");
  bench_floor::destroy(skel);
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
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: dp_bench [--runs N (5)] [--repeat R (200000)] [--messages M (64)]\n"
                   "BPF_PROG_TEST_RUN timing of the incin XDP ingress program on CPU 0 (root; runs in a\n"
                   "private network namespace). Prints ns/packet, payload Gbit/s per core and ratios.\n";
      return 0;
    } else {
      Die("unknown argument " + a + " (see --help)");
    }
  }
  if (cfg.runs < 1 || cfg.repeat < 1 || cfg.messages < 1 || cfg.messages > kPool) Die("bad arguments");
  inc::SetLogLevel(inc::LogLevel::kWarn);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Die("cannot pin to CPU 0");
  Must(EnterPrivateNetns(), "private netns");
  for (const char* prefix : {"a2bv", "a2bn"}) {
    for (int i = 0; i < 4; i++) {
      std::string port = prefix + std::to_string(i);
      Must(AddVethPair(port), "veth " + port);
      // Copies redirected into a veth are only received (and so freed at the
      // peer, not dropped at xmit) with GRO on the peer.
      if (std::system(("ethtool -K " + port + "p gro on >/dev/null 2>&1").c_str()) != 0)
        Die("ethtool -K gro on");
    }
  }

  BenchFloor(cfg);
  uint32_t msg_base = 0;
  BenchDatapath(false, cfg, "a2bn", &msg_base);
  BenchDatapath(true, cfg, "a2bv", &msg_base);

  utsname u{};
  uname(&u);
  std::printf(
      "dp_bench: %s, kernel %s, %ld CPUs; CPU 0; best of %d runs; repeat %u; fresh/live = %d frames/run\n",
      CpuModel().c_str(), u.release, sysconf(_SC_NPROCESSORS_ONLN), cfg.runs, cfg.repeat, cfg.messages * 63);
  std::printf("%-52s %-6s %9s %10s %-12s %s\n", "case", "mode", "ns/pkt", "Gbit/s", "verdict",
              "what is timed");
  for (const auto& r : g_rows) {
    std::string gbps = r.payload ? std::to_string(r.payload * 8.0 / r.ns).substr(0, 6) : "-";
    std::printf("%-52s %-6s %9.1f %10s %-12s %s\n", r.name.c_str(), r.mode.c_str(), r.ns, gbps.c_str(),
                r.verdict.c_str(), r.meaning.c_str());
  }
  const Row* floor = Find("floor: add 256 int32 into a map value", "fresh");
  const Row* off = Find("INT32 SUM contribution, not completing -icrc", "fresh");
  const Row* on = Find("INT32 SUM contribution, not completing +icrc", "fresh");
  const Row* parse = Find("parse only: INC frame, unknown tree -icrc", "repeat");
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
  return 0;
}
