// SPDX-License-Identifier: Apache-2.0
// selftest.stress_two_cpus: two threads pinned to CPU 0 and CPU 1 drive the
// same slots of one tree through BPF_PROG_TEST_RUN, one thread per child, and
// every completion must carry exactly the expected sums: no contribution lost
// or counted twice, no completion lost or duplicated, counters consistent.
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/icrc.h"
#include "dp_harness.h"

namespace inc::bench {
namespace {

constexpr int kChildren = 2;
constexpr uint16_t kPool = 64;  // small: the window and both slot copies cycle thousands of times

uint32_t Messages() {
  const char* env = std::getenv("INC_STRESS_MESSAGES");  // default: 1,000,000 contributions in total
  return env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 0)) : 500000;
}

// Elements of message m (both ranks send the same count; counts vary so the
// frame length and the slot count check change from message to message).
size_t CountOf(uint32_t m) {
  return 1 + (m * 2654435761u >> 7) % 96;
}

// Deterministic, full-range value of (rank, message, lane): sums wrap and
// sometimes overflow, so the OVERFLOW flag is exercised too.
int32_t ValueOf(int rank, uint32_t m, size_t lane) {
  uint64_t x = (uint64_t{m} << 20) ^ (lane << 4) ^ static_cast<uint64_t>(rank);
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  int32_t v = static_cast<int32_t>(x);
  return (m % 4 == 0) ? v : v >> 3;  // every 4th message uses the full range
}

struct Failure {
  std::mutex mu;
  std::string first;
  std::atomic<bool> any{false};
  void Set(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (!any.exchange(true)) first = what;
  }
};

struct Shared {
  uint32_t messages = 0;
  std::unique_ptr<std::atomic<uint8_t>[]> completed;  // completions seen per message
  std::atomic<uint64_t> completions{0};
  std::atomic<uint64_t> overflow_flags{0};
  std::atomic<uint64_t> completed_here[kChildren] = {};  // completions seen by each member's thread
  Failure failure;
};

void CheckCompletion(const RunResult& r, uint32_t m, Shared& sh) {
  size_t count = CountOf(m);
  size_t len = count * 4;
  const auto& f = r.out;
  if (f.size() != FrameLength(len)) {
    sh.failure.Set("message " + std::to_string(m) + ": result frame of " + std::to_string(f.size()) +
                   " bytes, want " + std::to_string(FrameLength(len)));
    return;
  }
  auto p = ParseFrame(f.data(), f.size());
  if (!p.ok()) {
    sh.failure.Set("message " + std::to_string(m) + ": result does not parse: " + p.status().ToString());
    return;
  }
  if (!(p->inc.flags & INC_FLAG_RESULT) || p->inc.rank != INC_RANK_RESULT || p->inc.msg_id != m ||
      p->inc.count != count || p->imm != m) {
    sh.failure.Set("message " + std::to_string(m) + ": result header wrong (flags " +
                   std::to_string(p->inc.flags) + ", rank " + std::to_string(p->inc.rank) + ", msg " +
                   std::to_string(p->inc.msg_id) + ", count " + std::to_string(p->inc.count) + ")");
    return;
  }
  bool overflow = false;
  for (size_t i = 0; i < count; i++) {
    int64_t wide = 0;
    uint32_t wrapped = 0;
    for (int rank = 0; rank < kChildren; rank++) {
      wide += ValueOf(rank, m, i);
      wrapped += static_cast<uint32_t>(ValueOf(rank, m, i));
    }
    overflow |= wide != static_cast<int32_t>(wrapped);
    uint32_t got;
    std::memcpy(&got, p->payload + 4 * i, 4);
    if (got != wrapped) {
      sh.failure.Set("message " + std::to_string(m) + " lane " + std::to_string(i) + ": sum " +
                     std::to_string(static_cast<int32_t>(got)) + ", want " +
                     std::to_string(static_cast<int32_t>(wrapped)));
      return;
    }
  }
  if (overflow != bool(p->inc.flags & INC_FLAG_OVERFLOW)) {
    sh.failure.Set("message " + std::to_string(m) + ": OVERFLOW flag " +
                   std::to_string(bool(p->inc.flags & INC_FLAG_OVERFLOW)) + ", want " +
                   std::to_string(overflow));
    return;
  }
  sh.overflow_flags += overflow;
  // Until the devmap egress program addresses a copy, the ICRC field carries
  // crc32_le(0, R), R = IMMDT + INC header + payload (docs/wire-format.md).
  uint32_t crc_r = Crc32Le(0, f.data() + INC_OFF_IMMDT, 4 + sizeof(inc_hdr) + len);
  if (p->icrc_wire != crc_r) {
    sh.failure.Set("message " + std::to_string(m) + ": ICRC field " + std::to_string(p->icrc_wire) +
                   " is not crc32_le(0, R) = " + std::to_string(crc_r));
  }
}

