// SPDX-License-Identifier: Apache-2.0
// libincmpi without a running MPI: environment parsing, the fallback
// decision table (every reason and every offloaded type/op), datatype
// signatures and layouts, the summary's JSON, and the fallback log both
// front ends share.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/fallback_log.h"
#include "mpi/stats.h"

namespace inc::mpi {
namespace {

Expected<Config> Parse(const std::map<std::string, std::string>& env) {
  return ParseConfig([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(IncMpiConfig, DefaultsWhenNothingIsSet) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enable);
  EXPECT_EQ(c->min_bytes, 0u);
  EXPECT_EQ(c->max_bytes, 0u);
  EXPECT_EQ(c->am, "");
  EXPECT_EQ(c->transport, "auto");
  EXPECT_EQ(c->join_timeout_ms, 30000u);
  EXPECT_EQ(c->op_timeout_ms, 0u);  // wait for a late rank as MPI does
  EXPECT_TRUE(c->float_sum);
  EXPECT_EQ(c->log_level, LogLevel::kWarn);
  EXPECT_EQ(c->fallback_log_level, LogLevel::kWarn);
  EXPECT_FALSE(c->fallback_log_all);
  EXPECT_EQ(c->summary, SummaryMode::kOff);
}

TEST(IncMpiConfig, EmptyValueMeansDefault) {
  auto c = Parse({{"INCIN_MPI_MIN_BYTES", ""}, {"INCIN_MPI_ENABLE", ""}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enable);
  EXPECT_EQ(c->min_bytes, 0u);
}

TEST(IncMpiConfig, ParsesEveryVariable) {
  auto c = Parse({{"INCIN_MPI_ENABLE", "0"},
                  {"INCIN_MPI_MIN_BYTES", "64K"},
                  {"INCIN_MPI_MAX_BYTES", "4M"},
                  {"INCIN_AM", "172.31.0.1:50051"},
                  {"INCIN_IFACE", "eth0"},
                  {"INCIN_TRANSPORT", "afxdp"},
                  {"INCIN_JOB_ID", "job7"},
                  {"INCIN_JOIN_TIMEOUT_MS", "2500"},
                  {"INCIN_OP_TIMEOUT_MS", "120000"},
                  {"INCIN_MPI_FLOAT_SUM", "fallback"},
                  {"INCIN_MPI_REDUCE_MODE", "allreduce"},
                  {"INCIN_MPI_BROADCAST_MODE", "native"},
                  {"INCIN_MPI_LOG_LEVEL", "debug"},
                  {"INCIN_MPI_FALLBACK_LOG_LEVEL", "info"},
                  {"INCIN_MPI_FALLBACK_LOG", "all"},
                  {"INCIN_MPI_SUMMARY", "all"},
                  {"INCIN_MPI_SUMMARY_JSON", "/tmp/s-%r.json"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->enable);
  EXPECT_EQ(c->min_bytes, 65536u);
  EXPECT_EQ(c->max_bytes, 4u << 20);
  EXPECT_EQ(c->am, "172.31.0.1:50051");
  EXPECT_EQ(c->iface, "eth0");
  EXPECT_EQ(c->job_id, "job7");
  EXPECT_EQ(c->join_timeout_ms, 2500u);
  EXPECT_EQ(c->op_timeout_ms, 120000u);
  EXPECT_FALSE(c->float_sum);
  EXPECT_EQ(c->reduce_mode, "allreduce");
  EXPECT_EQ(c->broadcast_mode, "native");
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->fallback_log_level, LogLevel::kInfo);
  EXPECT_TRUE(c->fallback_log_all);
  EXPECT_EQ(c->summary, SummaryMode::kAll);
  EXPECT_EQ(c->summary_json, "/tmp/s-%r.json");
}

TEST(IncMpiConfig, SizeSuffixes) {
  EXPECT_EQ(Parse({{"INCIN_MPI_MIN_BYTES", "512"}})->min_bytes, 512u);
  EXPECT_EQ(Parse({{"INCIN_MPI_MIN_BYTES", "2M"}})->min_bytes, 2u << 20);
  EXPECT_EQ(Parse({{"INCIN_MPI_MIN_BYTES", "1G"}})->min_bytes, 1u << 30);
  EXPECT_EQ(Parse({{"INCIN_MPI_SUMMARY", "1"}})->summary, SummaryMode::kRank0);
  EXPECT_EQ(Parse({{"INCIN_MPI_SUMMARY", "off"}})->summary, SummaryMode::kOff);
}

TEST(IncMpiConfig, BadValuesAreInvalidArgumentNamingTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"INCIN_MPI_ENABLE", "maybe"}},
      {{"INCIN_MPI_MIN_BYTES", "-1"}},
      {{"INCIN_MPI_MIN_BYTES", "12X"}},
      {{"INCIN_MPI_MIN_BYTES", "abc"}},
      {{"INCIN_MPI_MIN_BYTES", "99999999G"}},
      {{"INCIN_AM", "no-port"}},
      {{"INCIN_JOIN_TIMEOUT_MS", "0"}},
      {{"INCIN_OP_TIMEOUT_MS", "soon"}},
      {{"INCIN_OP_TIMEOUT_MS", "5000000000"}},
      {{"INCIN_MPI_FLOAT_SUM", "sometimes"}},
      {{"INCIN_MPI_REDUCE_MODE", "ring"}},
      {{"INCIN_MPI_BROADCAST_MODE", "tree"}},
      {{"INCIN_MPI_LOG_LEVEL", "loud"}},
      {{"INCIN_MPI_FALLBACK_LOG_LEVEL", "x"}},
      {{"INCIN_MPI_FALLBACK_LOG", "some"}},
      {{"INCIN_MPI_SUMMARY", "2"}},
      {{"INCIN_JOB_ID", std::string(101, 'j')}},
      {{"INCIN_MPI_MAX_BYTES", "1x"}},
      {{"INCIN_MPI_MIN_BYTES", "1M"}, {"INCIN_MPI_MAX_BYTES", "64K"}},
  };
  for (const auto& env : bad) {
    auto c = Parse(env);
    const std::string& name = env.begin()->first == "INCIN_MPI_MAX_BYTES" || env.size() == 1
                                  ? env.begin()->first
                                  : std::string("INCIN_MPI_MAX_BYTES");
    ASSERT_FALSE(c.ok()) << name << "=" << env.begin()->second;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_NE(c.status().message().find(name), std::string::npos) << c.status().message();
  }
}

TEST(IncMpiConfig, UnknownIncmpiNamesAreReported) {
  char a[] = "INCIN_MPI_MIN_BYTE=4";
  char b[] = "INCIN_AM=x:1";
  char c[] = "PATH=/bin";
  char* env[] = {a, b, c, nullptr};
  auto unknown = UnknownEnvNames(env);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "INCIN_MPI_MIN_BYTE");
}

// The previous release's names still work, each with one deprecation
// warning naming the new name; the new name wins when both are set.
TEST(IncMpiConfig, OldNamesWorkWithOneWarningAndTheNewNameWins) {
  const std::map<std::string, std::string> env = {{"INCMPI_AM", "10.0.0.9:1"},
                                                  {"INCMPI_MIN_BYTES", "2K"},
                                                  {"INCIN_MPI_MIN_BYTES", "1K"},
                                                  {"INCMPI_ENABLE", "0"}};
  std::vector<std::string> warnings;
  auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  settings::Reader reader(lookup, [&](const std::string& w) { warnings.push_back(w); });
  auto c = ParseConfig(reader);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->am, "10.0.0.9:1");
  EXPECT_EQ(c->min_bytes, 1024u) << "INCIN_MPI_MIN_BYTES wins over INCMPI_MIN_BYTES";
  EXPECT_FALSE(c->enable);
  ASSERT_TRUE(ParseConfig(reader).ok());  // read again: no new warnings
  ASSERT_EQ(warnings.size(), 3u);
  std::string all;
  for (const std::string& w : warnings) all += w + "\n";
  EXPECT_NE(all.find("INCMPI_AM is deprecated, use INCIN_AM"), std::string::npos) << all;
  EXPECT_NE(all.find("INCMPI_ENABLE is deprecated, use INCIN_MPI_ENABLE"), std::string::npos) << all;
  EXPECT_NE(all.find("INCMPI_MIN_BYTES and INCIN_MPI_MIN_BYTES are both set: INCIN_MPI_MIN_BYTES wins"),
            std::string::npos)
      << all;
}

