// SPDX-License-Identifier: Apache-2.0
// incamd's topology file: the TopologyFile JSON parser (am/topology.cc
// ParseJsonText) and TopologyFromProto, which validates it into the model the
// tree builder plans on. Invariants: JSON round trip; a valid topology has as
// many switches, hosts and links as the file, and every link appears in the
// adjacency of both its ends.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "am/topology.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  inc::v1::TopologyFile file;
  if (!inc::am::ParseJsonText(json, "fuzz", &file).ok()) return 0;

  std::string printed;
  FUZZ_CHECK(google::protobuf::util::MessageToJsonString(file, &printed).ok());
  inc::v1::TopologyFile reparsed;
  FUZZ_CHECK(inc::am::ParseJsonText(printed, "printed", &reparsed).ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(file, reparsed));

  auto topo = inc::am::TopologyFromProto(file);
  if (!topo.ok()) return 0;
  FUZZ_CHECK(topo->switches.size() == static_cast<size_t>(file.switches_size()));
  FUZZ_CHECK(topo->hosts.size() == static_cast<size_t>(file.hosts_size()));
  FUZZ_CHECK(topo->links.size() == static_cast<size_t>(file.links_size()));
  for (const auto& l : topo->links) {
    FUZZ_CHECK(topo->adjacency.count({l.a, l.b}) == 1);
    FUZZ_CHECK(topo->adjacency.count({l.b, l.a}) == 1);
  }
  return 0;
}
