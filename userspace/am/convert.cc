#include "am/convert.h"

#include <cstdlib>

namespace inc::am {
namespace {

Expected<uint32_t> Mask(const google::protobuf::RepeatedField<int>& values, const std::string& what,
                        int max_value) {
  uint32_t mask = 0;
  for (int v : values) {
    if (v <= 0 || v > max_value)
      return InvalidArgument(what + ": value " + std::to_string(v) + " is not in 1.." +
                             std::to_string(max_value));
    mask |= 1u << v;
  }
  return mask;
}

void FromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  for (int v = 1; v < 32; ++v)
    if (mask & (1u << v)) out->Add(v);
}

}  // namespace

Expected<uint32_t> DtypeMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::DataType_MAX);
}
Expected<uint32_t> OpMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::ReduceOp_MAX);
}
Expected<uint32_t> CollMask(const google::protobuf::RepeatedField<int>& values, const std::string& what) {
  return Mask(values, what, v1::Collective_MAX);
}
void DtypesFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}
void OpsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}
void CollsFromMask(uint32_t mask, google::protobuf::RepeatedField<int>* out) {
  FromMask(mask, out);
}

Expected<Caps> CapsFromProto(const v1::Capabilities& c) {
  Caps caps;
  auto dt = DtypeMask(c.dtypes(), "capabilities.dtypes");
  if (!dt) return dt.status();
  auto op = OpMask(c.ops(), "capabilities.ops");
  if (!op) return op.status();
  auto co = CollMask(c.collectives(), "capabilities.collectives");
  if (!co) return co.status();
  caps.dtype_mask = *dt;
  caps.op_mask = *op;
  caps.coll_mask = *co;
  if (c.slot_capacity() == 0) return InvalidArgument("capabilities.slot_capacity is 0");
  if (c.max_children() == 0) return InvalidArgument("capabilities.max_children is 0");
  caps.max_children = c.max_children();
  caps.slot_capacity = c.slot_capacity();
  caps.max_trees = c.max_trees() ? c.max_trees() : 1023;
  caps.max_elems_per_packet = c.max_elems_per_packet() ? c.max_elems_per_packet() : 240;
  caps.icrc_verify = c.icrc_verify();
  return caps;
}

v1::Capabilities CapsToProto(const Caps& c, uint32_t free_slots) {
  v1::Capabilities p;
  DtypesFromMask(c.dtype_mask, p.mutable_dtypes());
  OpsFromMask(c.op_mask, p.mutable_ops());
  CollsFromMask(c.coll_mask, p.mutable_collectives());
  p.set_max_children(c.max_children);
  p.set_slot_capacity(c.slot_capacity);
  p.set_free_slots(free_slots);
  p.set_max_trees(c.max_trees);
  p.set_max_elems_per_packet(c.max_elems_per_packet);
  p.set_icrc_verify(c.icrc_verify);
  return p;
}

Expected<PortState> PortFromProto(const v1::Port& p) {
  PortState s;
  if (p.name().empty()) return InvalidArgument("port with an empty name");
  s.name = p.name();
  s.ifindex = p.ifindex();
  if (!p.mac().empty()) {
    auto mac = Mac::Parse(p.mac());
    if (!mac) return mac.status().WithContext("port " + p.name() + " mac");
    s.mac = *mac;
  }
  if (!p.ip().empty()) {
    auto ip = Ipv4::Parse(p.ip());
    if (!ip) return ip.status().WithContext("port " + p.name() + " ip");
    s.ip = *ip;
  }
  s.mtu = p.mtu();
  s.up = p.up();
  s.xdp_attached = p.xdp_attached();
  s.xdp_mode = p.xdp_mode();
  return s;
}

v1::Port PortToProto(const PortState& s) {
  v1::Port p;
  p.set_name(s.name);
  p.set_ifindex(s.ifindex);
  p.set_mac(s.mac.ToString());
  p.set_ip(s.ip.ToString());
  p.set_mtu(s.mtu);
  p.set_up(s.up);
  p.set_xdp_attached(s.xdp_attached);
  p.set_xdp_mode(s.xdp_mode);
  return p;
}

Status ValidateAgentAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (address.empty()) return InvalidArgument("agent_address is empty");
  if (colon == std::string::npos || colon == 0)
    return InvalidArgument("agent_address \"" + address + "\" is not host:port");
  const std::string port = address.substr(colon + 1);
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 1 || value > 65535)
    return InvalidArgument("agent_address \"" + address + "\": port \"" + port + "\" is not in 1..65535");
  return Status::Ok();
}

v1::Role RoleToProto(TreeRole role) {
  switch (role) {
    case TreeRole::kSingle: return v1::SINGLE;
    case TreeRole::kLeaf: return v1::LEAF;
    case TreeRole::kRoot: return v1::ROOT;
  }
  return v1::ROLE_UNSPECIFIED;
}

}  // namespace inc::am
