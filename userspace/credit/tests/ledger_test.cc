// SPDX-License-Identifier: Apache-2.0
// Credit arithmetic: accounts never go negative or overflow and survive the
// 2^64 wrap; returns batch to a quantum or a flush interval; a silent next
// hop with credit outstanding fails after the heartbeat. Clock injected.
#include "credit/ledger.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace inc::credit {
namespace {

constexpr uint64_t kMs = 1000000;

TEST(CreditAccount, NothingIsAvailableBeforeTheFirstGrant) {
  CreditAccount a;
  EXPECT_EQ(a.Available(), 0u);
  EXPECT_FALSE(a.Consume(1));
  EXPECT_EQ(a.consumed_total(), 0u);
}

TEST(CreditAccount, ConsumingMoreThanAvailableIsRefusedAndTakesNothing) {
  CreditAccount a;
  a.Grant(1000, 0);
  EXPECT_TRUE(a.Consume(600));
  EXPECT_FALSE(a.Consume(401));
  EXPECT_EQ(a.consumed_total(), 600u);
  EXPECT_EQ(a.Available(), 400u);
  EXPECT_TRUE(a.Consume(400));
  EXPECT_EQ(a.Available(), 0u);
  EXPECT_FALSE(a.Consume(1));
  EXPECT_FALSE(a.Consume(UINT64_MAX));
  EXPECT_EQ(a.Outstanding(), 1000u);
}

TEST(CreditAccount, CumulativeReturnRepairsALostOne) {
  CreditAccount a;
  a.Grant(1000, 0);
  ASSERT_TRUE(a.Consume(1000));
  // RESV with freed 300 is lost; the next one says 700 in all.
  EXPECT_TRUE(a.Grant(1000, 700));
  EXPECT_EQ(a.Available(), 700u);
  EXPECT_EQ(a.Outstanding(), 300u);
  EXPECT_EQ(a.granted_total(), 1700u);
}

TEST(CreditAccount, AnOlderFreedTotalIsIgnored) {
  CreditAccount a;
  a.Grant(1000, 0);
  ASSERT_TRUE(a.Consume(800));
  EXPECT_TRUE(a.Grant(1000, 600));
  EXPECT_FALSE(a.Grant(1000, 300));
  EXPECT_EQ(a.freed_total(), 600u);
  EXPECT_EQ(a.Available(), 800u);
}

TEST(CreditAccount, CountersWrapAcross2To64) {
  CreditAccount a;
  const uint64_t start = UINT64_MAX - 100;
  a.Grant(1000, start);  // the next hop's counter is near the wrap
  EXPECT_EQ(a.Available(), 1000u);
  ASSERT_TRUE(a.Consume(1000));
  EXPECT_EQ(a.consumed_total(), start + 1000);  // wrapped to 899
  EXPECT_LT(a.consumed_total(), start);
  EXPECT_EQ(a.Available(), 0u);
  EXPECT_EQ(a.Outstanding(), 1000u);
  EXPECT_TRUE(a.Grant(1000, start + 600));  // also wrapped
  EXPECT_EQ(a.Available(), 600u);
  EXPECT_EQ(a.Outstanding(), 400u);
}

TEST(CreditAccount, AShrunkBufferReadsAsNoCreditNotAHugeOne) {
  CreditAccount a;
  a.Grant(1000, 0);
  ASSERT_TRUE(a.Consume(900));
  a.Grant(500, 0);  // the next hop now holds only 500 for us
  EXPECT_EQ(a.Available(), 0u);
  EXPECT_FALSE(a.Consume(1));
  EXPECT_EQ(a.Outstanding(), 900u);
  a.Grant(500, 600);
  EXPECT_EQ(a.Available(), 200u);
}

TEST(ReturnBatcher, SendsWhenAQuantumIsFreed) {
  ReturnBatcher b(1000, 10 * kMs, 100 * kMs);
  b.Sent(0, 96);  // the initial RESV
  b.Freed(400, 1 * kMs);
  EXPECT_FALSE(b.ShouldSend(1 * kMs));
  b.Freed(600, 1 * kMs);
  EXPECT_TRUE(b.ShouldSend(1 * kMs));
  b.Sent(1 * kMs, 96);
  EXPECT_EQ(b.pending(), 0u);
  EXPECT_EQ(b.freed_total(), 1000u);
  EXPECT_FALSE(b.ShouldSend(2 * kMs));
}

TEST(ReturnBatcher, FlushesAPartialBatchOnceTheFlowIsQuiet) {
  ReturnBatcher b(1000, 10 * kMs, 100 * kMs);
  b.Sent(0, 96);
  b.Freed(10, 0);
  EXPECT_FALSE(b.ShouldSend(9 * kMs));
  EXPECT_TRUE(b.ShouldSend(10 * kMs));
}

TEST(ReturnBatcher, ATrickleBelowTheQuantumIsReturnedWithinTheKeepalivePeriod) {
  // 10 bytes every 5 ms: never quiet for the flush interval, never a quantum.
  ReturnBatcher b(1000, 10 * kMs, 100 * kMs);
  b.Sent(0, 96);
  uint64_t now = 0;
  while (!b.ShouldSend(now)) {
    now += 5 * kMs;
    b.Freed(10, now);
  }
  EXPECT_EQ(now, 100 * kMs);
}

TEST(ReturnBatcher, KeepsAliveOnlyWhileBackPressured) {
  ReturnBatcher b(1000, 10 * kMs, 100 * kMs);
  EXPECT_FALSE(b.ShouldSend(500 * kMs, true));  // nothing before the first RESV
  b.Sent(500 * kMs, 96);
  EXPECT_FALSE(b.ShouldSend(599 * kMs, true));
  EXPECT_TRUE(b.ShouldSend(600 * kMs, true));
  // Holding nothing, an idle hop stays silent: nothing is outstanding on it.
  EXPECT_FALSE(b.ShouldSend(600 * kMs, false));
  EXPECT_FALSE(b.ShouldSend(60000 * kMs, false));
}

TEST(ReturnBatcher, FreedTotalWrapsMod2To64) {
  ReturnBatcher b(1, 1, 1);
  b.Freed(UINT64_MAX, 0);
  b.Freed(5, 0);
  EXPECT_EQ(b.freed_total(), 4u);
  EXPECT_EQ(b.pending(), 4u);  // pending wraps too; it is the wire delta
}

TEST(ReturnBatcher, OverheadOfA64KiBQuantumIsUnderOnePercent) {
  // 64 MiB of 1024-byte packets, returns batched to 64 KiB, 96-byte RESVs.
  ReturnBatcher b(64 * 1024, 10 * kMs, 100 * kMs);
  uint64_t now = 0;
  for (int i = 0; i < 64 * 1024; i++) {
    now += 1000;
    b.Freed(1024, now);
    if (b.ShouldSend(now)) b.Sent(now, 96);
  }
  EXPECT_EQ(b.messages(), 1024u);
  EXPECT_EQ(b.data_bytes(), 64ull << 20);
  EXPECT_DOUBLE_EQ(b.OverheadRatio(), 96.0 * 1024 / (64 << 20));
  EXPECT_LT(b.OverheadRatio(), 0.01);
  std::printf("credit overhead, quantum 64 KiB, 1024-byte packets: %llu RESVs, %.4f%% of data bytes\n",
              static_cast<unsigned long long>(b.messages()), 100 * b.OverheadRatio());
}

TEST(Liveness, AnIdleHopNeverFails) {
  LivenessMonitor m(100 * kMs);
  EXPECT_FALSE(m.Expired(1000000 * kMs, 0));
}

TEST(Liveness, OutstandingCreditWithoutAReturnFailsAfterTheHeartbeat) {
  LivenessMonitor m(100 * kMs);
  m.Consumed(1000 * kMs, 0);  // traffic starts after a long idle time
  EXPECT_FALSE(m.Expired(1099 * kMs, 500));
  EXPECT_TRUE(m.Expired(1100 * kMs, 500));
  m.Returned(1050 * kMs);
  EXPECT_FALSE(m.Expired(1149 * kMs, 500));
  EXPECT_TRUE(m.Expired(1150 * kMs, 500));
  // More consumption while bytes are already outstanding does not reset it.
  m.Consumed(1140 * kMs, 500);
  EXPECT_TRUE(m.Expired(1150 * kMs, 900));
}

}  // namespace
}  // namespace inc::credit
