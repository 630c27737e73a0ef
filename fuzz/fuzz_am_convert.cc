// incamd's edge toward the switch agents (am/convert.cc): a RegisterSwitch
// request's agent address, capabilities and ports, checked and turned into
// the AM's model the way AmManager::RegisterSwitch does. The input is a
// serialized RegisterSwitchRequest (inputs that do not parse are skipped).
// Invariants: accepted capabilities and ports survive domain -> proto ->
// domain unchanged, and so do the enum masks.
#include <string>

#include "am/convert.h"
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

  for (const auto& p : req.ports()) {
    auto port = inc::am::PortFromProto(p);
    if (!port.ok()) continue;
    auto again = inc::am::PortFromProto(inc::am::PortToProto(*port));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(SamePort(*port, *again));
  }
  return 0;
}