TEST(IncMpiConfig, BadValueUnderAnOldNameNamesBothNames) {
  auto c = Parse({{"INCMPI_MIN_BYTES", "lots"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(
      c.status().message(),
      "INCMPI_MIN_BYTES (the old name of INCIN_MPI_MIN_BYTES)='lots': expected a number with an optional "
      "K, M or G suffix");
  EXPECT_EQ(Parse({{"INCIN_REQUIRE_OFFLOAD", "please"}}).status().message(),
            "INCIN_REQUIRE_OFFLOAD='please': expected 0|1|true|false|yes|no|on|off");
}

TEST(IncMpiConfig, OpTimeoutZeroMeansNoLimit) {
  EXPECT_EQ(Parse({{"INCIN_OP_TIMEOUT_MS", "0"}})->op_timeout_ms, 0u);
  EXPECT_EQ(Parse({{"INCIN_OP_TIMEOUT_MS", "4294967295"}})->op_timeout_ms, 4294967295u);
}

// The ranks compare one fingerprint: every setting that decides a path or
// libinc's protocol must change it, the others (each rank's own interface,
// logging, timeouts) must not.
TEST(IncMpiConfig, AgreementFingerprintCoversEveryDecidingSetting) {
  const Config base = *Parse({});
  const uint64_t fp = AgreementFingerprint(base, true, false);
  const std::map<std::string, std::string> deciding[] = {
      {{"INCIN_MPI_ENABLE", "0"}},           {{"INCIN_MPI_MIN_BYTES", "8"}},
      {{"INCIN_MPI_MAX_BYTES", "1M"}},       {{"INCIN_MPI_FLOAT_SUM", "fallback"}},
      {{"INCIN_MPI_REDUCE_MODE", "native"}}, {{"INCIN_MPI_BROADCAST_MODE", "native"}},
      {{"INCIN_REQUIRE_OFFLOAD", "1"}},
  };
  for (const auto& env : deciding)
    EXPECT_NE(AgreementFingerprint(*Parse(env), true, false), fp) << env.begin()->first;
  const std::map<std::string, std::string> local[] = {
      {{"INCIN_IFACE", "eth1"}},         {{"INCIN_MPI_LOG_LEVEL", "debug"}},  {{"INCIN_MPI_SUMMARY", "1"}},
      {{"INCIN_OP_TIMEOUT_MS", "1000"}}, {{"INCIN_JOIN_TIMEOUT_MS", "5"}},    {{"INCIN_TRANSPORT", "afxdp"}},
      {{"INCIN_AM", "10.0.0.1:1"}},      {{"INCIN_MPI_FALLBACK_LOG", "all"}},
  };
  for (const auto& env : local)
    EXPECT_EQ(AgreementFingerprint(*Parse(env), true, false), fp) << env.begin()->first;
  EXPECT_NE(AgreementFingerprint(base, false, false), fp);  // a rank whose settings did not parse
  EXPECT_NE(AgreementFingerprint(base, true, true), fp);    // MPI_THREAD_MULTIPLE on one rank only
}

TEST(IncMpiConfig, FingerprintsAgreeOnlyWhenAllAreEqual) {
  // {min(fp), min(~fp)} as MPI_MIN over the ranks gives them.
  auto agree = [](std::vector<uint64_t> fps) {
    uint64_t min_fp = ~0ull, min_not = ~0ull;
    for (uint64_t f : fps) {
      min_fp = std::min(min_fp, f);
      min_not = std::min(min_not, ~f);
    }
    return FingerprintsAgree(min_fp, min_not);
  };
  EXPECT_TRUE(agree({7, 7, 7, 7}));
  EXPECT_TRUE(agree({0, 0}));
  EXPECT_TRUE(agree({~0ull, ~0ull}));
  EXPECT_FALSE(agree({7, 7, 8, 7}));
  EXPECT_FALSE(agree({0, ~0ull}));
}

TEST(IncMpiConfig, SummaryPathPerRank) {
  EXPECT_EQ(SummaryPathForRank("/tmp/s-%r.json", 3), "/tmp/s-3.json");
  EXPECT_EQ(SummaryPathForRank("/tmp/s.json", 0), "/tmp/s.json");
  EXPECT_EQ(SummaryPathForRank("/tmp/s.json", 1), "");
  EXPECT_EQ(SummaryPathForRank("", 0), "");
}

Request Reduction(Call call, Elem elem, OpKind op, uint64_t count, uint64_t elem_size) {
  Request q;
  q.call = call;
  q.elem = elem;
  q.op = op;
  q.bytes = count * elem_size;
  return q;
}

TEST(IncMpiDecision, OffloadsEverySupportedTypeAndOp) {
  Config c;
  struct Case {
    Elem elem;
    uint64_t size;
    OpKind op;
    client::DataType want;
  };
  const Case cases[] = {
      {Elem::kInt32, 4, OpKind::kSum, client::DataType::kInt32},
      {Elem::kInt32, 4, OpKind::kMin, client::DataType::kInt32},
      {Elem::kInt32, 4, OpKind::kMax, client::DataType::kInt32},
      {Elem::kInt64, 8, OpKind::kSum, client::DataType::kInt64},
      {Elem::kInt64, 8, OpKind::kMax, client::DataType::kInt64},
      {Elem::kUInt32, 4, OpKind::kSum, client::DataType::kInt32},
      {Elem::kUInt64, 8, OpKind::kSum, client::DataType::kInt64},
      {Elem::kFloat32, 4, OpKind::kSum, client::DataType::kFloat32},
      {Elem::kFloat32, 4, OpKind::kMin, client::DataType::kFloat32},
      {Elem::kFloat64, 8, OpKind::kSum, client::DataType::kFloat64},
      {Elem::kFloat64, 8, OpKind::kMax, client::DataType::kFloat64},
      {Elem::kInt32, 4, OpKind::kBand, client::DataType::kInt32},
      {Elem::kUInt32, 4, OpKind::kBor, client::DataType::kInt32},
      {Elem::kUInt64, 8, OpKind::kBxor, client::DataType::kInt64},
      {Elem::kInt64, 8, OpKind::kBand, client::DataType::kInt64},
  };
  for (Call call : {Call::kAllreduce, Call::kReduce, Call::kReduceScatterBlock}) {
    for (const Case& k : cases) {
      Decision d = Decide(c, Reduction(call, k.elem, k.op, 10, k.size));
      EXPECT_TRUE(d.offload) << CallName(call) << " " << ReasonName(d.reason);
      EXPECT_EQ(d.dtype, k.want);
    }
  }
  Decision d = Decide(c, Reduction(Call::kAllreduce, Elem::kInt64, OpKind::kMin, 3, 8));
  EXPECT_EQ(d.op, client::ReduceOp::kMin);
  d = Decide(c, Reduction(Call::kAllreduce, Elem::kInt64, OpKind::kMax, 3, 8));
  EXPECT_EQ(d.op, client::ReduceOp::kMax);
  const std::pair<OpKind, client::ReduceOp> bitwise[] = {{OpKind::kBand, client::ReduceOp::kBand},
                                                         {OpKind::kBor, client::ReduceOp::kBor},
                                                         {OpKind::kBxor, client::ReduceOp::kBxor}};
  for (const auto& [kind, op] : bitwise)
    EXPECT_EQ(Decide(c, Reduction(Call::kAllreduce, Elem::kUInt32, kind, 3, 4)).op, op);
}

TEST(IncMpiDecision, EachFallbackReason) {
  Config c;
  c.min_bytes = 64;
  struct Case {
    const char* what;
    Request q;
    Reason want;
  };
  auto R = [](Call call, Elem e, OpKind op, uint64_t count, uint64_t size) {
    return Reduction(call, e, op, count, size);
  };
  Request invalid = R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 100, 4);
  invalid.valid = false;
  Request subcomm = R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 100, 4);
  subcomm.comm_reason = Reason::kSubcomm;
  const Case cases[] = {
      {"user op", R(Call::kAllreduce, Elem::kInt32, OpKind::kUser, 100, 4), Reason::kUserOp},
      {"MPI_PROD", R(Call::kReduce, Elem::kFloat64, OpKind::kOtherPredefined, 100, 8),
       Reason::kUnsupportedOp},
      {"MPI_OP_NULL", R(Call::kReduce, Elem::kFloat64, OpKind::kNone, 100, 8), Reason::kUnsupportedOp},
      {"short", R(Call::kAllreduce, Elem::kBytes, OpKind::kSum, 100, 2), Reason::kUnsupportedDtype},
      {"unsigned min", R(Call::kAllreduce, Elem::kUInt32, OpKind::kMin, 100, 4),
       Reason::kUnsupportedOpForDtype},
      {"uint64 max", R(Call::kReduceScatterBlock, Elem::kUInt64, OpKind::kMax, 100, 8),
       Reason::kUnsupportedOpForDtype},
      {"float band", R(Call::kAllreduce, Elem::kFloat32, OpKind::kBand, 100, 4),
       Reason::kUnsupportedOpForDtype},
      {"double bxor", R(Call::kReduce, Elem::kFloat64, OpKind::kBxor, 100, 8),
       Reason::kUnsupportedOpForDtype},
      {"small", R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 15, 4), Reason::kBelowMinBytes},
      {"small bcast", R(Call::kBcast, Elem::kBytes, OpKind::kNone, 63, 1), Reason::kBelowMinBytes},
      {"count 0", R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 0, 4), Reason::kEmpty},
      {"struct of int and double", R(Call::kAllreduce, Elem::kMixed, OpKind::kSum, 10, 12),
       Reason::kNoncontiguousDtype},
      {"null handle", invalid, Reason::kInvalidArgs},
      {"split comm", subcomm, Reason::kSubcomm},
  };
  for (const Case& k : cases) {
    Decision d = Decide(c, k.q);
    EXPECT_FALSE(d.offload) << k.what;
    EXPECT_EQ(d.reason, k.want) << k.what << ": got " << ReasonName(d.reason);
  }
  c.max_bytes = 4096;
  EXPECT_EQ(Decide(c, R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 1025, 4)).reason,
            Reason::kAboveMaxBytes);
  EXPECT_TRUE(Decide(c, R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 1024, 4)).offload)
      << "4096 B = maximum";
  EXPECT_TRUE(Decide(c, R(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 16, 4)).offload) << "64 B = minimum";
}

