// SPDX-License-Identifier: Apache-2.0
// mpi-allreduce-perf: MPI_Allreduce baseline with inc-perf's sizes, values,
// timing and table (see bench_common.h). One rank per worker namespace,
// launched by netns-tests/inc-mpirun; Open MPI over TCP (btl tcp,self), so
// its traffic crosses the lab's switch namespaces by kernel forwarding.
// Rank 0 prints; exit status 1 when any rank saw a wrong element.
// The C API only: Open MPI's deprecated C++ bindings do not build with -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_common.h"

namespace {

MPI_Datatype ToMpi(incbench::Dtype d) {
  switch (d) {
    case incbench::Dtype::kInt32: return MPI_INT32_T;
    case incbench::Dtype::kFloat32: return MPI_FLOAT;
    case incbench::Dtype::kInt64: return MPI_INT64_T;
    case incbench::Dtype::kFloat64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op ToMpi(incbench::Op o) {
  switch (o) {
    case incbench::Op::kSum: return MPI_SUM;
    case incbench::Op::kMin: return MPI_MIN;
    case incbench::Op::kMax: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  CLI::App app{
      "mpi-allreduce-perf: MPI_Allreduce timed like inc-perf (mean per iteration on rank 0; "
      "algbw = size/time, busbw = algbw * 2(n-1)/n). Run under mpirun / inc-mpirun."};
  std::string min_s = "8", max_s = "64M", dtype_s = "float32", op_s = "sum";
  double factor = 2;
  int iters = 20, warmup = 5;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return rc == 0 ? 0 : 2;
  }
  incbench::Dtype dtype;
  incbench::Op op;
  std::vector<size_t> sizes;
  try {
    if (!incbench::ParseDtype(dtype_s, &dtype))
      throw std::invalid_argument("unknown data type '" + dtype_s + "'");
    if (!incbench::ParseOp(op_s, &op)) throw std::invalid_argument("unknown op '" + op_s + "'");
    sizes = incbench::SizeSeries(incbench::ParseSize(min_s), incbench::ParseSize(max_s), factor);
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "mpi-allreduce-perf: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  const size_t esize = incbench::DtypeSize(dtype);
  if (rank == 0) {
    int len = 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    std::printf("# %s\n", v.substr(0, v.find('\n')).c_str());
    incbench::PrintHeader("Open MPI", dtype_s, op_s, static_cast<uint32_t>(world), iters, warmup);
  }
  int64_t my_wrong_total = 0;
  for (size_t bytes : sizes) {
    size_t count = bytes / esize;
    if (count == 0) continue;
    std::vector<uint8_t> send(count * esize), recv(count * esize), want(count * esize);
    incbench::Fill(dtype, static_cast<uint32_t>(rank), send.data(), count);
    if (check) incbench::FillExpected(dtype, op, static_cast<uint32_t>(world), want.data(), count);
    double total_us = 0;
    int64_t wrong = 0;
    for (int it = 0; it < warmup + iters; it++) {
      std::memset(recv.data(), 0xA5, recv.size());
      auto t0 = std::chrono::steady_clock::now();
      int rc = MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), ToMpi(dtype), ToMpi(op),
                             MPI_COMM_WORLD);
      auto t1 = std::chrono::steady_clock::now();
      if (rc != MPI_SUCCESS) {
        std::fprintf(stderr, "mpi-allreduce-perf rank %d: MPI_Allreduce failed (%d) at size %zu\n", rank, rc,
                     bytes);
        MPI_Abort(MPI_COMM_WORLD, 4);
      }
      if (it >= warmup) total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      if (check) wrong += incbench::CountWrong(recv.data(), want.data(), count, esize);
    }
    int64_t global_wrong = 0;
    MPI_Allreduce(&wrong, &global_wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    my_wrong_total += wrong;
    if (rank == 0)
      incbench::PrintRow(bytes, count, dtype_s, op_s, total_us / iters, static_cast<uint32_t>(world),
                         global_wrong);
  }
  int64_t all_wrong = 0;
  MPI_Allreduce(&my_wrong_total, &all_wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("# exit %d\n", all_wrong ? 1 : 0);
  MPI_Finalize();
  return all_wrong ? 1 : 0;
}
