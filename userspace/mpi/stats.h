// Per-call accounting of libincmpi: calls, bytes and wall time, offloaded or
// fallen back per reason; rendered as a text table and as JSON at
// MPI_Finalize (INCMPI_SUMMARY, INCMPI_SUMMARY_JSON).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "mpi/decision.h"

namespace inc::mpi {

struct Tally {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

class Stats {
 public:
  void Record(Call call, Reason reason, uint64_t bytes, double seconds);  // kNone = offloaded
  Tally Get(Call call, Reason reason) const;
  uint64_t Offloaded() const;  // calls, all collectives
  uint64_t FellBack() const;

  struct Header {
    int rank = 0;
    int world = 0;
    bool enabled = true;
    std::string group;  // "ok" or the reason it is not
    std::string group_detail;
    std::string job_id;
    int tree_id = -1;
    std::string libinc_status_json;  // "" = none
  };
  std::string ToJson(const Header& h) const;
  std::string ToText(const Header& h) const;

 private:
  mutable std::mutex mu_;
  std::array<std::array<Tally, static_cast<size_t>(Reason::kCount)>, static_cast<size_t>(Call::kCount)> t_{};
};

// JSON string literal (quotes included).
std::string JsonString(const std::string& s);

}  // namespace inc::mpi