// INCIN_REQUIRE_OFFLOAD: every reason to fall back becomes an error, except
// those with nothing to offload or arguments MPI itself rejects.
TEST(IncMpiDecision, RequireOffloadTurnsFallbacksIntoErrors) {
  struct Case {
    Reason reason;
    bool fails;
  };
  const Case cases[] = {
      {Reason::kDisabled, true},         {Reason::kBadConfig, true},
      {Reason::kNoGroup, true},          {Reason::kGroupFailed, true},
      {Reason::kIntercomm, true},        {Reason::kSubcomm, true},
      {Reason::kThreadMultiple, true},   {Reason::kNoncontiguousDtype, true},
      {Reason::kUnsupportedDtype, true}, {Reason::kUserOp, true},
      {Reason::kUnsupportedOp, true},    {Reason::kUnsupportedOpForDtype, true},
      {Reason::kFloatSumDisabled, true}, {Reason::kBelowMinBytes, true},
      {Reason::kAboveMaxBytes, true},    {Reason::kSwitchUnsupported, true},
      {Reason::kItemTooLarge, true},     {Reason::kNone, false},
      {Reason::kEmpty, false},           {Reason::kSingleRank, false},
      {Reason::kInvalidArgs, false},
  };
  Config required;
  required.require_offload = true;
  const Config optional;
  for (const Case& k : cases) {
    EXPECT_EQ(RequiredOffloadFails(required, k.reason), k.fails) << ReasonName(k.reason);
    EXPECT_FALSE(RequiredOffloadFails(optional, k.reason)) << ReasonName(k.reason);
  }
  // Through Decide: a user op fails when required, falls back otherwise;
  // an eligible call is offloaded either way; count 0 never fails.
  const Request user_op = Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kUser, 100, 4);
  Decision d = Decide(required, user_op);
  EXPECT_FALSE(d.offload);
  EXPECT_TRUE(d.fail);
  EXPECT_EQ(d.reason, Reason::kUserOp);
  EXPECT_FALSE(Decide(optional, user_op).fail);
  EXPECT_TRUE(Decide(required, Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 100, 4)).offload);
  EXPECT_FALSE(Decide(required, Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 0, 4)).fail);
  Request no_group = Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 100, 4);
  no_group.comm_reason = Reason::kNoGroup;
  EXPECT_TRUE(Decide(required, no_group).fail);
}

