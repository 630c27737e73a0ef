// SPDX-License-Identifier: Apache-2.0
// The shared-memory stage of several ranks per host (client/host_stage.h):
// threads play the local ranks of several hosts, each host with its own
// segment; the leaders meet at an in-process stand-in for the switch that
// computes as bpf/aggregate.h does (integer sums that wrap, INT64 MIN/MAX,
// FP32 MIN/MAX on the order-preserving key, Broadcast copies the root's
// bytes). Checks exact integer results, float sums that are bit-for-bit the
// same for 1, 2 and 4 ranks per host (the same ranks and values), the rank
// order of gathered small sums, rooted Reduce, Broadcast, Barrier, chunking
// of vectors larger than a slot, and failure propagation.
#include "client/host_stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "client/float_sum.h"
#include "client/numerics.h"
#include "client/protocol.h"
#include "float_contract.h"

namespace inc::client {
namespace {

constexpr uint32_t kElems4 = 256;  // 1 KiB payloads

// Every leader calls the same sequence of operations; the last to arrive
// computes the result.
class FakeSwitch {
 public:
  explicit FakeSwitch(uint32_t hosts) : hosts_(hosts) {}

  Status Reduce(uint32_t node, uint8_t wire, uint8_t op, void* lanes, uint64_t count, uint32_t root_node,
                bool recv, const HostNetSum& sum) {
    const size_t lane = inc_dtype_size(wire);
    Status s = Meet(
        node, lanes, count * lane,
        [&](std::vector<std::vector<uint8_t>>& in, std::vector<uint8_t>& out) {
          // The switch's certificate of a float sum's listed blocks: a
          // block is flagged when some element's sum over the hosts of
          // |lane| is below the threshold (bpf/aggregate.h).
          flags_.assign(sum.num_blocks, 0);
          const uint64_t threshold = CertificateThreshold(sum.aux);
          const uint64_t per = kElems4 * 4 / lane;
          for (uint64_t k = 0; sum.blocks && threshold && k < sum.num_blocks; k++) {
            for (uint64_t i = sum.blocks[k] * per; i < std::min<uint64_t>(count, (sum.blocks[k] + 1) * per);
                 i++) {
              uint64_t abs_sum = 0;
              for (uint32_t h = 0; h < hosts_; h++) {
                int64_t v;
                if (lane == 8) {
                  std::memcpy(&v, &in[h][i * 8], 8);
                } else {
                  int32_t w;
                  std::memcpy(&w, &in[h][i * 4], 4);
                  v = w;
                }
                abs_sum += static_cast<uint64_t>(v < 0 ? -v : v);
              }
              if (abs_sum < threshold) flags_[k] = 1;
            }
          }
          out = in[0];
          for (uint32_t h = 1; h < hosts_; h++) {
            for (uint64_t i = 0; i < count; i++) {
              if (lane == 8) {
                int64_t a, b;
                std::memcpy(&a, &out[i * 8], 8);
                std::memcpy(&b, &in[h][i * 8], 8);
                int64_t r = op == INC_OP_SUM
                                ? static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b))
                            : op == INC_OP_MIN  ? std::min(a, b)
                            : op == INC_OP_MAX  ? std::max(a, b)
                            : op == INC_OP_BAND ? a & b
                            : op == INC_OP_BOR  ? a | b
                                                : a ^ b;
                std::memcpy(&out[i * 8], &r, 8);
              } else {
                int32_t a, b;
                std::memcpy(&a, &out[i * 4], 4);
                std::memcpy(&b, &in[h][i * 4], 4);
                int32_t r;
                if (op == INC_OP_SUM) {
                  r = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
                } else if (inc_op_bitwise(op)) {
                  r = op == INC_OP_BAND ? a & b : op == INC_OP_BOR ? a | b : a ^ b;
                } else {
                  auto key = [&](int32_t x) {
                    return wire == INC_DTYPE_FP32 ? x ^ ((x >> 31) & 0x7fffffff) : x;
                  };
                  r = (op == INC_OP_MIN ? key(b) < key(a) : key(b) > key(a)) ? b : a;
                }
                std::memcpy(&out[i * 4], &r, 4);
              }
            }
          }
        },
        recv, root_node);
    if (sum.uncertified) *sum.uncertified = flags_;
    return s;
  }

