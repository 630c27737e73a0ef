// SPDX-License-Identifier: Apache-2.0
#include "mpi/stats.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/log.h"

namespace inc::mpi {

namespace {
constexpr size_t kCalls = static_cast<size_t>(Call::kCount);
constexpr size_t kReasons = static_cast<size_t>(Reason::kCount);
// Calls recorded as kGroupFailed returned an MPI error: neither offloaded
// nor run on MPI, so they are counted apart ("failed").
constexpr size_t kFailed = static_cast<size_t>(Reason::kGroupFailed);

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", v);
  return buf;
}

std::string TallyJson(const Tally& t) {
  return "{\"calls\": " + std::to_string(t.calls) + ", \"bytes\": " + std::to_string(t.bytes) +
         ", \"seconds\": " + Num(t.seconds) + "}";
}
}  // namespace

void Stats::Record(Call call, Reason reason, uint64_t bytes, double seconds, bool packed) {
  std::lock_guard<std::mutex> l(mu_);
  Tally& t = t_[static_cast<size_t>(call)][static_cast<size_t>(reason)];
  t.calls++;
  t.bytes += bytes;
  t.seconds += seconds;
  if (packed && reason == Reason::kNone) packed_[static_cast<size_t>(call)]++;
}

uint64_t Stats::Packed(Call call) const {
  std::lock_guard<std::mutex> l(mu_);
  return packed_[static_cast<size_t>(call)];
}

Tally Stats::Get(Call call, Reason reason) const {
  std::lock_guard<std::mutex> l(mu_);
  return t_[static_cast<size_t>(call)][static_cast<size_t>(reason)];
}

uint64_t Stats::Offloaded() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (size_t c = 0; c < kCalls; c++) n += t_[c][0].calls;
  return n;
}

uint64_t Stats::FellBack() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (size_t c = 0; c < kCalls; c++)
    for (size_t r = 1; r < kReasons; r++)
      if (r != kFailed) n += t_[c][r].calls;
  return n;
}

uint64_t Stats::Failed() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (size_t c = 0; c < kCalls; c++) n += t_[c][kFailed].calls;
  return n;
}

std::string Stats::ToJson(const Header& h) const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  o << "{\"rank\": " << h.rank << ", \"world\": " << h.world
    << ", \"enabled\": " << (h.enabled ? "true" : "false") << ", \"group\": " << inc::JsonQuote(h.group)
    << ", \"group_detail\": " << inc::JsonQuote(h.group_detail)
    << ", \"job_id\": " << inc::JsonQuote(h.job_id) << ", \"tree_id\": " << h.tree_id << ", \"calls\": {";
  std::array<Tally, kReasons> by_reason{};
  Tally offloaded, fallback, failed;
  for (size_t c = 0; c < kCalls; c++) {
    Tally fb;
    std::string reasons;
    for (size_t r = 1; r < kReasons; r++) {
      const Tally& t = t_[c][r];
      if (!t.calls || r == kFailed) continue;
      fb.calls += t.calls;
      fb.bytes += t.bytes;
      fb.seconds += t.seconds;
      by_reason[r].calls += t.calls;
      by_reason[r].bytes += t.bytes;
      by_reason[r].seconds += t.seconds;
      reasons += (reasons.empty() ? "" : ", ") + inc::JsonQuote(ReasonName(static_cast<Reason>(r))) + ": " +
                 TallyJson(t);
    }
    const Tally& off = t_[c][0];
    offloaded.calls += off.calls;
    offloaded.bytes += off.bytes;
    offloaded.seconds += off.seconds;
    fallback.calls += fb.calls;
    fallback.bytes += fb.bytes;
    fallback.seconds += fb.seconds;
    const Tally& err = t_[c][kFailed];
    failed.calls += err.calls;
    failed.bytes += err.bytes;
    failed.seconds += err.seconds;
    o << (c ? ", " : "") << inc::JsonQuote(CallName(static_cast<Call>(c)))
      << ": {\"offloaded\": " << TallyJson(off) << ", \"packed\": " << packed_[c]
      << ", \"fallback\": " << TallyJson(fb) << ", \"failed\": " << TallyJson(err)
      << ", \"fallback_reasons\": {" << reasons << "}}";
  }
  o << "}, \"totals\": {\"offloaded\": " << TallyJson(offloaded) << ", \"fallback\": " << TallyJson(fallback)
    << ", \"failed\": " << TallyJson(failed) << "}, \"fallback_reasons\": {";
  bool first = true;
  for (size_t r = 1; r < kReasons; r++) {
    if (!by_reason[r].calls || r == kFailed) continue;
    o << (first ? "" : ", ") << inc::JsonQuote(ReasonName(static_cast<Reason>(r))) << ": "
      << by_reason[r].calls;
    first = false;
  }
  o << "}";
  if (!h.libinc_status_json.empty()) o << ", \"libinc\": " << h.libinc_status_json;
  o << "}";
  return o.str();
}

std::string Stats::ToText(const Header& h) const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  o << "incmpi: summary rank " << h.rank << "/" << h.world << ": group " << h.group
    << (h.group_detail.empty() ? "" : " (" + h.group_detail + ")")
    << (h.job_id.empty() ? "" : ", job " + h.job_id)
    << (h.tree_id >= 0 ? ", tree " + std::to_string(h.tree_id) : "") << "\n";
  char line[256];
  std::snprintf(line, sizeof(line), "incmpi:   %-26s %-34s %10s %14s %12s\n", "call", "path", "calls",
                "bytes", "seconds");
  o << line;
  for (size_t c = 0; c < kCalls; c++) {
    for (size_t r = 0; r < kReasons; r++) {
      const Tally& t = t_[c][r];
      if (!t.calls) continue;
      std::string path = r == 0         ? "offloaded"
                         : r == kFailed ? "failed (MPI_ERR_OTHER)"
                                        : std::string("fallback:") + ReasonName(static_cast<Reason>(r));
      if (r == 0 && packed_[c]) path += " (" + std::to_string(packed_[c]) + " packed)";
      std::snprintf(line, sizeof(line), "incmpi:   %-26s %-34s %10llu %14llu %12.6f\n",
                    CallName(static_cast<Call>(c)), path.c_str(), static_cast<unsigned long long>(t.calls),
                    static_cast<unsigned long long>(t.bytes), t.seconds);
      o << line;
    }
  }
  return o.str();
}

void WriteSummary(const Stats& stats, const Stats::Header& h, const Config& cfg) {
  if (cfg.summary == SummaryMode::kAll || (cfg.summary == SummaryMode::kRank0 && h.rank == 0)) {
    std::string text = stats.ToText(h);
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  std::string path = SummaryPathForRank(cfg.summary_json, h.rank);
  if (!path.empty()) {
    std::ofstream f(path, std::ios::trunc);
    f << stats.ToJson(h) << "\n";
    if (!f) LogLine(LogLevel::kError, "cannot write INCIN_MPI_SUMMARY_JSON file " + path);
  }
}

}  // namespace inc::mpi