TEST(IncMpiDecision, BroadcastAndAllgatherMoveAnySignatureAsBytes) {
  Config c;
  for (Call call : {Call::kBcast, Call::kAllgather}) {
    for (Elem e : {Elem::kBytes, Elem::kMixed, Elem::kInt32, Elem::kFloat64}) {
      Decision d = Decide(c, Reduction(call, e, OpKind::kNone, 3, 1));
      EXPECT_TRUE(d.offload) << CallName(call) << ": " << ReasonName(d.reason);
    }
  }
}

TEST(IncMpiDecision, ReductionsOnDerivedTypesAreNeverEmpty) {
  // A vector of 10 ints is 40 bytes of int32 elements whatever its layout;
  // that used to be counted as 0 elements and logged reason=empty.
  Config c;
  struct Case {
    const char* what;
    Elem elem;
    Reason want;  // kNone = offloaded
  };
  const Case cases[] = {
      {"vector of ints", Elem::kInt32, Reason::kNone},
      {"indexed doubles", Elem::kFloat64, Reason::kNone},
      {"struct of an int and a double", Elem::kMixed, Reason::kNoncontiguousDtype},
      {"struct of shorts", Elem::kBytes, Reason::kUnsupportedDtype},
  };
  for (Call call : {Call::kAllreduce, Call::kReduce, Call::kReduceScatterBlock}) {
    for (const Case& k : cases) {
      Decision d = Decide(c, Reduction(call, k.elem, OpKind::kSum, 40, 1));
      EXPECT_EQ(d.offload, k.want == Reason::kNone) << CallName(call) << " " << k.what;
      EXPECT_EQ(d.reason, k.want) << CallName(call) << " " << k.what << ": got " << ReasonName(d.reason);
    }
  }
}