  Status Broadcast(uint32_t node, const void* send, void* recv, size_t bytes, uint32_t root_node) {
    std::vector<uint8_t> buf(bytes);
    if (node == root_node) std::memcpy(buf.data(), send, bytes);
    Status s = Meet(
        node, buf.data(), bytes,
        [&](std::vector<std::vector<uint8_t>>& in, std::vector<uint8_t>& out) { out = in[root_node]; }, true,
        root_node);
    std::memcpy(recv, buf.data(), bytes);
    return s;
  }

  Status Barrier(uint32_t node) {
    uint8_t dummy = 0;
    return Meet(
        node, &dummy, 0, [](auto&, auto&) {}, false, 0);
  }

  bool fail_next = false;

 private:
  template <typename F>
  Status Meet(uint32_t node, void* data, size_t bytes, F combine, bool recv, uint32_t) {
    std::unique_lock<std::mutex> l(mu_);
    const uint64_t gen = gen_;
    in_.resize(hosts_);
    in_[node].assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + bytes);
    if (++arrived_ == hosts_) {
      combine(in_, out_);
      failed_ = fail_next;
      fail_next = false;
      arrived_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen_ != gen; });
    }
    if (failed_) return Status(Code::kDeadlineExceeded, "switch lost the message");
    if (recv && bytes) std::memcpy(data, out_.data(), bytes);
    return Status::Ok();
  }

  uint32_t hosts_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t gen_ = 0;
  uint32_t arrived_ = 0;
  bool failed_ = false;
  std::vector<std::vector<uint8_t>> in_;
  std::vector<uint8_t> out_;
  std::vector<uint8_t> flags_;  // certificate verdicts of the last float-sum pass
};

class FakeNet : public HostNet {
 public:
  FakeNet(FakeSwitch* sw, uint32_t node) : sw_(sw), node_(node) {}
  Status Reduce(uint8_t, uint8_t wire, uint8_t op, void* lanes, uint64_t count, uint32_t root_node, bool recv,
                const HostNetSum& sum) override {
    return sw_->Reduce(node_, wire, op, lanes, count, root_node, recv, sum);
  }
  Status Broadcast(const void* send, void* recv, size_t bytes, uint32_t root_node) override {
    return sw_->Broadcast(node_, send, recv, bytes, root_node);
  }
  Status Barrier() override { return sw_->Barrier(node_); }

 private:
  FakeSwitch* sw_;
  uint32_t node_;
};

