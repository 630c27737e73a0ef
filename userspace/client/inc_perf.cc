// SPDX-License-Identifier: Apache-2.0
// inc-perf: nccl-tests style benchmark of incin collectives through the
// switches. Every rank runs one instance; rank 0 prints the table. Results
// are checked against a host-computed reference on every rank (values are
// chosen so the expected result is exact in every data type); the exit
// status is non-zero when any rank saw a wrong element.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/communicator.h"
#include "client/numerics.h"
#include "common/log.h"
#include "common/version.h"

using inc::client::Communicator;
using inc::client::CommunicatorOptions;
using inc::client::DataType;
using inc::client::ReduceOp;

namespace {

enum Exit { kExitOk = 0, kExitWrong = 1, kExitUsage = 2, kExitSetup = 3, kExitFailed = 4, kExitSignal = 143 };

std::mutex g_comm_mu;  // guards g_comm against the signal thread
Communicator* g_comm = nullptr;
std::atomic<bool> g_stop{false};

// SIGTERM/SIGINT: abort the running collective so main leaves the group and
// exits; before the group exists there is nothing to leave.
void SignalThread(sigset_t set) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  g_stop = true;
  std::lock_guard<std::mutex> lock(g_comm_mu);
  if (!g_comm) std::_Exit(kExitSignal);
  g_comm->Abort(std::string("signal ") + strsignal(sig));
}

// Element value of rank r at index i: multiples of 1/4 in [-1.75, 1.75],
// so sums over up to 64 ranks are exact even in bfloat16 and every
// block-fixed-point quantisation is exact.
// --inexact: float values whose sums round (a float32 SUM then depends on
// how it is computed; checked for identical bits with --digest instead).
bool g_inexact = false;
double Gen(uint32_t r, uint64_t i) {
  double v = static_cast<double>(static_cast<int64_t>((i * 3 + r * 5) % 15) - 7) * 0.25;
  if (g_inexact) v += static_cast<double>((i * 7919 + r * 104729) % 1000003) / 3000009.0 - 0.1666;
  return v;
}
// Integer types get a wider range.
int64_t GenInt(uint32_t r, uint64_t i) {
  return static_cast<int64_t>((i * 31 + r * 17) % 2001) - 1000 + static_cast<int64_t>(r) * 3;
}

void Store(DataType t, void* buf, uint64_t i, double v, int64_t iv) {
  switch (t) {
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(iv); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = iv * 1000003; break;
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buf)[i] = inc::client::F32ToF16(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(buf)[i] = inc::client::F32ToBf16(static_cast<float>(v));
      break;
  }
}

// Bitwise ops fold the stored integers (Store scales int64 values).
void ExpectedBits(DataType t, ReduceOp op, uint32_t world, uint64_t i, void* out) {
  int64_t acc = 0;
  for (uint32_t r = 0; r < world; r++) {
    int64_t y = 0;
    if (t == DataType::kInt32) {
      int32_t y32 = 0;
      Store(t, &y32, 0, 0, GenInt(r, i));
      y = y32;
    } else {
      Store(t, &y, 0, 0, GenInt(r, i));
    }
    if (r == 0)
      acc = y;
    else if (op == ReduceOp::kBand)
      acc &= y;
    else if (op == ReduceOp::kBor)
      acc |= y;
    else
      acc ^= y;
  }
  if (t == DataType::kInt32)
    *static_cast<int32_t*>(out) = static_cast<int32_t>(acc);
  else
    *static_cast<int64_t*>(out) = acc;
}

// Reference value of element i for a reduction over `world` ranks.
void Expected(DataType t, ReduceOp op, uint32_t world, uint64_t i, void* out) {
  if (inc::client::ReduceOpIntegerOnly(op)) return ExpectedBits(t, op, world, i, out);
  double v = 0;
  int64_t iv = 0;
  for (uint32_t r = 0; r < world; r++) {
    double x = Gen(r, i);
    int64_t y = GenInt(r, i);
    if (r == 0) {
      v = x;
      iv = y;
    } else if (op == ReduceOp::kSum) {
      v += x;
      iv += y;
    } else if (op == ReduceOp::kMin) {
      v = std::min(v, x);
      iv = std::min(iv, y);
    } else {
      v = std::max(v, x);
      iv = std::max(iv, y);
    }
  }
  Store(t, out, 0, v, iv);
}

