// SPDX-License-Identifier: Apache-2.0
// inc-numerics-check: the float-sum contract (client/float_sum.h) through
// real switches. Every rank of a job runs it; each makes the inputs of
// every rank from their rank numbers (float_contract.h: randn, 1e-6..1e6,
// inf/NaN, cancellation, tiny values), runs AllReduce and Reduce SUM for
// float32, float64, float16 and bfloat16 at several sizes, checks every
// element it gets against the exact sum (IEEE specials, the error bound),
// and checks that every rank got the same bits (a digest's MIN and MAX over
// the ranks, through the switch). Prints one JSON line per case and a
// summary; exit status 0 all right, 1 a wrong element or differing ranks,
// 2 usage, 3 setup failed, 4 a collective failed.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "client/communicator.h"
#include "common/log.h"
#include "float_contract.h"

using namespace inc::client;

namespace {

uint64_t Digest(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inc-numerics-check: float sums through the switches against the exact sums"};
  CommunicatorOptions o;
  std::string log_s = "warn", kinds_s = "all";
  std::vector<uint64_t> sizes = {3, 1000, 50000};
  uint32_t root = 1;
  app.add_option("--am", o.am_address, "aggregation manager host:port")->required();
  app.add_option("--job", o.job_id, "job id (the same on every rank)")->required();
  app.add_option("--rank", o.rank, "this rank")->required();
  app.add_option("--world", o.world_size, "number of ranks")->required();
  app.add_option("--iface", o.iface, "interface toward the attachment switch")->required();
  app.add_option("--transport", o.transport, "auto xdp afxdp verbs")->capture_default_str();
  app.add_option("--float32-lanes", o.float32_lanes,
                 "float32 sums' lanes: auto, 32 or 64 (default: INCIN_FLOAT32_LANES)")
      ->check(CLI::IsMember({"auto", "32", "64"}));
  app.add_option("--sizes", sizes, "element counts per case")->capture_default_str();
  app.add_option("--root", root, "root rank of the Reduce cases")->capture_default_str();
  app.add_option("--kinds", kinds_s, "all, or a comma list of randn,wide,specials,cancel,tiny,zeros")
      ->capture_default_str();
  app.add_option("--log-level", log_s, "debug info warn error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  inc::LogLevel level;
  if (!inc::ParseLogLevel(log_s, &level)) return 2;
  inc::SetLogLevel(level);
  if (root >= o.world_size) {
    std::fprintf(stderr, "--root %u must be below --world %u\n", root, o.world_size);
    return 2;
  }
  auto comm = Communicator::Create(o);
  if (!comm.ok()) {
    std::fprintf(stderr, "inc-numerics-check rank %u: %s\n", o.rank, comm.status().ToString().c_str());
    return 3;
  }
  const uint32_t world = (*comm)->world_size(), me = (*comm)->rank();
  const Kind all_kinds[] = {Kind::kRandn,  Kind::kWide, Kind::kSpecials,
                            Kind::kCancel, Kind::kTiny, Kind::kZeros};
  const char* kind_keys[] = {"randn", "wide", "specials", "cancel", "tiny", "zeros"};
  int rc = 0;
  size_t total = 0, violations = 0, specials = 0, differing = 0;
  for (size_t k = 0; k < std::size(all_kinds); k++) {
    if (kinds_s != "all" &&
        ("," + kinds_s + ",").find("," + std::string(kind_keys[k]) + ",") == std::string::npos)
      continue;
    for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
      for (uint64_t n : sizes) {
        for (int variant = 0; variant < 3; variant++) {  // AllReduce, AllReduce in place, Reduce
          const bool rooted = variant == 2, in_place = variant == 1;
          std::vector<std::vector<double>> in(world);
          for (uint32_t r = 0; r < world; r++) {
            in[r] = Inputs(all_kinds[k], r, world, n);
            for (double& x : in[r]) x = Narrow(t, x);
          }
          const size_t es = DataTypeSize(t);
          std::vector<uint8_t> send(n * es), recv(n * es, 0);
          for (uint64_t i = 0; i < n; i++) Store(t, in[me][i], &send[i * es]);
          const CommunicatorStatus before = (*comm)->GetStatus();
          if (in_place) recv = send;
          inc::Status st = rooted     ? (*comm)->Reduce(send.data(), recv.data(), n, t, ReduceOp::kSum, root)
                           : in_place ? (*comm)->AllReduce(recv.data(), recv.data(), n, t, ReduceOp::kSum)
                                      : (*comm)->AllReduce(send.data(), recv.data(), n, t, ReduceOp::kSum);
          if (!st.ok()) {
            std::fprintf(stderr, "inc-numerics-check rank %u: %s %s %" PRIu64 ": %s\n", me,
                         KindName(all_kinds[k]), DataTypeName(t), n, st.ToString().c_str());
            return 4;
          }
          const CommunicatorStatus after = (*comm)->GetStatus();
          ContractOutcome out;
          const bool mine = !rooted || me == root;
          if (mine) {
            std::vector<double> xs(world);
            for (uint64_t i = 0; i < n; i++) {
              for (uint32_t r = 0; r < world; r++) xs[r] = in[r][i];
              out.Add(CheckElement(t, xs, Load(t, &recv[i * es])), i);
            }
          }
          // Every rank that got the result holds the same bits: MIN and MAX
          // of the digest over the ranks agree (non-roots of a Reduce send
          // the root's neutral values).
          int64_t d = mine ? static_cast<int64_t>(Digest(recv) >> 1) : 0, dmin = 0, dmax = 0;
          int64_t lo_in = mine ? d : INT64_MAX, hi_in = mine ? d : INT64_MIN;
          st = (*comm)->AllReduce(&lo_in, &dmin, 1, DataType::kInt64, ReduceOp::kMin);
          if (st.ok()) st = (*comm)->AllReduce(&hi_in, &dmax, 1, DataType::kInt64, ReduceOp::kMax);
          if (!st.ok()) {
            std::fprintf(stderr, "inc-numerics-check rank %u: digest: %s\n", me, st.ToString().c_str());
            return 4;
          }
          const bool same = dmin == dmax;
          total += out.elements;
          violations += out.violations;
          specials += out.special_mismatches;
          if (!same) differing++;
          if (out.violations || out.special_mismatches || !same) rc = 1;
          if (mine && (me == 0 || me == root))
            std::printf("{\"case\":\"%s\",\"dtype\":\"%s\",\"count\":%" PRIu64
                        ",\"collective\":\"%s\",\"rank\":%u,\"elements\":%zu,\"correctly_rounded\":%zu,"
                        "\"violations\":%zu,"
                        "\"special_mismatches\":%zu,\"ranks_agree\":%s,\"gathered_blocks\":%" PRIu64
                        ",\"uncertified_blocks\":%" PRIu64 "%s%s%s}\n",
                        kind_keys[k], DataTypeName(t), n,
                        rooted ? "reduce" : (in_place ? "allreduce_in_place" : "allreduce"), me, out.elements,
                        out.correctly_rounded, out.violations, out.special_mismatches,
                        same ? "true" : "false", after.gathered_blocks - before.gathered_blocks,
                        after.uncertified_blocks - before.uncertified_blocks,
                        out.first_violation.empty() ? "" : ",\"first\":\"", out.first_violation.c_str(),
                        out.first_violation.empty() ? "" : "\"");
        }
      }
    }
  }
  std::printf(
      "{\"summary\":{\"rank\":%u,\"world\":%u,\"elements\":%zu,\"violations\":%zu,\"special_mismatches\":%zu,"
      "\"cases_with_differing_ranks\":%zu,\"status\":%s}}\n",
      me, world, total, violations, specials, differing, (*comm)->GetStatus().ToJson().c_str());
  std::fflush(stdout);
  return rc;
}