// Runs body(rank, collectives) on world threads, local_size per host.
template <typename Body>
void RunRanks(const std::string& job, uint32_t world, uint32_t local_size, Body body,
              size_t slot_bytes = 65536, FakeSwitch** sw_out = nullptr) {
  const uint32_t hosts = world / local_size;
  FakeSwitch sw(hosts);
  if (sw_out) *sw_out = &sw;
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < world; r++) {
    threads.emplace_back([&, r] {
      HostStageOptions o;
      o.name = HostStageName(job + "-" + std::to_string(getpid()), r / local_size);
      o.local_rank = r % local_size;
      o.local_size = local_size;
      o.slot_bytes = slot_bytes;
      o.attach_timeout_ms = 20000;
      o.barrier_timeout_ms = 20000;
      auto st = HostStage::Open(o);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      HostInfo info;
      info.elems4 = kElems4;
      info.gather_sum = true;
      FakeNet net(&sw, r / local_size);
      if ((*st)->leader()) {
        ASSERT_TRUE((*st)->WaitAttached().ok());
        (*st)->PublishJoin(Status::Ok(), info);
      } else {
        auto got = (*st)->WaitJoin();
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(got->elems4, kElems4);
        info = *got;
      }
      HostCollectives hc(st->get(), (*st)->leader() ? &net : nullptr, r, world, info);
      body(r, hc);
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<float> Values(uint32_t rank, size_t n, uint32_t seed) {
  std::mt19937 g(seed * 1000 + rank);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = d(g) * std::ldexp(1.0f, static_cast<int>(i % 13) - 6);
  return v;
}

TEST(HostStage, NameIsSanitised) {
  EXPECT_EQ(HostStageName("job/1 x", 3), "/incin-job_1_x-3");
}

TEST(HostStage, RejectsBadOptions) {
  HostStageOptions o;
  o.name = "/incin-bad";
  o.local_rank = 2;
  o.local_size = 2;
  EXPECT_EQ(HostStage::Open(o).status().code(), Code::kInvalidArgument);
  o.local_rank = 0;
  o.name = "no-slash";
  EXPECT_EQ(HostStage::Open(o).status().code(), Code::kInvalidArgument);
}

TEST(HostStage, FollowerWithoutLeaderTimesOut) {
  HostStageOptions o;
  o.name = HostStageName("orphan-" + std::to_string(getpid()), 0);
  o.local_rank = 1;
  o.local_size = 2;
  o.attach_timeout_ms = 100;
  auto st = HostStage::Open(o);
  EXPECT_EQ(st.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(st.status().message().find("local rank 0"), std::string::npos) << st.status().message();
}

TEST(HostStage, IntegerAllReduceIsExact) {
  for (uint32_t l : {2u, 4u}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{40000}}) {
      RunRanks("int", 8, l, [&](uint32_t r, HostCollectives& hc) {
        std::vector<int32_t> a(n), out(n);
        std::vector<int64_t> b(n), out64(n);
        for (size_t i = 0; i < n; i++) {
          a[i] = static_cast<int32_t>(r * 1000 + i);
          b[i] = (int64_t{1} << 40) * (r + 1) - static_cast<int64_t>(i);
        }
        ASSERT_TRUE(
            hc.Reduce(INC_COLL_ALLREDUCE, a.data(), out.data(), n, DataType::kInt32, ReduceOp::kSum, 0, true)
                .ok());
        for (size_t i = 0; i < n; i++) ASSERT_EQ(out[i], static_cast<int32_t>(28000 + 8 * i)) << i;
        ASSERT_TRUE(hc.Reduce(INC_COLL_ALLREDUCE, b.data(), out64.data(), n, DataType::kInt64, ReduceOp::kMin,
                              0, true)
                        .ok());
        for (size_t i = 0; i < n; i++) ASSERT_EQ(out64[i], (int64_t{1} << 40) - static_cast<int64_t>(i));
        ASSERT_TRUE(
            hc.Reduce(INC_COLL_ALLREDUCE, a.data(), out.data(), n, DataType::kInt32, ReduceOp::kMax, 0, true)
                .ok());
        for (size_t i = 0; i < n; i++) ASSERT_EQ(out[i], static_cast<int32_t>(7000 + i));
      });
    }
  }
}

TEST(HostStage, IntegerBitwiseOpsAreExact) {
  for (uint32_t l : {2u, 4u}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{40001}}) {
      RunRanks("bits", 8, l, [&](uint32_t r, HostCollectives& hc) {
        std::vector<int32_t> a(n), out(n);
        std::vector<int64_t> b(n), out64(n);
        auto bits32 = [](uint32_t q, size_t i) {
          return static_cast<int32_t>(0x9e3779b9u * (i + 1) ^ (1u << q));
        };
        auto bits64 = [](uint32_t q, size_t i) {
          return static_cast<int64_t>(0x9e3779b97f4a7c15ull * (i + 3) ^ (uint64_t{1} << (q * 7)));
        };
        for (size_t i = 0; i < n; i++) {
          a[i] = bits32(r, i);
          b[i] = bits64(r, i);
        }
        ASSERT_TRUE(
            hc.Reduce(INC_COLL_ALLREDUCE, a.data(), out.data(), n, DataType::kInt32, ReduceOp::kBor, 0, true)
                .ok());
        for (size_t i = 0; i < n; i++) {
          int32_t want = 0;
          for (uint32_t q = 0; q < 8; q++) want |= bits32(q, i);
          ASSERT_EQ(out[i], want) << i;
        }
        ASSERT_TRUE(hc.Reduce(INC_COLL_ALLREDUCE, b.data(), out64.data(), n, DataType::kInt64,
                              ReduceOp::kBxor, 0, true)
                        .ok());
        for (size_t i = 0; i < n; i++) {
          int64_t want = 0;
          for (uint32_t q = 0; q < 8; q++) want ^= bits64(q, i);
          ASSERT_EQ(out64[i], want) << i;
        }
        ASSERT_TRUE(
            hc.Reduce(INC_COLL_ALLREDUCE, a.data(), out.data(), n, DataType::kInt32, ReduceOp::kBand, 0, true)
                .ok());
        for (size_t i = 0; i < n; i++) {
          int32_t want = -1;
          for (uint32_t q = 0; q < 8; q++) want &= bits32(q, i);
          ASSERT_EQ(out[i], want) << i;
        }
      });
    }
  }
}

