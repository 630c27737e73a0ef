// SPDX-License-Identifier: Apache-2.0
// Proto <-> domain translation at the gRPC edge, with range checks.
#pragma once

#include <string>

#include "am/api.h"
#include "am/events.h"
#include "am/model.h"
#include "am/tree_config_codec.h"
#include "common/status.h"
#include "inc/v1/inc.pb.h"

namespace inc::am {

// Masks from repeated enum fields; INVALID_ARGUMENT on values outside the enum
// or UNSPECIFIED. `what` names the field in errors.
Expected<uint32_t> DtypeMask(const google::protobuf::RepeatedField<int>& values, const std::string& what);
Expected<uint32_t> OpMask(const google::protobuf::RepeatedField<int>& values, const std::string& what);
Expected<uint32_t> CollMask(const google::protobuf::RepeatedField<int>& values, const std::string& what);
void DtypesFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out);
void OpsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out);
void CollsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out);

Expected<Caps> CapsFromProto(const v1::Capabilities& c);
v1::Capabilities CapsToProto(const Caps& c, uint32_t free_slots);

Expected<PortState> PortFromProto(const v1::Port& p);
v1::Port PortToProto(const PortState& p);

// "host:port" with a non-empty host and a port in 1..65535.
Status ValidateAgentAddress(const std::string& address);

v1::Role RoleToProto(TreeRole role);
v1::TreeState TreeStateToProto(TreeState state);

// The AggregationManager service's messages, each way. Requests are checked
// as far as the message alone allows (enum values, addresses), with the
// field at fault named; the manager checks the rest against its state.
Expected<TreeAsk> AskFromProto(uint32_t pool_size, uint32_t elems_per_packet,
                               const google::protobuf::RepeatedField<int>& dtypes,
                               const google::protobuf::RepeatedField<int>& ops,
                               const google::protobuf::RepeatedField<int>& collectives);
Expected<JoinRequest> JoinFromProto(const v1::JoinGroupRequest& req);
v1::MemberAssignment AssignmentToProto(const Assignment& a);
v1::MemberHeartbeatResponse BeatReplyToProto(const MemberBeatReply& r);
Expected<SwitchRegistration> RegistrationFromProto(const v1::RegisterSwitchRequest& req);
Expected<SwitchBeat> SwitchBeatFromProto(const v1::SwitchHeartbeatRequest& req);
v1::SwitchSummary SummaryToProto(const SwitchSummary& s);
v1::GetTopologyResponse TopologyToProto(const TopologyView& view);
Expected<CreateTreeRequest> CreateTreeFromProto(const v1::CreateTreeRequest& req);
v1::Tree TreeToProto(const TreeInfo& t);
v1::Event EventToProto(const Event& e);

// What the AM sends a switch agent (tree_config_codec.h stores it).
v1::TreeConfig TreeConfigToProto(const TreeConfig& c);
Expected<TreeConfig> TreeConfigFromProto(const v1::TreeConfig& p);

}  // namespace inc::am
