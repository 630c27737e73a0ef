// SPDX-License-Identifier: Apache-2.0
// The topology file (TopologyFile, protobuf JSON): loading and validation with
// precise errors.
#pragma once

#include <string>

#include "am/model.h"
#include "common/status.h"
#include "inc/v1/inc.pb.h"

namespace inc::am {

// Validates a TopologyFile: unique non-empty names, known switch kinds, every
// host attached to a known switch port, links between two distinct known
// switches, no switch port used twice, parsable addresses.
Expected<Topology> TopologyFromProto(const v1::TopologyFile& file);

// Reads and validates a JSON topology file.
Expected<Topology> LoadTopologyFile(const std::string& path);

// Reads a JSON file into any message, with the file name in errors.
Status ReadJsonFile(const std::string& path, google::protobuf::Message* msg);

// ReadJsonFile's parser on text already in memory (unknown fields are an
// error); `source` names where the text came from in errors. Kept apart from
// the file so that the fuzzer (fuzz/fuzz_am_config.cc) can feed it directly.
Status ParseJsonText(const std::string& text, const std::string& source, google::protobuf::Message* msg);

}  // namespace inc::am