// Float results for 8 ranks, with the given ranks per host.
std::vector<std::vector<uint8_t>> FloatResults(uint32_t local_size, DataType t, ReduceOp op, size_t n,
                                               size_t slot_bytes = 65536) {
  const uint32_t world = 8;
  std::vector<std::vector<uint8_t>> results(world);
  RunRanks(
      "f" + std::to_string(local_size), world, local_size,
      [&](uint32_t r, HostCollectives& hc) {
        auto v = Values(r, n, 7);
        std::vector<uint8_t> in(n * DataTypeSize(t)), out(n * DataTypeSize(t));
        for (size_t i = 0; i < n; i++) {
          if (t == DataType::kFloat32) std::memcpy(&in[i * 4], &v[i], 4);
          if (t == DataType::kFloat64) {
            double d = static_cast<double>(v[i]) * 1.0000001;
            std::memcpy(&in[i * 8], &d, 8);
          }
          if (t == DataType::kFloat16) {
            uint16_t h = F32ToF16(v[i]);
            std::memcpy(&in[i * 2], &h, 2);
          }
          if (t == DataType::kBFloat16) {
            uint16_t h = F32ToBf16(v[i]);
            std::memcpy(&in[i * 2], &h, 2);
          }
        }
        Status s = hc.Reduce(INC_COLL_ALLREDUCE, in.data(), out.data(), n, t, op, 0, true);
        ASSERT_TRUE(s.ok()) << s.ToString();
        results[r] = out;
      },
      slot_bytes);
  return results;
}

TEST(HostStage, FloatResultsDoNotDependOnRanksPerHost) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
      // 3: gathered small sum; 1001 and 20000: block fixed point (20000
      // float64 lanes take several 64 KiB slots).
      for (size_t n : {size_t{3}, size_t{1001}, size_t{20000}}) {
        auto one = FloatResults(1, t, op, n);
        for (uint32_t r = 1; r < 8; r++) ASSERT_EQ(one[r], one[0]) << DataTypeName(t) << " rank " << r;
        for (uint32_t l : {2u, 4u}) {
          auto many = FloatResults(l, t, op, n);
          for (uint32_t r = 0; r < 8; r++)
            ASSERT_EQ(many[r], one[0]) << DataTypeName(t) << " " << ReduceOpName(op) << " n=" << n << " " << l
                                       << " ranks/host, rank " << r;
        }
      }
    }
  }
}

