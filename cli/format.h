// SPDX-License-Identifier: Apache-2.0
// Output of incinctl: aligned tables for people, protobuf JSON for scripts.
// Pure functions of the AM's responses, so tests can check them on
// hand-built messages.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "inc/v1/inc.pb.h"

namespace inc::cli {

enum class OutputFormat { kTable, kJson };

// Columns separated by two spaces, each as wide as its widest cell. A column
// whose header starts with '>' is right-aligned (numbers); the '>' is not
// printed.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  void Print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// Protobuf JSON with the .proto field names (snake_case) and every field
// present, defaults included, so scripts can rely on the keys. pretty=false
// gives one line (events).
std::string ToJson(const google::protobuf::Message& message, bool pretty);

// "850ms ago", "12.3s ago", "4m05s ago", "2h10m ago".
std::string FormatAgo(uint64_t ms);
// "512 B", "64.0 KiB", "12.3 MiB", "1.20 GiB".
std::string FormatBytes(uint64_t bytes);
// "850 us", "12.35 ms".
std::string FormatMicros(uint64_t us);
// "2026-11-22 03:10:00.123Z"; "-" for 0.
std::string FormatUnixMs(uint64_t unix_ms);
// Lower-case enum names without their type prefix: "active", "single", "fp32".
std::string TreeStateName(v1::TreeState state);
std::string RoleName(v1::Role role);
std::string DataTypeName(v1::DataType dtype);
std::string ReduceOpName(v1::ReduceOp op);
std::string CollectiveName(v1::Collective collective);
std::string TransportName(v1::Transport transport);
// "1,2,3"; "-" when empty.
std::string JoinIds(const google::protobuf::RepeatedField<uint32_t>& ids);

void PrintSwitchList(const v1::ListSwitchesResponse& response, std::ostream& out);
void PrintSwitch(const v1::SwitchSummary& sw, std::ostream& out);
void PrintArnStatus(const v1::ArnStatus& status, std::ostream& out);
void PrintCreditStatus(const v1::CreditStatus& status, std::ostream& out);
void PrintTopology(const v1::GetTopologyResponse& response, std::ostream& out);
void PrintTreeList(const v1::ListTreesResponse& response, std::ostream& out);
void PrintTree(const v1::Tree& tree, std::ostream& out);
// all=false leaves out zero counters and rows whose counters are all zero
// (and says how many it left out). Switches that did not answer are listed
// last.
void PrintStats(const v1::AmGetStatsResponse& response, bool all, std::ostream& out);
// One line: time, kind, then the non-empty fields.
void PrintEvent(const v1::Event& event, std::ostream& out);

}  // namespace inc::cli