TEST(IncMpiDecision, BarrierIgnoresSizeButNotTheGroup) {
  Config c;
  c.min_bytes = 1 << 20;
  Request q;
  q.call = Call::kBarrier;
  EXPECT_TRUE(Decide(c, q).offload);
  q.comm_reason = Reason::kNoGroup;
  EXPECT_EQ(Decide(c, q).reason, Reason::kNoGroup);
}

TEST(IncMpiDecision, PrecedenceDisabledThenCommunicatorThenArguments) {
  Config c;
  c.enable = false;
  Request q = Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kUser, 100, 4);
  q.comm_reason = Reason::kSubcomm;
  EXPECT_EQ(Decide(c, q).reason, Reason::kDisabled);
  c.enable = true;
  EXPECT_EQ(Decide(c, q).reason, Reason::kSubcomm);
  q.comm_reason = Reason::kNone;
  EXPECT_EQ(Decide(c, q).reason, Reason::kUserOp);
  // A user op is reported as such even on a message below the minimum.
  c.min_bytes = 1 << 20;
  EXPECT_EQ(Decide(c, q).reason, Reason::kUserOp);
}

TEST(IncMpiDecision, FloatSumCanBeKeptOnMpi) {
  Config c;
  c.float_sum = false;
  EXPECT_EQ(Decide(c, Reduction(Call::kAllreduce, Elem::kFloat32, OpKind::kSum, 10, 4)).reason,
            Reason::kFloatSumDisabled);
  EXPECT_EQ(Decide(c, Reduction(Call::kAllreduce, Elem::kFloat64, OpKind::kSum, 10, 8)).reason,
            Reason::kFloatSumDisabled);
  EXPECT_TRUE(Decide(c, Reduction(Call::kAllreduce, Elem::kFloat32, OpKind::kMax, 10, 4)).offload);
  EXPECT_TRUE(Decide(c, Reduction(Call::kAllreduce, Elem::kInt32, OpKind::kSum, 10, 4)).offload);
}