TEST(HostStage, FloatSumMatchesTheOneRankPerHostCodecAndCertificate) {
  // What libinc computes with one rank per host for 8 ranks: every rank
  // quantises with the max exponent and headroom 3, the switch adds and
  // certifies each block (sum over ranks of |lane| >= T for every element),
  // a block it cannot certify is gathered and added in rank order.
  const size_t n = 700;
  const uint32_t world = 8, per = ElemsPerPacket(kElems4, 4);
  const uint64_t threshold = CertificateThreshold(CertificateCode(DataType::kFloat32, world));
  std::vector<int64_t> sum(n, 0);
  std::vector<uint64_t> abs_sum(n, 0);
  std::vector<int32_t> exps(PacketCount(n, per), kZeroBlockExponent);
  std::vector<float> all(world * n);
  for (uint32_t r = 0; r < world; r++) {
    auto v = Values(r, n, 7);
    std::copy(v.begin(), v.end(), all.begin() + r * n);
    for (uint64_t b = 0; b < exps.size(); b++) {
      PacketRange pr = PacketElements(b, n, per);
      exps[b] = std::max(exps[b], BlockExponentF32(v.data() + pr.first, pr.count));
    }
  }
  for (uint32_t r = 0; r < world; r++) {
    std::vector<int32_t> q(n);
    for (uint64_t b = 0; b < exps.size(); b++) {
      PacketRange pr = PacketElements(b, n, per);
      QuantiseF32(all.data() + r * n + pr.first, pr.count, exps[b], HeadroomBits(world), q.data() + pr.first);
    }
    for (size_t i = 0; i < n; i++) {
      sum[i] += q[i];
      abs_sum[i] += static_cast<uint64_t>(std::llabs(q[i]));
    }
  }
  std::vector<float> want(n);
  uint64_t gathered = 0;
  for (uint64_t b = 0; b < exps.size(); b++) {
    PacketRange pr = PacketElements(b, n, per);
    bool certified = true;
    for (uint64_t i = pr.first; i < pr.first + pr.count; i++) certified &= abs_sum[i] >= threshold;
    if (certified) {
      std::vector<int32_t> lanes(sum.begin() + pr.first, sum.begin() + pr.first + pr.count);
      DequantiseF32(lanes.data(), pr.count, exps[b], HeadroomBits(world), want.data() + pr.first);
    } else {
      gathered++;
      std::vector<float> block(world * pr.count);
      for (uint32_t r = 0; r < world; r++)
        std::copy(all.begin() + r * n + pr.first, all.begin() + r * n + pr.first + pr.count,
                  block.begin() + r * pr.count);
      SumGathered(DataType::kFloat32, world, pr.count, block.data(), want.data() + pr.first);
    }
  }
  RecordProperty("gathered_blocks", static_cast<int>(gathered));
  for (uint32_t l : {1u, 4u}) {
    auto got = FloatResults(l, DataType::kFloat32, ReduceOp::kSum, n);
    for (uint32_t r = 0; r < world; r++)
      ASSERT_EQ(std::memcmp(got[r].data(), want.data(), n * 4), 0) << l << " ranks per host, rank " << r;
  }
}

TEST(HostStage, ReduceBroadcastBarrier) {
  const size_t n = 100003;  // bytes: several 64 KiB chunks, not a multiple of 4
  RunRanks("rbb", 8, 4, [&](uint32_t r, HostCollectives& hc) {
    std::vector<int32_t> a(1000, static_cast<int32_t>(r)), out(1000, -1);
    for (uint32_t root : {0u, 5u}) {
      std::fill(out.begin(), out.end(), -1);
      Status s = hc.Reduce(INC_COLL_REDUCE, a.data(), r == root ? out.data() : nullptr, a.size(),
                           DataType::kInt32, ReduceOp::kSum, root, r == root);
      ASSERT_TRUE(s.ok()) << s.ToString();
      if (r == root) {
        EXPECT_EQ(out[999], 28);
      }
    }
    std::vector<uint8_t> buf(n);
    for (size_t i = 0; i < n; i++) buf[i] = r == 6 ? static_cast<uint8_t>(i * 7) : 0;
    ASSERT_TRUE(hc.Broadcast(buf.data(), buf.data(), n, 6).ok());
    for (size_t i = 0; i < n; i++) ASSERT_EQ(buf[i], static_cast<uint8_t>(i * 7)) << i;
    ASSERT_TRUE(hc.Barrier().ok());
    ASSERT_TRUE(
        hc.Reduce(INC_COLL_ALLREDUCE, nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, 0, true).ok());
  });
}

TEST(HostStage, LeaderFailureReachesEveryLocalRank) {
  FakeSwitch* sw = nullptr;
  std::atomic<int> failed{0};
  RunRanks(
      "fail", 4, 2,
      [&](uint32_t r, HostCollectives& hc) {
        ASSERT_TRUE(hc.Barrier().ok());
        // Rank 0 leads host 0: the switch meets again only after this.
        if (r == 0) sw->fail_next = true;
        std::vector<int32_t> a(10, 1), out(10);
        Status s = hc.Reduce(INC_COLL_ALLREDUCE, a.data(), out.data(), 10, DataType::kInt32, ReduceOp::kSum,
                             0, true);
        if (s.code() == Code::kDeadlineExceeded) failed++;
      },
      65536, &sw);
  EXPECT_EQ(failed.load(), 4);
}