size_t ParseSize(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string suf = end ? end : "";
  double mul = 1;
  if (suf == "K" || suf == "k")
    mul = 1024;
  else if (suf == "M" || suf == "m")
    mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g")
    mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty())
    throw CLI::ValidationError("size", "bad size '" + text + "' (use N, NK, NM or NG)");
  if (v < 0) throw CLI::ValidationError("size", "negative size");
  return static_cast<size_t>(v * mul);
}

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = 0;
};

}  // namespace

// nccl-tests' bus bandwidth factor of a collective over n ranks, and how the
// header writes it.
struct BusFactor {
  double factor;
  const char* text;
};
BusFactor BusFactorOf(const std::string& coll, uint32_t n) {
  if (n <= 1 || coll == "reduce" || coll == "broadcast" || coll == "barrier") return {1.0, "1"};
  if (coll == "allreduce") return {2.0 * (n - 1) / n, "2(n-1)/n"};
  return {static_cast<double>(n - 1) / n, "(n-1)/n"};
}

int main(int argc, char** argv) {
  CLI::App app{
      "inc-perf: benchmark incin in-network collectives (nccl-tests style).\n"
      "Run one instance per rank (see inc-launch.sh). Rank 0 prints, per message size: size (B), count\n"
      "(elements), type, redop, root, time (us, mean per iteration), algbw = size/time (GB/s), busbw and\n"
      "#wrong (elements differing from the host-computed reference, summed over ranks).\n"
      "busbw as nccl-tests defines it, so the numbers compare with nccl-tests and OSU output: allreduce\n"
      "algbw x 2(n-1)/n; reduce_scatter, allgather, alltoall, scatter, gather algbw x (n-1)/n (size = all\n"
      "n blocks, count = elements per block); reduce, broadcast algbw. (In-network, each worker sends and\n"
      "receives the buffer once; the factor is what a ring would move per link for the same result.)\n"
      "Exit status: 0 ok, 1 wrong results, 2 usage, 3 setup/join failed,\n"
      "4 a collective failed (timeouts, tree dismantled), 143 stopped by SIGTERM/SIGINT."};
  app.set_version_flag("--version", std::string("inc-perf ") + inc::kVersion,
                       "Print inc-perf's version and exit");
  std::string coll = "allreduce";
  std::string min_s = "8", max_s = "64M", dtype_s = "float32", op_s = "sum", log_s = "warn";
  double factor = 2;
  int iters = 20, warmup = 5;
  uint32_t root = 0;
  bool json = false, check = true;
  std::string digest_file;
  CommunicatorOptions o;
  app.add_option("collective", coll,
                 "allreduce | reduce | broadcast | barrier | allgather | reduce_scatter | alltoall | scatter "
                 "| gather")
      ->check(CLI::IsMember({"allreduce", "reduce", "broadcast", "barrier", "allgather", "reduce_scatter",
                             "alltoall", "scatter", "gather"}));
  app.add_option("-b,--minbytes", min_s, "smallest size in bytes (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_s, "largest size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "size multiplier between steps")
      ->capture_default_str()
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-d,--datatype", dtype_s, "int32 float32 int64 float16 bfloat16 float64")
      ->capture_default_str();
  app.add_option("-o,--op", op_s, "sum min max band bor bxor (bitwise: int32, int64)")->capture_default_str();
  app.add_option("-n,--iters", iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-r,--root", root, "root rank for reduce/broadcast")->capture_default_str();
  app.add_option("-c,--check", check, "check results (1) or not (0)")->capture_default_str();
  app.add_flag("--json", json, "print one JSON document (rank 0) instead of the table");
  std::string assignment_file;
  app.add_option("--am", o.am_address, "aggregation manager host:port (required unless --assignment)");
  app.add_option("--job", o.job_id,
                 "job id, the same on every rank (required with --am); an AM with mTLS also wants the job's "
                 "credential in INCIN_JOB_CREDENTIAL (incinctl job credential JOB)");
  app.add_option("--assignment", assignment_file,
                 "AM-less run: this rank's inc.v1.MemberAssignment in protobuf JSON (no heartbeats)");
  app.add_option(
         "--ranks-per-host", o.local_size,
         "ranks on this host (0 = INCIN_LOCAL_SIZE, else 1); ranks go in blocks per host and local rank "
         "0 is the host's tree member (docs/operations.md \"Several ranks per host\")")
      ->check(CLI::Range(0, 256));
  app.add_flag("--inexact", g_inexact,
               "float values whose sums round (float results are then not checked; see --digest)");
  app.add_option("--digest", digest_file,
                 "append 'size hash' of this rank's result (last iteration) per size to this file");
  app.add_option("--rank", o.rank, "this rank")->required();
  app.add_option("--world", o.world_size, "number of ranks")->required();
  app.add_option("--iface", o.iface, "interface toward the attachment switch")->required();
  app.add_option("--qpn", o.qpn, "member QPN (default: derived from the pid)");
  app.add_option("--timeout-us", o.message_timeout_us, "per-message timeout before a retransmission")
      ->capture_default_str();
  app.add_option("--max-timeout-us", o.max_message_timeout_us,
                 "retransmission timeout cap (doubling per retry)")
      ->capture_default_str();
  app.add_option("--retries", o.max_retries,
                 "also fail after this many timeouts of one message (0: no limit)")
      ->capture_default_str();
  app.add_option("--op-timeout-ms", o.op_timeout_ms,
                 "how long a collective waits without progress for the slowest rank before failing")
      ->capture_default_str();
  app.add_option("--join-timeout-ms", o.join_timeout_ms, "how long to wait for the group")
      ->capture_default_str();
  app.add_option("--pool", o.pool_size, "slot pool size to request (0 = AM default)");
  app.add_option("--elems", o.elems_per_packet, "elements per packet to request (0 = AM default)");
  app.add_option("--broadcast-mode", o.broadcast_mode,
                 "allreduce (root data + zeros, INT32 SUM) or native (switch Broadcast with empty readies)")
      ->capture_default_str()
      ->check(CLI::IsMember({"allreduce", "native"}));
  app.add_option("--reduce-mode", o.reduce_mode,
                 "allreduce (non-roots ignore the result) or native (switch Reduce with completion notices)")
      ->capture_default_str()
      ->check(CLI::IsMember({"allreduce", "native"}));
  app.add_option(
         "--small-sum", o.small_sum,
         "float sums whose ranks' elements fit one packet: gather (one INT32 SUM, added in rank order) "
         "or fixed (block fixed point: exponent pre-pass + data)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gather", "fixed"}));
  app.add_option(
         "--float32-lanes", o.float32_lanes,
         "float32 sums' fixed-point lanes: auto (64-bit for data 32-bit lanes cannot certify), 32 or 64 "
         "(default: INCIN_FLOAT32_LANES, else auto)")
      ->check(CLI::IsMember({"auto", "32", "64"}));
  app.add_option(
         "--linger-ms", o.leave_linger_ms,
         "keep the tree up this long after the last collective before leaving (peers' retransmissions)")
      ->capture_default_str();
  app.add_option("--transport", o.transport,
                 "xdp (raw frames as XDP live frames), afxdp (raw frames, AF_XDP copy mode), verbs "
                 "(rdma-core UC QP), "
                 "auto (verbs when the interface has a RoCEv2 GID)")
      ->capture_default_str()
      ->check(CLI::IsMember({"xdp", "afxdp", "verbs", "auto"}));
  app.add_option("--rdma-device", o.rdma_device,
                 "verbs: RDMA device (default: the one with a RoCEv2 GID for --iface)");
  app.add_option("--gid-index", o.gid_index,
                 "verbs: GID index (default: the RoCEv2 GID of --iface's address)");
  app.add_flag("--xdp-generic", o.xdp_generic, "attach the worker XDP program in generic (SKB) mode");
  app.add_option("--log-level", log_s, "debug info warn error")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  DataType dtype;
  ReduceOp op;
  inc::LogLevel level;
  if (!inc::client::ParseDataType(dtype_s, &dtype)) {
    std::fprintf(stderr, "inc-perf: unknown data type '%s'\n", dtype_s.c_str());
    return kExitUsage;
  }
  if (!inc::client::ParseReduceOp(op_s, &op)) {
    std::fprintf(stderr, "inc-perf: unknown op '%s'\n", op_s.c_str());
    return kExitUsage;
  }
  if (!inc::ParseLogLevel(log_s, &level)) {
    std::fprintf(stderr, "inc-perf: unknown log level '%s'\n", log_s.c_str());
    return kExitUsage;
  }
  if (inc::client::ReduceOpIntegerOnly(op) && dtype != DataType::kInt32 && dtype != DataType::kInt64) {
    std::fprintf(stderr, "inc-perf: op %s needs an integer data type (int32, int64)\n", op_s.c_str());
    return kExitUsage;
  }
  if (g_inexact && dtype != DataType::kInt32 && dtype != DataType::kInt64) check = false;
  if (root >= o.world_size) {
    std::fprintf(stderr, "inc-perf: root %u >= world %u\n", root, o.world_size);
    return kExitUsage;
  }
  size_t min_bytes, max_bytes;
  try {
    min_bytes = ParseSize(min_s);
    max_bytes = ParseSize(max_s);
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "inc-perf: %s\n", e.what());
    return kExitUsage;
  }
  if (min_bytes > max_bytes) {
    std::fprintf(stderr, "inc-perf: -b is larger than -e\n");
    return kExitUsage;
  }
  inc::SetLogLevel(level);
  inc::SetLogComponent("inc-perf[" + std::to_string(o.rank) + "]");
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts
  std::thread(SignalThread, sigs).detach();

  if (assignment_file.empty() && (o.am_address.empty() || o.job_id.empty())) {
    std::fprintf(stderr, "inc-perf: --am and --job are required (or --assignment FILE)\n");
    return kExitUsage;
  }
  inc::Expected<std::unique_ptr<Communicator>> comm_or = inc::Status(inc::Code::kInternal, "not created");
  if (assignment_file.empty()) {
    comm_or = Communicator::Create(o);
  } else {
    std::ifstream in(assignment_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      std::fprintf(stderr, "inc-perf: cannot read %s\n", assignment_file.c_str());
      return kExitUsage;
    }
    auto asg = inc::client::AssignmentFromJson(text.str());
    if (!asg.ok()) {
      std::fprintf(stderr, "inc-perf: %s: %s\n", assignment_file.c_str(), asg.status().ToString().c_str());
      return kExitUsage;
    }
    o.am_address.clear();
    comm_or = Communicator::CreateWithAssignment(o, *asg);
  }
  if (!comm_or.ok()) {
    std::fprintf(stderr, "inc-perf rank %u: %s\n", o.rank, comm_or.status().ToString().c_str());
    return kExitSetup;
  }
  std::unique_ptr<Communicator> comm = std::move(*comm_or);
  {
    std::lock_guard<std::mutex> lock(g_comm_mu);
    g_comm = comm.get();
  }
  const size_t esize = inc::client::DataTypeSize(dtype);
  const uint32_t world = o.world_size;
  const bool print = o.rank == 0;
  const bool is_barrier = coll == "barrier";
  const bool uses_op = coll == "allreduce" || coll == "reduce" || coll == "reduce_scatter";
  const bool rooted = coll == "reduce" || coll == "broadcast" || coll == "scatter" || coll == "gather";
  const bool blocky = coll == "allgather" || coll == "reduce_scatter" || coll == "alltoall" ||
                      coll == "scatter" || coll == "gather";
  std::vector<Row> rows;
  int64_t my_wrong_total = 0;
  int rc = kExitOk;

  std::vector<size_t> sizes;
  if (is_barrier) {
    sizes.push_back(0);
  } else {
    for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * 1.0000001;
         s *= factor) {
      sizes.push_back(static_cast<size_t>(s));
      if (s == 0) break;
    }
  }
  if (print && !json) {
    std::printf(
        "# inc-perf %s  dtype %s  op %s  root %u  world %u  iters %d  warmup %d  (busbw = algbw x %s, "
        "nccl-tests)\n",
        coll.c_str(), inc::client::DataTypeName(dtype), inc::client::ReduceOpName(op), root, world, iters,
        warmup, BusFactorOf(coll, world).text);
    std::printf("#%11s %12s %9s %6s %5s %11s %9s %9s %8s\n", "size", "count", "type", "redop", "root", "time",
                "algbw", "busbw", "#wrong");
    std::printf("#%11s %12s %9s %6s %5s %11s %9s %9s %8s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }
  for (size_t bytes : sizes) {
    // Block collectives: size = all world blocks, count = elements per block
    // (nccl-tests' convention for allgather and friends).
    size_t count = esize ? bytes / esize / (blocky ? world : 1) : 0;
    if (!is_barrier && count == 0) continue;
    const size_t wc = world * count;
    size_t send_n = count, recv_n = count;
    if (coll == "allgather" || coll == "gather") recv_n = wc;
    if (coll == "reduce_scatter" || coll == "scatter") send_n = wc;
    if (coll == "alltoall") send_n = recv_n = wc;
    std::vector<uint8_t> send(send_n * esize), recv(recv_n * esize), want(recv_n * esize);
    for (size_t i = 0; i < send_n; i++) Store(dtype, send.data(), i, Gen(o.rank, i), GenInt(o.rank, i));
    const bool is_root = o.rank == root;
    bool expect_data = !is_barrier && !((coll == "reduce" || coll == "gather") && !is_root);
    auto from = [&](uint32_t r, size_t src_index, size_t dst_index) {
      Store(dtype, want.data(), dst_index, Gen(r, src_index), GenInt(r, src_index));
    };
    for (size_t i = 0; expect_data && i < recv_n; i++) {
      size_t blk = count ? i / count : 0, k = count ? i % count : 0;
      if (coll == "allreduce" || coll == "reduce")
        Expected(dtype, op, world, i, want.data() + i * esize);
      else if (coll == "reduce_scatter")
        Expected(dtype, op, world, o.rank * count + i, want.data() + i * esize);
      else if (coll == "broadcast")
        from(root, i, i);
      else if (coll == "allgather" || coll == "gather")
        from(static_cast<uint32_t>(blk), k, i);
      else if (coll == "alltoall")
        from(static_cast<uint32_t>(blk), o.rank * count + k, i);
      else if (coll == "scatter")
        from(root, o.rank * count + i, i);
    }
    int64_t wrong = 0;
    double total_us = 0;
    inc::Status st;
    for (int it = 0; it < warmup + iters && st.ok(); it++) {
      std::memset(recv.data(), 0xA5, recv.size());
      if (coll == "broadcast" && is_root) std::memcpy(recv.data(), send.data(), send.size());
      auto t0 = std::chrono::steady_clock::now();
      if (coll == "allreduce")
        st = comm->AllReduce(send.data(), recv.data(), count, dtype, op);
      else if (coll == "reduce")
        st = comm->Reduce(send.data(), recv.data(), count, dtype, op, root);
      else if (coll == "broadcast")
        st = comm->Broadcast(recv.data(), count, dtype, root);
      else if (coll == "allgather")
        st = comm->AllGather(send.data(), recv.data(), count, dtype);
      else if (coll == "reduce_scatter")
        st = comm->ReduceScatter(send.data(), recv.data(), count, dtype, op);
      else if (coll == "alltoall")
        st = comm->AllToAll(send.data(), recv.data(), count, dtype);
      else if (coll == "scatter")
        st = comm->Scatter(send.data(), recv.data(), count, dtype, root);
      else if (coll == "gather")
        st = comm->Gather(send.data(), recv.data(), count, dtype, root);
      else
        st = comm->Barrier();
      auto t1 = std::chrono::steady_clock::now();
      if (it >= warmup) total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      // One vectorised comparison first; element by element only to count
      // (a call per element took more CPU than the collective at large sizes).
      if (st.ok() && check && expect_data && std::memcmp(recv.data(), want.data(), recv_n * esize) != 0) {
        for (size_t i = 0; i < recv_n; i++)
          if (std::memcmp(recv.data() + i * esize, want.data() + i * esize, esize) != 0) {
            if (wrong == 0) {
              LOG_ERROR << coll << " size " << bytes << " iteration " << it << ": first wrong element " << i;
            }
            wrong++;
          }
      }
    }
    if (!st.ok()) {
      std::fprintf(stderr, "inc-perf rank %u: %s at size %zu: %s\n", o.rank, coll.c_str(), bytes,
                   st.ToString().c_str());
      rc = g_stop ? kExitSignal : kExitFailed;
      break;
    }
    if (!digest_file.empty() && expect_data) {
      uint64_t hash = 1469598103934665603ull;  // FNV-1a of the result bytes
      for (uint8_t b : recv) hash = (hash ^ b) * 1099511628211ull;
      if (FILE* f = std::fopen(digest_file.c_str(), "a")) {
        std::fprintf(f, "%zu %016" PRIx64 "\n", bytes, hash);
        std::fclose(f);
      }
    }
    my_wrong_total += wrong;
    // #wrong over all ranks, summed through the switch as well.
    int64_t global_wrong = 0;
    st = comm->AllReduce(&wrong, &global_wrong, 1, DataType::kInt64, ReduceOp::kSum);
    if (!st.ok()) {
      std::fprintf(stderr, "inc-perf rank %u: #wrong allreduce: %s\n", o.rank, st.ToString().c_str());
      rc = kExitFailed;
      break;
    }
    Row row;
    row.bytes = bytes;
    row.count = count;
    row.time_us = total_us / iters;
    row.algbw = row.time_us > 0 ? static_cast<double>(bytes) / row.time_us / 1e3 : 0;
    row.busbw = row.algbw * BusFactorOf(coll, world).factor;
    row.wrong = std::max(global_wrong, wrong);
    rows.push_back(row);
    if (print && !json) {
      std::printf("%12zu %12zu %9s %6s %5d %11.2f %9.4f %9.4f %8" PRId64 "\n", bytes, count,
                  inc::client::DataTypeName(dtype), uses_op ? inc::client::ReduceOpName(op) : "-",
                  rooted ? static_cast<int>(root) : -1, row.time_us, row.algbw, row.busbw, row.wrong);
      std::fflush(stdout);
    }
    if (row.wrong > 0 && rc == kExitOk) rc = kExitWrong;
  }
  if (my_wrong_total > 0) rc = rc == kExitOk ? kExitWrong : rc;
  auto status = comm->GetStatus();
  if (print) {
    if (json) {
      std::printf(
          "{\"collective\":\"%s\",\"dtype\":\"%s\",\"op\":\"%s\",\"root\":%u,\"world\":%u,\"iters\":%d,"
          "\"warmup\":%d,\"busbw_definition\":\"algbw x %s (nccl-tests)\",\"exit_code\":%d,\"results\":[",
          coll.c_str(), inc::client::DataTypeName(dtype), inc::client::ReduceOpName(op), root, world, iters,
          warmup, BusFactorOf(coll, world).text, rc);
      for (size_t i = 0; i < rows.size(); i++)
        std::printf(
            "%s{\"size\":%zu,\"count\":%zu,\"time_us\":%.3f,\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%" PRId64
            "}",
            i ? "," : "", rows[i].bytes, rows[i].count, rows[i].time_us, rows[i].algbw, rows[i].busbw,
            rows[i].wrong);
      std::printf("],\"status\":%s}\n", status.ToJson().c_str());
    } else {
      std::printf("# messages %" PRIu64 "  retransmissions %" PRIu64 "  tx %" PRIu64 " pkts  rx %" PRIu64
                  " pkts  rejects %zu reasons  overflow %" PRIu64 "\n",
                  status.messages, status.retransmissions, status.tx_packets, status.rx_packets,
                  status.rejects.size(), status.overflow_results);
      std::printf("# exit %d\n", rc);
    }
  }
  LOG_INFO << "status " << status.ToJson();
  {
    std::lock_guard<std::mutex> lock(g_comm_mu);
    g_comm = nullptr;
  }
  comm.reset();  // LeaveGroup
  return rc;
}
