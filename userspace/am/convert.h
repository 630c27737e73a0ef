// Proto <-> domain translation at the gRPC edge, with range checks.
#pragma once

#include <string>

#include "am/model.h"
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

}  // namespace inc::am