// ------------------------------------------------- the float-sum contract
// Every element of a float SUM within (n-1)*u*sum|x_i| of the exact sum (u
// the type's unit roundoff; plus n*eta below the normal range, as for any
// IEEE sum), IEEE results where inputs hold inf/NaN, the same bits on every
// rank: checked through the real planner and codec against the stand-in
// switch (which certifies as bpf/aggregate.h does), for data of every kind.

struct ContractCase {
  Kind kind;
  DataType t;
  uint32_t world, local_size;
  size_t n;
  bool in_place = false;
};

ContractOutcome RunContract(const ContractCase& c) {
  std::vector<std::vector<double>> in(c.world);
  for (uint32_t r = 0; r < c.world; r++) {
    in[r] = Inputs(c.kind, r, c.world, c.n);
    for (double& x : in[r]) x = Narrow(c.t, x);
  }
  const size_t es = DataTypeSize(c.t);
  std::vector<std::vector<uint8_t>> out(c.world);
  RunRanks("fc" + std::to_string(c.world) + std::to_string(c.local_size), c.world, c.local_size,
           [&](uint32_t r, HostCollectives& hc) {
             std::vector<uint8_t> send(c.n * es), recv(c.n * es);
             for (size_t i = 0; i < c.n; i++) Store(c.t, in[r][i], &send[i * es]);
             if (c.in_place) recv = send;
             Status s = hc.Reduce(INC_COLL_ALLREDUCE, c.in_place ? recv.data() : send.data(), recv.data(),
                                  c.n, c.t, ReduceOp::kSum, 0, true);
             ASSERT_TRUE(s.ok()) << s.ToString();
             out[r] = recv;
           });
  ContractOutcome o;
  for (uint32_t r = 1; r < c.world; r++) EXPECT_EQ(out[r], out[0]) << "rank " << r << " differs from rank 0";
  std::vector<double> xs(c.world);
  for (size_t i = 0; i < c.n; i++) {
    for (uint32_t r = 0; r < c.world; r++) xs[r] = in[r][i];
    o.Add(CheckElement(c.t, xs, Load(c.t, &out[0][i * es])), i);
  }
  return o;
}

TEST(FloatSumContract, EveryElementWithinTheBoundAndIeeeSpecialsForEveryKindTypeAndWorld) {
  std::vector<ContractCase> cases;
  for (Kind k : {Kind::kRandn, Kind::kWide, Kind::kSpecials, Kind::kCancel, Kind::kTiny})
    for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
      for (uint32_t world : {2u, 3u, 4u, 8u})
        for (size_t n : {size_t{3}, size_t{1700}})
          for (bool in_place : {false, true}) cases.push_back({k, t, world, 1, n, in_place});
  // Several ranks per host: the same contract through the local stage.
  for (Kind k : {Kind::kRandn, Kind::kWide, Kind::kSpecials})
    for (bool in_place : {false, true}) cases.push_back({k, DataType::kFloat32, 8, 2, 1700, in_place});
  for (const ContractCase& c : cases) {
    SCOPED_TRACE(std::string(KindName(c.kind)) + " " + DataTypeName(c.t) + " world " +
                 std::to_string(c.world) + " x" + std::to_string(c.local_size) + " n " + std::to_string(c.n) +
                 (c.in_place ? " in place" : ""));
    ContractOutcome o = RunContract(c);
    EXPECT_EQ(o.violations, 0u) << o.first_violation;
    EXPECT_EQ(o.special_mismatches, 0u);
  }
}

TEST(FloatSumContract, OrdinaryDataKeepsTheFastPathAndStaysMostlyCorrectlyRounded) {
  // randn over 4 ranks: the switch certifies almost every block (the fast
  // path), and most elements are the correctly rounded sum.
  ContractOutcome o = RunContract({Kind::kRandn, DataType::kFloat32, 4, 1, 20000});
  EXPECT_EQ(o.violations, 0u) << o.first_violation;
  EXPECT_GT(o.correctly_rounded, o.elements * 9 / 10);
}

}  // namespace
}  // namespace inc::client
