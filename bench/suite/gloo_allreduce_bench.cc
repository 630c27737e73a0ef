// SPDX-License-Identifier: Apache-2.0
// gloo-allreduce-perf: Gloo ring allreduce baseline (gloo::allreduce with
// the RING algorithm over Gloo's TCP transport) with inc-perf's sizes,
// values, timing and table (see bench_common.h). One process per worker
// namespace (`inclab run`); ranks meet through a gloo FileStore in a
// directory every namespace sees (/tmp is shared). Rank 0 prints; exit
// status 1 when any rank saw a wrong element, 3 when the mesh cannot form.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench_common.h"

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn Pick(incbench::Op op) {
  switch (op) {
    case incbench::Op::kSum: return &gloo::sum<T>;
    case incbench::Op::kMin: return &gloo::min<T>;
    case incbench::Op::kMax: return &gloo::max<T>;
  }
  return nullptr;
}

// One ring allreduce of `count` elements of type T.
template <typename T>
void RingAllreduceOf(const std::shared_ptr<gloo::Context>& ctx, void* send, void* recv, size_t count,
                     incbench::Op op, uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setInput(static_cast<T*>(send), count);
  opts.setOutput(static_cast<T*>(recv), count);
  opts.setReduceFunction(Pick<T>(op));
  opts.setTag(tag);
  gloo::allreduce(opts);
}

void RingAllreduce(const std::shared_ptr<gloo::Context>& ctx, void* send, void* recv, size_t count,
                   incbench::Dtype d, incbench::Op op, uint32_t tag) {
  switch (d) {
    case incbench::Dtype::kInt32: return RingAllreduceOf<int32_t>(ctx, send, recv, count, op, tag);
    case incbench::Dtype::kFloat32: return RingAllreduceOf<float>(ctx, send, recv, count, op, tag);
    case incbench::Dtype::kInt64: return RingAllreduceOf<int64_t>(ctx, send, recv, count, op, tag);
    case incbench::Dtype::kFloat64: return RingAllreduceOf<double>(ctx, send, recv, count, op, tag);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gloo-allreduce-perf: Gloo ring allreduce over TCP, timed like inc-perf (mean per iteration on rank 0; "
      "algbw = size/time, busbw = algbw * 2(n-1)/n). Run one process per rank, e.g. with `inclab run`."};
  std::string min_s = "8", max_s = "64M", dtype_s = "float32", op_s = "sum", store_dir, iface = "eth0";
  double factor = 2;
  int iters = 20, warmup = 5, timeout_s = 120;
  uint32_t rank = 0, world = 0;
  bool check = true;
  app.add_option("-b,--minbytes", min_s, "smallest size in bytes (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_s, "largest size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "size multiplier between steps")
      ->capture_default_str()
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-d,--datatype", dtype_s, "int32 float32 int64 float64")->capture_default_str();
  app.add_option("-o,--op", op_s, "sum min max")->capture_default_str();
  app.add_option("-n,--iters", iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-c,--check", check, "check results (1) or not (0)")->capture_default_str();
  app.add_option("--rank", rank, "this rank")->required();
  app.add_option("--world", world, "number of ranks")->required()->check(CLI::Range(1u, 1024u));
  app.add_option("--store", store_dir, "rendezvous directory shared by all ranks (fresh per run)")
      ->required();
  app.add_option("--iface", iface, "interface the TCP transport binds to")->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "rendezvous and per-collective timeout")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  incbench::Dtype dtype;
  incbench::Op op;
  std::vector<size_t> sizes;
  try {
    if (rank >= world) throw std::invalid_argument("rank must be < world");
    if (!incbench::ParseDtype(dtype_s, &dtype))
      throw std::invalid_argument("unknown data type '" + dtype_s + "'");
    if (!incbench::ParseOp(op_s, &op)) throw std::invalid_argument("unknown op '" + op_s + "'");
    sizes = incbench::SizeSeries(incbench::ParseSize(min_s), incbench::ParseSize(max_s), factor);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-allreduce-perf: %s\n", e.what());
    return 2;
  }
  std::shared_ptr<gloo::Context> ctx;
  try {
    gloo::transport::tcp::attr attr;
    attr.iface = iface;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto rctx = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(rank), static_cast<int>(world));
    rctx->setTimeout(std::chrono::seconds(timeout_s));
    rctx->connectFullMesh(store, dev);
    ctx = rctx;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-allreduce-perf rank %u: rendezvous in %s over %s failed: %s\n", rank,
                 store_dir.c_str(), iface.c_str(), e.what());
    return 3;
  }
  const size_t esize = incbench::DtypeSize(dtype);
  if (rank == 0) incbench::PrintHeader("Gloo ring", dtype_s, op_s, world, iters, warmup);
  int64_t my_wrong_total = 0;
  uint32_t tag = 1;
  try {
    for (size_t bytes : sizes) {
      size_t count = bytes / esize;
      if (count == 0) continue;
      std::vector<uint8_t> send(count * esize), recv(count * esize), want(count * esize);
      incbench::Fill(dtype, rank, send.data(), count);
      if (check) incbench::FillExpected(dtype, op, world, want.data(), count);
      double total_us = 0;
      int64_t wrong = 0;
      for (int it = 0; it < warmup + iters; it++) {
        std::memset(recv.data(), 0xA5, recv.size());
        auto t0 = std::chrono::steady_clock::now();
        RingAllreduce(ctx, send.data(), recv.data(), count, dtype, op, tag++);
        auto t1 = std::chrono::steady_clock::now();
        if (it >= warmup) total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
        if (check) wrong += incbench::CountWrong(recv.data(), want.data(), count, esize);
      }
      int64_t global_wrong = 0;
      RingAllreduceOf<int64_t>(ctx, &wrong, &global_wrong, 1, incbench::Op::kSum, tag++);
      my_wrong_total += wrong;
      if (rank == 0) incbench::PrintRow(bytes, count, dtype_s, op_s, total_us / iters, world, global_wrong);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-allreduce-perf rank %u: %s\n", rank, e.what());
    return 4;
  }
  if (rank == 0) std::printf("# exit %d\n", my_wrong_total ? 1 : 0);
  return my_wrong_total ? 1 : 0;
}