void Member(int rank, int cpu, int prog_fd, const TreeParams& tree, Shared& sh, uint64_t* runs) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    sh.failure.Set("sched_setaffinity(CPU " + std::to_string(cpu) + ") failed");
    return;
  }
  std::vector<int32_t> payload;
  for (uint32_t m = 0; m < sh.messages && !sh.failure.any; m++) {
    if (m >= kPool) {
      // Window rule: m may go only after m - S completed (whichever thread saw it).
      auto start = std::chrono::steady_clock::now();
      while (!sh.completed[m - kPool].load(std::memory_order_acquire)) {
        if (sh.failure.any) return;
        if (std::chrono::steady_clock::now() - start >
            std::chrono::seconds(60)) {  // hang guard, not a timing check
          sh.failure.Set("rank " + std::to_string(rank) + ": message " + std::to_string(m - kPool) +
                         " never completed");
          return;
        }
        sched_yield();
      }
    }
    if (sched_getcpu() != cpu) {
      sh.failure.Set("rank " + std::to_string(rank) + " left CPU " + std::to_string(cpu));
      return;
    }
    size_t count = CountOf(m);
    payload.resize(count);
    for (size_t i = 0; i < count; i++) payload[i] = ValueOf(rank, m, i);
    Contribution c;
    c.rank = rank;
    c.msg = m;
    c.payload = payload.data();
    c.payload_len = count * 4;
    c.count = count;
    auto frame = ContributionFrame(tree, c);
    if (!frame.ok()) {
      sh.failure.Set(frame.status().ToString());
      return;
    }
    auto r = TestRun(prog_fd, frame->data(), frame->size(), 1, 4096, false, IngressOf(tree, rank));
    if (!r.ok()) {
      sh.failure.Set(r.status().ToString());
      return;
    }
    ++*runs;
    if (r->retval == XDP_DROP) continue;  // aggregated, not complete (drop counters are checked at the end)
    if (r->retval != XDP_REDIRECT) {
      sh.failure.Set("rank " + std::to_string(rank) + " message " + std::to_string(m) + ": verdict " +
                     XdpActionName(r->retval));
      return;
    }
    CheckCompletion(*r, m, sh);
    if (sh.completed[m].fetch_add(1, std::memory_order_acq_rel) != 0) {
      sh.failure.Set("message " + std::to_string(m) + " completed twice");
      return;
    }
    sh.completions++;
    sh.completed_here[rank]++;
  }
}

TEST(StressTwoCpus, SameSlotsFromBothCpusLoseAndDuplicateNothing) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs, this machine has 1";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (!CPU_ISSET(0, &allowed) || !CPU_ISSET(1, &allowed))
    GTEST_SKIP() << "CPU 0 and CPU 1 are not both usable";
  Status ns = EnterPrivateNetns();
  if (!ns.ok()) GTEST_SKIP() << "no private network namespace: " << ns.ToString();
  ASSERT_TRUE(AddVethPair("a2st0").ok());
  ASSERT_TRUE(AddVethPair("a2st1").ok());

  dp::Options opts;
  opts.switch_name = "a2stress" + std::to_string(getpid());
  opts.slot_capacity = 1024;
  opts.verify_icrc = true;
  auto dp = dp::Datapath::Open(opts);
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  struct Cleanup {
    dp::Datapath* d;
    ~Cleanup() { (void)d->Destroy(); }
  } cleanup{dp->get()};
  ASSERT_TRUE((*dp)->AttachPort("a2st0").ok());
  ASSERT_TRUE((*dp)->AttachPort("a2st1").ok());
  TreeParams tree;
  tree.children = kChildren;
  tree.pool_size = kPool;
  tree.ports = {"a2st0", "a2st1"};
  Status configured = (*dp)->ConfigureTree(MakeTree(tree));
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  auto fd = IngressProgFd(**dp, "a2st0");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();

  Shared sh;
  sh.messages = Messages();
  sh.completed.reset(new std::atomic<uint8_t>[sh.messages]);
  for (uint32_t m = 0; m < sh.messages; m++) sh.completed[m] = 0;
  uint64_t runs[kChildren] = {};
  std::thread t0(Member, 0, 0, *fd, std::cref(tree), std::ref(sh), &runs[0]);
  std::thread t1(Member, 1, 1, *fd, std::cref(tree), std::ref(sh), &runs[1]);
  t0.join();
  t1.join();
  ASSERT_FALSE(sh.failure.any) << sh.failure.first;

  const uint64_t n = sh.messages;
  EXPECT_EQ(runs[0] + runs[1], 2 * n);
  EXPECT_EQ(sh.completions.load(), n);
  for (uint32_t m = 0; m < sh.messages; m++) ASSERT_EQ(sh.completed[m].load(), 1) << "message " << m;
  auto stats = (*dp)->ReadStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto stat = [&](int id) {
    auto it = stats->global.find(dp::StatName(id));
    EXPECT_NE(it, stats->global.end()) << "no counter " << dp::StatName(id);
    return it == stats->global.end() ? ~0ull : it->second;
  };
  EXPECT_EQ(stat(INC_STAT_CONTRIB), 2 * n);
  EXPECT_EQ(stat(INC_STAT_COMPLETIONS), n);
  EXPECT_EQ(stat(INC_STAT_DROPS), 0u);
  EXPECT_EQ(stat(INC_STAT_RX_INC), 2 * n);
  EXPECT_EQ(stat(INC_STAT_RETRANS_RX), 0u);
  for (const auto& [reason, value] : stats->drops) EXPECT_EQ(value, 0u) << "drop reason " << reason;
  EXPECT_EQ(stats->trees[tree.tree_id].completions, n);
  EXPECT_EQ(stats->trees[tree.tree_id].rx_packets, 2 * n);
  for (int rank = 0; rank < kChildren; rank++) {
    EXPECT_EQ((stats->members[{tree.tree_id, static_cast<uint16_t>(rank)}].rx_packets), n) << "rank " << rank;
  }
  std::cout << "[ stress   ] " << 2 * n << " contributions from CPU 0 and CPU 1 into " << kPool
            << " slots (x2 copies): " << n << " completions, every sum exact, " << sh.overflow_flags
            << " with OVERFLOW (as expected), 0 drops; completing contribution ran on CPU 0 "
            << sh.completed_here[0] << " times, on CPU 1 " << sh.completed_here[1] << " times\n";
}