TEST(IncMpiDecision, EveryReasonHasADistinctName) {
  std::map<std::string, int> seen;
  for (int r = 0; r < static_cast<int>(Reason::kCount); r++) seen[ReasonName(static_cast<Reason>(r))]++;
  EXPECT_EQ(seen.size(), static_cast<size_t>(Reason::kCount));
  EXPECT_EQ(seen.count("unknown"), 0u);
}

// A fake datatype constructor tree: handle i is nodes[i].
struct FakeTypes {
  std::vector<TypeNode<int>> nodes;
  int released = 0;

  int Named(Elem e, uint64_t size) {
    TypeNode<int> n;
    n.named = true;
    n.elem = e;
    n.size = size;
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
  }
  int Derived(std::vector<int> parts) {
    TypeNode<int> n;
    n.parts = std::move(parts);
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
  }
  TypeNode<int> Decode(int h) { return nodes.at(static_cast<size_t>(h)); }
  void Release(int) { released++; }
};

TEST(IncMpiDtype, SignatureElemDependsOnTheElementsNotTheLayout) {
  FakeTypes f;
  const int mpi_int = f.Named(Elem::kInt32, 4);
  const int mpi_double = f.Named(Elem::kFloat64, 8);
  const int mpi_short = f.Named(Elem::kBytes, 2);
  const int mpi_char = f.Named(Elem::kBytes, 1);
  const int double_int = f.Named(Elem::kBytes, 12);
  const int mpi_lb = f.Named(Elem::kBytes, 0);
  int deep = mpi_int;
  for (int i = 0; i < 50; i++) deep = f.Derived({deep});
  struct Case {
    const char* what;
    int type;
    std::optional<Elem> want;
  };
  const Case cases[] = {
      {"MPI_INT", mpi_int, Elem::kInt32},
      {"contiguous of MPI_INT", f.Derived({mpi_int}), Elem::kInt32},
      {"vector of a contiguous of MPI_INT", f.Derived({f.Derived({mpi_int})}), Elem::kInt32},
      {"struct of ints in three blocks", f.Derived({mpi_int, mpi_int, mpi_int}), Elem::kInt32},
      {"struct of ints and an empty contiguous of doubles", f.Derived({mpi_int, f.Derived({}), mpi_int}),
       Elem::kInt32},
      {"struct of ints and MPI_LB", f.Derived({mpi_lb, mpi_int}), Elem::kInt32},
      {"50 nested dups of MPI_INT", deep, Elem::kInt32},
      {"struct of an int and a double", f.Derived({mpi_int, mpi_double}), Elem::kMixed},
      {"struct of a double and a vector of ints", f.Derived({mpi_double, f.Derived({mpi_int})}),
       Elem::kMixed},
      {"dup of MPI_DOUBLE_INT", f.Derived({double_int}), Elem::kBytes},
      {"struct of a short and a char", f.Derived({mpi_short, mpi_char}), Elem::kBytes},
      {"struct of a short and an int", f.Derived({mpi_short, mpi_int}), Elem::kMixed},
      {"contiguous of 0 ints", f.Derived({}), std::nullopt},
  };
  for (const Case& k : cases) {
    f.released = 0;
    EXPECT_EQ(SignatureElem(f, k.type), k.want) << k.what;
    int parts = 0;
    std::vector<int> todo = {k.type};
    while (!todo.empty()) {
      const TypeNode<int>& n = f.nodes[static_cast<size_t>(todo.back())];
      todo.pop_back();
      parts += static_cast<int>(n.parts.size());
      todo.insert(todo.end(), n.parts.begin(), n.parts.end());
    }
    EXPECT_EQ(f.released, parts) << k.what << ": every inner type is released once";
  }
}

