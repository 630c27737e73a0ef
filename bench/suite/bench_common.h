// SPDX-License-Identifier: Apache-2.0
// Shared by the baseline allreduce benchmarks (Open MPI, Gloo): the same
// sizes, element values, timing and table as inc-perf
// (userspace/client/inc_perf.cc), so the suite compares like with like.
//
// Timing (as inc-perf): per size, `warmup` untimed iterations, then `iters`
// timed ones, each timed alone around the collective call with
// steady_clock; time = mean per timed iteration on rank 0. Between
// iterations (untimed) the receive buffer is reset and the result checked
// against the host-computed reference.
// algbw = size / time. busbw = algbw * 2(n-1)/n: a ring allreduce moves
// 2(n-1)/n of the buffer over each rank's link (nccl-tests' definition).
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace incbench {

enum class Dtype { kInt32, kFloat32, kInt64, kFloat64 };
enum class Op { kSum, kMin, kMax };

inline bool ParseDtype(const std::string& s, Dtype* d) {
  if (s == "int32")
    *d = Dtype::kInt32;
  else if (s == "float32")
    *d = Dtype::kFloat32;
  else if (s == "int64")
    *d = Dtype::kInt64;
  else if (s == "float64")
    *d = Dtype::kFloat64;
  else
    return false;
  return true;
}

inline bool ParseOp(const std::string& s, Op* o) {
  if (s == "sum")
    *o = Op::kSum;
  else if (s == "min")
    *o = Op::kMin;
  else if (s == "max")
    *o = Op::kMax;
  else
    return false;
  return true;
}

inline size_t DtypeSize(Dtype d) {
  return d == Dtype::kInt32 || d == Dtype::kFloat32 ? 4 : 8;
}

// Sizes: N, NK, NM or NG (powers of 1024), as inc-perf's -b/-e.
inline size_t ParseSize(const std::string& text) {
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
  else if (!suf.empty() || end == text.c_str())
    throw std::invalid_argument("bad size '" + text + "'");
  if (v < 0) throw std::invalid_argument("negative size '" + text + "'");
  return static_cast<size_t>(v * mul);
}

inline std::vector<size_t> SizeSeries(size_t min_bytes, size_t max_bytes, double factor) {
  std::vector<size_t> sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * 1.0000001;
       s *= factor) {
    sizes.push_back(static_cast<size_t>(s));
    if (s == 0) break;
  }
  return sizes;
}

// inc-perf's element values: multiples of 1/4 in [-1.75, 1.75] (float sums
// exact), integers in about [-1000, 1000].
inline double Gen(uint32_t r, uint64_t i) {
  return static_cast<double>(static_cast<int64_t>((i * 3 + r * 5) % 15) - 7) * 0.25;
}
inline int64_t GenInt(uint32_t r, uint64_t i) {
  return static_cast<int64_t>((i * 31 + r * 17) % 2001) - 1000 + static_cast<int64_t>(r) * 3;
}

inline void Store(Dtype t, void* buf, uint64_t i, double v, int64_t iv) {
  switch (t) {
    case Dtype::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(iv); break;
    case Dtype::kInt64: static_cast<int64_t*>(buf)[i] = iv * 1000003; break;
    case Dtype::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case Dtype::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}

inline void Fill(Dtype t, uint32_t rank, void* buf, size_t count) {
  for (size_t i = 0; i < count; i++) Store(t, buf, i, Gen(rank, i), GenInt(rank, i));
}

// The reduction over `world` ranks of element i, written into want[i].
inline void FillExpected(Dtype t, Op op, uint32_t world, void* want, size_t count) {
  for (size_t i = 0; i < count; i++) {
    double v = 0;
    int64_t iv = 0;
    for (uint32_t r = 0; r < world; r++) {
      double x = Gen(r, i);
      int64_t y = GenInt(r, i);
      if (r == 0 || op == Op::kSum) {
        v = r == 0 ? x : v + x;
        iv = r == 0 ? y : iv + y;
      } else if (op == Op::kMin) {
        v = std::min(v, x);
        iv = std::min(iv, y);
      } else {
        v = std::max(v, x);
        iv = std::max(iv, y);
      }
    }
    Store(t, want, i, v, iv);
  }
}

inline int64_t CountWrong(const void* got, const void* want, size_t count, size_t esize) {
  int64_t wrong = 0;
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  // One vectorised comparison first: a call per element took more CPU than
  // the collective itself at large sizes, on the cores the ranks share.
  if (std::memcmp(g, w, count * esize) == 0) return 0;
  for (size_t i = 0; i < count; i++)
    if (std::memcmp(g + i * esize, w + i * esize, esize) != 0) wrong++;
  return wrong;
}

// Ring busbw factor 2(n-1)/n (1 for a single rank, which moves nothing).
inline double RingBusFactor(uint32_t world) {
  return world > 1 ? 2.0 * (world - 1) / world : 1.0;
}

inline void PrintHeader(const char* system, const std::string& dtype, const std::string& op, uint32_t world,
                        int iters, int warmup) {
  std::printf(
      "# %s allreduce  dtype %s  op %s  root 0  world %u  iters %d  warmup %d  (busbw = algbw * 2(n-1)/n)\n",
      system, dtype.c_str(), op.c_str(), world, iters, warmup);
  std::printf("#%11s %12s %9s %6s %5s %11s %9s %9s %8s\n", "size", "count", "type", "redop", "root", "time",
              "algbw", "busbw", "#wrong");
  std::printf("#%11s %12s %9s %6s %5s %11s %9s %9s %8s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "");
  std::fflush(stdout);
}

inline void PrintRow(size_t bytes, size_t count, const std::string& dtype, const std::string& op,
                     double time_us, uint32_t world, int64_t wrong) {
  double algbw = time_us > 0 ? static_cast<double>(bytes) / time_us / 1e3 : 0;
  std::printf("%12zu %12zu %9s %6s %5d %11.2f %9.4f %9.4f %8" PRId64 "\n", bytes, count, dtype.c_str(),
              op.c_str(), -1, time_us, algbw, algbw * RingBusFactor(world), wrong);
  std::fflush(stdout);
}

}  // namespace incbench
