// SPDX-License-Identifier: Apache-2.0
// incamd's edge toward the switch agents (am/convert.cc): a RegisterSwitch
// request's agent address, capabilities and ports, checked and turned into
// the AM's model the way the service's RegisterSwitch does. The input is a
// serialized RegisterSwitchRequest (inputs that do not parse are skipped).
// Invariants: accepted capabilities and ports survive domain -> proto ->
// domain unchanged, and so do the enum masks; a whole registration and the
// same bytes read as a heartbeat, a JoinGroup or a stored tree config
// translate or are refused without a crash (a decoded config re-encodes to
// the same bytes as its own re-encoding).
#include <string>

#include "am/convert.h"
#include "am/membership.h"
#include "fuzz_check.h"

namespace {

bool SameCaps(const inc::am::Caps& a, const inc::am::Caps& b) {
  return a.dtype_mask == b.dtype_mask && a.op_mask == b.op_mask && a.coll_mask == b.coll_mask &&
         a.max_children == b.max_children && a.slot_capacity == b.slot_capacity &&
         a.max_trees == b.max_trees && a.max_elems_per_packet == b.max_elems_per_packet &&
         a.icrc_verify == b.icrc_verify;
}

bool SamePort(const inc::am::PortState& a, const inc::am::PortState& b) {
  return a.name == b.name && a.ifindex == b.ifindex && a.mac == b.mac && a.ip.host == b.ip.host &&
         a.mtu == b.mtu && a.up == b.up && a.xdp_attached == b.xdp_attached && a.xdp_mode == b.xdp_mode;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inc::v1::RegisterSwitchRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;

  (void)inc::am::ValidateAgentAddress(req.agent_address());

  const auto& c = req.capabilities();
  auto dtypes = inc::am::DtypeMask(c.dtypes(), "dtypes");
  if (dtypes.ok()) {
    google::protobuf::RepeatedField<int> back;
    inc::am::DtypesFromMask(*dtypes, &back);
    auto again = inc::am::DtypeMask(back, "dtypes");
    FUZZ_CHECK(again.ok() && *again == *dtypes);
  }
  auto ops = inc::am::OpMask(c.ops(), "ops");
  if (ops.ok()) {
    google::protobuf::RepeatedField<int> back;
    inc::am::OpsFromMask(*ops, &back);
    auto again = inc::am::OpMask(back, "ops");
    FUZZ_CHECK(again.ok() && *again == *ops);
  }
  auto colls = inc::am::CollMask(c.collectives(), "collectives");
  if (colls.ok()) {
    google::protobuf::RepeatedField<int> back;
    inc::am::CollsFromMask(*colls, &back);
    auto again = inc::am::CollMask(back, "collectives");
    FUZZ_CHECK(again.ok() && *again == *colls);
  }

  auto caps = inc::am::CapsFromProto(c);
  if (caps.ok()) {
    auto again = inc::am::CapsFromProto(inc::am::CapsToProto(*caps, c.free_slots()));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(SameCaps(*caps, *again));
  }

  auto reg = inc::am::RegistrationFromProto(req);
  if (reg.ok()) {
    FUZZ_CHECK(reg->name == req.switch_name() && !reg->name.empty());
    FUZZ_CHECK(reg->ports.size() == static_cast<size_t>(req.ports_size()));
  }
  inc::v1::SwitchHeartbeatRequest beat;
  if (beat.ParseFromArray(data, static_cast<int>(size))) {
    auto b = inc::am::SwitchBeatFromProto(beat);
    if (b.ok()) FUZZ_CHECK(b->live_tree_ids.size() == static_cast<size_t>(beat.live_tree_ids_size()));
  }

  inc::v1::JoinGroupRequest join;
  if (join.ParseFromArray(data, static_cast<int>(size))) {
    auto j = inc::am::JoinFromProto(join);
    if (j.ok()) {
      FUZZ_CHECK(j->job == join.job_id() && j->rank == join.rank() && j->world == join.world_size());
      FUZZ_CHECK(j->host_ranks.size() == static_cast<size_t>(join.host_ranks_size()) &&
                 j->total_ranks == join.total_ranks());
      // Several ranks per host: the check either accepts or names the field.
      inc::Status c = inc::am::CheckJoin(*j);
      FUZZ_CHECK(c.ok() || c.code() == inc::Code::kInvalidArgument);
    }
  }
  // A stored tree config: whatever decodes encodes to bytes that decode the same.
  auto config = inc::am::DecodeTreeConfig(std::string(reinterpret_cast<const char*>(data), size));
  if (config.ok()) {
    auto again = inc::am::DecodeTreeConfig(inc::am::EncodeTreeConfig(*config));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(inc::am::EncodeTreeConfig(*again) == inc::am::EncodeTreeConfig(*config));
  }

  for (const auto& p : req.ports()) {
    auto port = inc::am::PortFromProto(p);
    if (!port.ok()) continue;
    auto again = inc::am::PortFromProto(inc::am::PortToProto(*port));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(SamePort(*port, *again));
  }
  return 0;
}