TEST(IncMpiDtype, ContiguousOnlyWithLowerBoundZeroAndExtentEqualToSize) {
  struct Case {
    const char* what;
    Layout layout;
    bool want;
  };
  // ordered, size, lb, extent, true_lb, true_extent (x86-64 Open MPI's numbers)
  const Case cases[] = {
      {"MPI_INT", {true, 4, 0, 4, 0, 4}, true},
      {"contiguous of 5 MPI_INT", {true, 20, 0, 20, 0, 20}, true},
      {"MPI_2INT", {true, 8, 0, 8, 0, 8}, true},
      {"MPI_FLOAT_INT", {true, 8, 0, 8, 0, 8}, true},
      {"MPI_DOUBLE_INT: 12 bytes of data, extent 16", {true, 12, 0, 16, 0, 12}, false},
      {"MPI_LONG_INT", {true, 12, 0, 16, 0, 12}, false},
      {"MPI_SHORT_INT", {true, 6, 0, 8, 0, 6}, false},
      {"MPI_LONG_DOUBLE_INT", {true, 20, 0, 32, 0, 20}, false},
      {"contiguous of 2 MPI_DOUBLE_INT", {true, 24, 0, 32, 0, 28}, false},
      {"MPI_INT resized to extent 8", {false, 4, 0, 8, 0, 4}, false},
      {"MPI_INT resized to lb -4", {false, 4, -4, 4, 0, 4}, false},
      {"struct of an int at offset 4", {false, 4, 0, 8, 4, 4}, false},
      {"vector of 2 ints, stride 2", {false, 8, 0, 12, 0, 12}, false},
      {"indexed: ints 1 and 0, no gap but reversed", {false, 8, 0, 8, 0, 8}, false},
  };
  for (const Case& k : cases) EXPECT_EQ(IsContiguous(k.layout), k.want) << k.what;
}

TEST(IncMpiDtype, ElementSizesAsTheSwitchCountsThem) {
  EXPECT_EQ(ElemSize(Elem::kInt32), 4u);
  EXPECT_EQ(ElemSize(Elem::kUInt32), 4u);
  EXPECT_EQ(ElemSize(Elem::kFloat32), 4u);
  EXPECT_EQ(ElemSize(Elem::kInt64), 8u);
  EXPECT_EQ(ElemSize(Elem::kUInt64), 8u);
  EXPECT_EQ(ElemSize(Elem::kFloat64), 8u);
  EXPECT_EQ(ElemSize(Elem::kBytes), 1u);
  EXPECT_EQ(ElemSize(Elem::kMixed), 1u);
}

TEST(IncMpiStats, PackedCountsOnlyOffloadedCalls) {
  Stats s;
  s.Record(Call::kBcast, Reason::kNone, 24, 0.1, true);
  s.Record(Call::kBcast, Reason::kNone, 24, 0.1, false);
  s.Record(Call::kBcast, Reason::kBelowMinBytes, 24, 0.1, true);
  EXPECT_EQ(s.Packed(Call::kBcast), 1u);
  EXPECT_EQ(s.Packed(Call::kAllgather), 0u);
  Stats::Header h;
  EXPECT_NE(
      s.ToJson(h).find("\"MPI_Bcast\": {\"offloaded\": {\"calls\": 2, \"bytes\": 48, \"seconds\": 0.200000}, "
                       "\"packed\": 1,"),
      std::string::npos)
      << s.ToJson(h);
  EXPECT_NE(s.ToText(h).find("offloaded (1 packed)"), std::string::npos) << s.ToText(h);
}