// The design's promise: "Integer sums are associative, so results are bit-identical on
// every rank and on every run, whatever the arrival order." The result's
// OVERFLOW flag is part of the result. With 3 children sending +INT32_MAX, +1
// and -1, the sum fits in int32; whether a partial sum overflows depends on
// the arrival order. The flag must not: it has to describe the sum.
TEST(OverflowFlag, IndependentOfArrivalOrder) {
  Status ns = EnterPrivateNetns();
  if (!ns.ok()) GTEST_SKIP() << "no private network namespace: " << ns.ToString();
  dp::Options opts;
  opts.switch_name = "a2ovf" + std::to_string(getpid());
  opts.slot_capacity = 64;
  auto dp = dp::Datapath::Open(opts);
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  struct Cleanup {
    dp::Datapath* d;
    ~Cleanup() { (void)d->Destroy(); }
  } cleanup{dp->get()};
  TreeParams tree;
  tree.tree_id = 9;
  tree.children = 3;
  tree.pool_size = 8;
  for (int i = 0; i < 3; i++) {
    tree.ports.push_back("a2ov" + std::to_string(i));
    ASSERT_TRUE(AddVethPair(tree.ports.back()).ok());
    ASSERT_TRUE((*dp)->AttachPort(tree.ports.back()).ok());
  }
  Status configured = (*dp)->ConfigureTree(MakeTree(tree));
  ASSERT_TRUE(configured.ok()) << configured.ToString();
  auto fd = IngressProgFd(**dp, tree.ports[0]);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  const int32_t values[3] = {INT32_MAX, 1, -1};
  const int orders[2][3] = {{0, 1, 2}, {0, 2, 1}};  // partial sums: MAX, MAX+1 (wraps), MAX | MAX, MAX-1, MAX
  uint8_t flags[2] = {};
  int32_t sums[2] = {};
  for (uint32_t m = 0; m < 2; m++) {
    for (int k = 0; k < 3; k++) {
      int rank = orders[m][k];
      Contribution c;
      c.rank = rank;
      c.msg = m;
      c.payload = &values[rank];
      c.payload_len = 4;
      c.count = 1;
      auto frame = ContributionFrame(tree, c);
      ASSERT_TRUE(frame.ok());
      auto r = TestRun(*fd, frame->data(), frame->size(), 1, 4096, false, IngressOf(tree, rank));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (k < 2) {
        ASSERT_EQ(r->retval, XDP_DROP);
        continue;
      }
      ASSERT_EQ(r->retval, XDP_REDIRECT);
      auto p = ParseFrame(r->out.data(), r->out.size());
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      flags[m] = p->inc.flags;
      std::memcpy(&sums[m], p->payload, 4);
    }
  }
  EXPECT_EQ(sums[0], INT32_MAX);
  EXPECT_EQ(sums[1], INT32_MAX);
  EXPECT_EQ(flags[0] & INC_FLAG_OVERFLOW, flags[1] & INC_FLAG_OVERFLOW)
      << "the same contributions in another order give another OVERFLOW flag";
  EXPECT_EQ(flags[0] & INC_FLAG_OVERFLOW, 0) << "INT32_MAX + 1 - 1 fits in int32, yet OVERFLOW is set";
}

}  // namespace
}  // namespace inc::bench
