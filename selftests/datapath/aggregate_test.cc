// SPDX-License-Identifier: Apache-2.0
// Selftests of bpf/aggregate.h through the real ingress program: every
// collective x data type x operation against the host reference, lane tails,
// tree sizes, slot reuse over pools and message-id wrap-around.
#include "fixture.h"

namespace inc::dp {
namespace {

// ------------------------------------------- collectives x dtypes x ops --

struct CollCase {
  const char* name;
  uint8_t coll, dtype, op;
  uint16_t count;
  bool big;  // values large enough to overflow sums
};

// Test names from a table's `name` field.
template <typename Case>
std::string CaseName(const ::testing::TestParamInfo<Case>& i) {
  return i.param.name;
}

// A table-driven test that needs BPF.
template <typename Case>
class BpfTableTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  }
};

// Three children on ports 0..2 of a tree that takes the largest payload.
std::vector<Peer> ThreeKidsLargestPayload(Switch& sw, TreeParams* t) {
  t->max_elems = kMaxElems32;
  auto kids = Kids(3);
  Status st = sw.dp->ConfigureTree(MakeTree(*t, kids));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return kids;
}

using CollectiveTest = BpfTableTest<CollCase>;

TEST_P(CollectiveTest, ThreeChildrenResultMatchesHostReferenceAndEveryCopyIsByteExact) {
  const CollCase& c = GetParam();
  Switch sw(UniqueName("coll"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = ThreeKidsLargestPayload(sw, &t);
  std::vector<uint32_t> psn(kids.size(), 0);
  const uint8_t root = 1;  // member index of the Reduce/Broadcast root
  for (uint32_t msg = 0; msg < 3; msg++) {
    std::vector<std::vector<uint8_t>> in;
    for (int r = 0; r < 3; r++) {
      if (c.coll == INC_COLL_BARRIER || (c.coll == INC_COLL_BROADCAST && r != root)) {
        in.push_back({});
      } else {
        in.push_back(Payload(c.dtype, c.count, msg * 10 + r, c.big));
      }
    }
    RunMessage(sw, t, kids, msg, c.coll, c.dtype, c.op, in, root, &psn);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(sw.Stat("completions"), 3u);
  EXPECT_EQ(sw.Stat("drops"), 0u) << "no drop expected";
}

INSTANTIATE_TEST_SUITE_P(
    Datapath, CollectiveTest,
    ::testing::Values(
        CollCase{"AllReduceInt32Sum", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 240, false},
        CollCase{"AllReduceInt32SumOverflowFlag", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 64, true},
        CollCase{"AllReduceInt32Min", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_MIN, 240, true},
        CollCase{"AllReduceInt32Max", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_MAX, 240, true},
        CollCase{"AllReduceFp32FixedPointSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM, 240, false},
        CollCase{"AllReduceFp32Min", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MIN, 240, false},
        CollCase{"AllReduceFp32Max", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MAX, 240, false},
        CollCase{"AllReduceInt64Sum", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 120, false},
        // FP64: int64 block fixed point with headroom, negative lanes too.
        CollCase{"AllReduceFp64FixedPointSum", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM, 120, false},
        CollCase{"AllReduceFp64FixedPointSumMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_FP64, INC_OP_SUM,
                 kMaxElems64, false},
        CollCase{"ReduceFp64FixedPointSum", INC_COLL_REDUCE, INC_DTYPE_FP64, INC_OP_SUM, 101, false},
        CollCase{"BroadcastFp64", INC_COLL_BROADCAST, INC_DTYPE_FP64, INC_OP_SUM, 33, false},
        CollCase{"AllReduceInt64SumOverflowFlag", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, 32, true},
        CollCase{"AllReduceInt64Min", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_MIN, 120, true},
        CollCase{"AllReduceInt64Max", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_MAX, 120, true},
        CollCase{"AllReduceIbMtu2048Payload506", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 506, false},
        CollCase{"AllReduceInt32SumMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, kMaxElems32,
                 false},
        CollCase{"AllReduceInt32SumOverflowFlagMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
                 kMaxElems32, true},
        CollCase{"AllReduceInt32MinMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_MIN, kMaxElems32,
                 true},
        CollCase{"AllReduceInt32MaxMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_MAX, kMaxElems32,
                 true},
        CollCase{"AllReduceFp32FixedPointSumMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_SUM,
                 kMaxElems32, false},
        CollCase{"AllReduceFp32MinMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MIN, kMaxElems32,
                 false},
        CollCase{"AllReduceFp32MaxMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_FP32, INC_OP_MAX, kMaxElems32,
                 false},
        CollCase{"AllReduceInt64SumMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM, kMaxElems64,
                 false},
        CollCase{"AllReduceInt64SumOverflowFlagMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_SUM,
                 kMaxElems64, true},
        CollCase{"AllReduceInt64MinMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_MIN, kMaxElems64,
                 true},
        CollCase{"AllReduceInt64MaxMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_MAX, kMaxElems64,
                 true},
        CollCase{"ReduceInt32SumMaxPayload", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_SUM, kMaxElems32,
                 false},
        CollCase{"AllReduceOneElement", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, 1, false},
        CollCase{"ReduceInt32Sum", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_SUM, 240, false},
        // Bitwise ops run over 64-bit words: odd INT32 counts end inside one.
        CollCase{"AllReduceInt32And", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_BAND, 241, true},
        CollCase{"AllReduceInt32Or", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_BOR, 240, true},
        CollCase{"AllReduceInt32Xor", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_BXOR, 1, true},
        CollCase{"AllReduceInt64And", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_BAND, 120, true},
        CollCase{"AllReduceInt64Or", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_BOR, 3, true},
        CollCase{"AllReduceInt64Xor", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_BXOR, 121, true},
        CollCase{"AllReduceInt32XorMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_BXOR, kMaxElems32,
                 true},
        CollCase{"AllReduceInt64AndMaxPayload", INC_COLL_ALLREDUCE, INC_DTYPE_INT64, INC_OP_BAND, kMaxElems64,
                 true},
        CollCase{"ReduceInt32Or", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_BOR, 99, true},
        CollCase{"ReduceInt64Xor", INC_COLL_REDUCE, INC_DTYPE_INT64, INC_OP_BXOR, 100, true},
        CollCase{"ReduceInt32Min", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_MIN, 100, true},
        CollCase{"ReduceInt32Max", INC_COLL_REDUCE, INC_DTYPE_INT32, INC_OP_MAX, 100, true},
        CollCase{"ReduceFp32Sum", INC_COLL_REDUCE, INC_DTYPE_FP32, INC_OP_SUM, 240, false},
        CollCase{"ReduceFp32Min", INC_COLL_REDUCE, INC_DTYPE_FP32, INC_OP_MIN, 100, false},
        CollCase{"ReduceFp32Max", INC_COLL_REDUCE, INC_DTYPE_FP32, INC_OP_MAX, 100, false},
        CollCase{"ReduceInt64Sum", INC_COLL_REDUCE, INC_DTYPE_INT64, INC_OP_SUM, 100, false},
        CollCase{"ReduceInt64Min", INC_COLL_REDUCE, INC_DTYPE_INT64, INC_OP_MIN, 100, true},
        CollCase{"ReduceInt64Max", INC_COLL_REDUCE, INC_DTYPE_INT64, INC_OP_MAX, 100, true},
        CollCase{"BroadcastInt32", INC_COLL_BROADCAST, INC_DTYPE_INT32, INC_OP_SUM, 240, true},
        CollCase{"BroadcastFp32", INC_COLL_BROADCAST, INC_DTYPE_FP32, INC_OP_SUM, 17, false},
        CollCase{"BroadcastInt64", INC_COLL_BROADCAST, INC_DTYPE_INT64, INC_OP_SUM, 253, true},
        CollCase{"BroadcastInt32MaxPayload", INC_COLL_BROADCAST, INC_DTYPE_INT32, INC_OP_SUM, kMaxElems32,
                 true},
        CollCase{"BroadcastInt64MaxPayload", INC_COLL_BROADCAST, INC_DTYPE_INT64, INC_OP_SUM, kMaxElems64,
                 true},
        CollCase{"Barrier", INC_COLL_BARRIER, INC_DTYPE_INT32, INC_OP_SUM, 0, false}),
    CaseName<CollCase>);

// The lane loops step over several lanes per bound check and so read and
// write lanes past the count (stale payload bytes in scratch, stale sums in
// the slot). After a message with the largest payload of big values, every
// count just below it (each remainder modulo the loop steps) must give the
// exact result and no spurious OVERFLOW.
struct TailCase {
  const char* name;
  uint8_t dtype, op;
};

using LaneTailTest = BpfTableTest<TailCase>;

TEST_P(LaneTailTest, CountsBelowTheLargestAfterBigValuesAreExact) {
  const TailCase& c = GetParam();
  Switch sw(UniqueName("tail"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = ThreeKidsLargestPayload(sw, &t);
  std::vector<uint32_t> psn(kids.size(), 0);
  const uint16_t max = ElemSize(c.dtype) == 8 ? kMaxElems64 : kMaxElems32;
  for (uint32_t msg = 0; msg < 9; msg++) {
    SCOPED_TRACE("message " + std::to_string(msg));
    // Message 0: the largest count, values that overflow a SUM; then
    // max - 1 .. max - 8 elements of small values.
    uint16_t count = static_cast<uint16_t>(max - msg);
    std::vector<std::vector<uint8_t>> in;
    for (int r = 0; r < 3; r++) in.push_back(Payload(c.dtype, count, msg * 10 + r, msg == 0));
    RunMessage(sw, t, kids, msg, INC_COLL_ALLREDUCE, c.dtype, c.op, in, 0, &psn);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(sw.Stat("completions"), 9u);
  EXPECT_EQ(sw.Stat("drops"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Datapath, LaneTailTest,
                         ::testing::Values(TailCase{"Int32Sum", INC_DTYPE_INT32, INC_OP_SUM},
                                           TailCase{"Fp32FixedPointSum", INC_DTYPE_FP32, INC_OP_SUM},
                                           TailCase{"Int64Sum", INC_DTYPE_INT64, INC_OP_SUM},
                                           TailCase{"Fp64FixedPointSum", INC_DTYPE_FP64, INC_OP_SUM},
                                           TailCase{"Int32Min", INC_DTYPE_INT32, INC_OP_MIN},
                                           TailCase{"Fp32Max", INC_DTYPE_FP32, INC_OP_MAX},
                                           TailCase{"Int64Max", INC_DTYPE_INT64, INC_OP_MAX},
                                           TailCase{"Int32Xor", INC_DTYPE_INT32, INC_OP_BXOR},
                                           TailCase{"Int64And", INC_DTYPE_INT64, INC_OP_BAND}),
                         CaseName<TailCase>);

// ------------------------------------------------------- tree sizes --

using SizeTest = BpfTableTest<int>;

TEST_P(SizeTest, AllReduceCompletesOnlyWhenEveryChildContributed) {
  int n = GetParam();
  Switch sw(UniqueName("size"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  auto kids = Kids(n);
  Status st = sw.dp->ConfigureTree(MakeTree(t, kids));
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint32_t> psn(kids.size(), 0);
  for (uint32_t msg = 0; msg < 2; msg++) {
    std::vector<std::vector<uint8_t>> in;
    for (int r = 0; r < n; r++) in.push_back(Payload(INC_DTYPE_INT32, 64, msg * 100 + r));
    RunMessage(sw, t, kids, msg, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, in, 0, &psn);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(sw.Stat("completions"), 2u);
  EXPECT_EQ(sw.Stat("contributions"), 2u * n);
}

INSTANTIATE_TEST_SUITE_P(Datapath, SizeTest, ::testing::Values(2, 4, 64));

// ------------------------------------------------- slot reuse, wrap-around --

TEST_F(DatapathTest, SlotReuseOverThreePoolsAndMessageIdWrapAround) {
  Switch sw(UniqueName("wrap"));
  ASSERT_TRUE(sw.dp);
  TreeParams t;
  t.pool = 4;
  auto kids = Kids(2);
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(t, kids)).ok());
  std::vector<uint32_t> psn(kids.size(), 0);
  uint32_t done = 0;
  for (uint32_t m = 0; m < 3u * t.pool + 3; m++) {
    RunMessage(sw, t, kids, m, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
               {Payload(INC_DTYPE_INT32, 8, m), Payload(INC_DTYPE_INT32, 8, m + 7)}, 0, &psn, m % 5 == 0);
    if (HasFatalFailure()) return;
    done++;
  }
  // A second tree whose message ids run across 2^32 -> 0.
  TreeParams w = t;
  w.tree_id = 2;
  w.slot_base = 100;
  ASSERT_TRUE(sw.dp->ConfigureTree(MakeTree(w, kids)).ok());
  std::vector<uint32_t> wpsn(kids.size(), 0);
  for (uint32_t m = 0xFFFFFFF0u; m != 0x10u; m++) {
    RunMessage(sw, w, kids, m, INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM,
               {Payload(INC_DTYPE_INT32, 8, m), Payload(INC_DTYPE_INT32, 8, m + 7)}, 0, &wpsn, m % 5 == 0);
    if (HasFatalFailure()) return;
    done++;
  }
  t = w;
  EXPECT_EQ(sw.Stat("completions"), done);
  // Stale: message 0x0F was completed; 0x0F - 2S on the same copy is old.
  auto r = TestRun(sw.prog(), FromPeer(kids[0], Header(t, 0, 0x0Fu - 8, 8), Payload(INC_DTYPE_INT32, 8, 1)),
                   kids[0].ifindex);
  EXPECT_EQ(r.retval, XDP_DROP);
  EXPECT_EQ(sw.Drops("stale"), 1u);
}

}  // namespace
}  // namespace inc::dp