// A call that returned an MPI error (an offload failed, or INC had failed
// before) is neither offloaded nor a fallback.
TEST(IncMpiStats, FailedCallsAreCountedApart) {
  Stats s;
  s.Record(Call::kAllreduce, Reason::kNone, 256, 0.1);
  s.Record(Call::kAllreduce, Reason::kGroupFailed, 256, 2.0);
  s.Record(Call::kBcast, Reason::kGroupFailed, 256, 0.0);
  s.Record(Call::kAllreduce, Reason::kBelowMinBytes, 4, 0.0);
  EXPECT_EQ(s.Offloaded(), 1u);
  EXPECT_EQ(s.FellBack(), 1u);
  EXPECT_EQ(s.Failed(), 2u);
  Stats::Header h;
  std::string json = s.ToJson(h);
  EXPECT_NE(json.find("\"failed\": {\"calls\": 1, \"bytes\": 256, \"seconds\": 2.000000}"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"totals\": {\"offloaded\": {\"calls\": 1, \"bytes\": 256, \"seconds\": 0.100000}, "
                      "\"fallback\": {\"calls\": 1, \"bytes\": 4, \"seconds\": 0.000000}, "
                      "\"failed\": {\"calls\": 2, \"bytes\": 512,"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find("group_failed"), std::string::npos) << json;
  EXPECT_NE(s.ToText(h).find("failed (MPI_ERR_OTHER)"), std::string::npos) << s.ToText(h);
}

TEST(IncMpiStats, JsonCountsPerCallAndReason) {
  Stats s;
  s.Record(Call::kAllreduce, Reason::kNone, 400, 0.5);
  s.Record(Call::kAllreduce, Reason::kNone, 400, 0.25);
  s.Record(Call::kAllreduce, Reason::kUserOp, 8, 0.125);
  s.Record(Call::kBcast, Reason::kBelowMinBytes, 3, 0.0);
  EXPECT_EQ(s.Offloaded(), 2u);
  EXPECT_EQ(s.FellBack(), 2u);
  Tally t = s.Get(Call::kAllreduce, Reason::kNone);
  EXPECT_EQ(t.calls, 2u);
  EXPECT_EQ(t.bytes, 800u);
  EXPECT_DOUBLE_EQ(t.seconds, 0.75);
  Stats::Header h;
  h.rank = 2;
  h.world = 4;
  h.group = "ok";
  h.job_id = "j\"1";
  std::string json = s.ToJson(h);
  EXPECT_NE(json.find("\"MPI_Allreduce\": {\"offloaded\": {\"calls\": 2, \"bytes\": 800"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"fallback_reasons\": {\"user_op\": {\"calls\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"fallback_reasons\": {\"user_op\": 1, \"below_min_bytes\": 1}"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"job_id\": \"j\\\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"MPI_Allgather\": {\"offloaded\": {\"calls\": 0"), std::string::npos) << json;
  std::string text = s.ToText(h);
  EXPECT_NE(text.find("fallback:user_op"), std::string::npos) << text;
  EXPECT_NE(text.find("offloaded"), std::string::npos) << text;
}

// Both front ends log through one FallbackLog: a (call, reason) pair once
// at its level, then at debug, unless INCIN_MPI_FALLBACK_LOG=all. The steps
// run in order on one log, so each row sees what the rows before logged.
TEST(IncMpiFallbackLog, FirstLineAtItsLevelLaterOnesAtDebug) {
  struct Step {
    const char* name;
    Call call;
    Reason reason;
    LogLevel level;
    bool all;
    LogLevel want;
  };
  const Step steps[] = {
      {"first pair", Call::kAllreduce, Reason::kUserOp, LogLevel::kWarn, false, LogLevel::kWarn},
      {"same pair again", Call::kAllreduce, Reason::kUserOp, LogLevel::kWarn, false, LogLevel::kDebug},
      {"same reason, other call", Call::kReduce, Reason::kUserOp, LogLevel::kWarn, false, LogLevel::kWarn},
      {"same call, other reason", Call::kAllreduce, Reason::kSubcomm, LogLevel::kInfo, false,
       LogLevel::kInfo},
      {"logged pair with all", Call::kAllreduce, Reason::kUserOp, LogLevel::kWarn, true, LogLevel::kWarn},
      {"logged pair without all again", Call::kAllreduce, Reason::kUserOp, LogLevel::kWarn, false,
       LogLevel::kDebug},
      {"error line of a failed group", Call::kBcast, Reason::kGroupFailed, LogLevel::kError, false,
       LogLevel::kError},
      {"failed group again", Call::kBcast, Reason::kGroupFailed, LogLevel::kError, false, LogLevel::kDebug},
  };
  FallbackLog log;
  for (const Step& s : steps) EXPECT_EQ(log.Level(s.call, s.reason, s.level, s.all), s.want) << s.name;
}

TEST(IncMpiFallbackLog, LineNamesReasonCallRankCommBytesAndGroupDetail) {
  struct Case {
    const char* name;
    Call call;
    Reason reason;
    int rank;
    bool world;
    uint64_t bytes;
    std::string detail;
    std::string want;
  };
  const Case cases[] = {
      {"derived communicator", Call::kAllreduce, Reason::kSubcomm, 3, false, 400, "",
       "fallback reason=subcomm call=MPI_Allreduce rank=3 comm=derived bytes=400"},
      {"world, argument reason", Call::kBcast, Reason::kBelowMinBytes, 0, true, 8, "",
       "fallback reason=below_min_bytes call=MPI_Bcast rank=0 comm=world bytes=8"},
      {"no group: the detail says why", Call::kBarrier, Reason::kNoGroup, 1, true, 0, "INCIN_AM is not set",
       "fallback reason=no_group call=MPI_Barrier rank=1 comm=world bytes=0 detail=\"INCIN_AM is not set\""},
      {"bad config: the detail says why", Call::kReduce, Reason::kBadConfig, 2, true, 4, "bad value",
       "fallback reason=bad_config call=MPI_Reduce rank=2 comm=world bytes=4 detail=\"bad value\""},
      {"group detail only for group reasons", Call::kAllgather, Reason::kUserOp, 0, true, 16, "stale",
       "fallback reason=user_op call=MPI_Allgather rank=0 comm=world bytes=16"},
      {"no group without detail", Call::kReduceScatterBlock, Reason::kNoGroup, 0, false, 32, "",
       "fallback reason=no_group call=MPI_Reduce_scatter_block rank=0 comm=derived bytes=32"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(FallbackLine(c.call, c.reason, c.rank, c.world, c.bytes, c.detail), c.want) << c.name;
}

}  // namespace
}  // namespace inc::mpi
