// SPDX-License-Identifier: Apache-2.0
// The NETCONF front end's edge between YANG data trees of the incin-switch
// module (yang/incin-switch@*.yang, docs/netconf.md) and the agent's inputs
// and outputs (the same inc.v1 messages the gRPC front end hands the tree
// agent): a <tree> list entry <-> TreeConfig, capabilities, ports and stats
// -> the <switch> and <tree>/<state> state nodes. Pure logic over a libyang
// context that has the module loaded.
#pragma once

#include <libyang/libyang.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "inc/v1/inc.pb.h"

namespace inc::sw::netconf {

inline constexpr char kModule[] = "incin-switch";
inline constexpr char kNamespace[] = "urn:incin:yang:incin-switch";

// Owns a libyang data tree (all siblings).
struct LydDeleter {
  void operator()(lyd_node* n) const { lyd_free_all(n); }
};
using LydTree = std::unique_ptr<lyd_node, LydDeleter>;

// A libyang context with the incin-switch module and the IETF modules the
// NETCONF server needs (ietf-netconf with writable-running and xpath,
// notifications) loaded from yang_dir and yang_dir/ietf.
struct LyCtxDeleter {
  void operator()(ly_ctx* c) const { ly_ctx_destroy(c); }
};
using LyCtx = std::unique_ptr<ly_ctx, LyCtxDeleter>;
Expected<LyCtx> NewContext(const std::string& yang_dir);

// Where the YANG modules are: `configured` if set, else the installed
// /usr/share/incin/yang, else the source tree's yang/ (development).
std::string FindYangDir(const std::string& configured);

// The YANG enum names of the inc.v1 enums ("reduce-scatter" <-> REDUCE_SCATTER).
std::string YangEnumName(const std::string& proto_name);

// A <tree> list entry (validated against the module, defaults present) as
// the TreeConfig the agent takes. INVALID_ARGUMENT for what the schema
// cannot say: member ranks must be 0..n-1 without gaps.
Expected<v1::TreeConfig> TreeFromYang(const lyd_node* tree);

// Appends a <tree> entry for `config` under the <trees> container *trees
// (created when null).
Status TreeToYang(const ly_ctx* ctx, const v1::TreeConfig& config, lyd_node** trees);

// The whole running datastore: <trees> with every configured tree (null
// when there is none).
Expected<LydTree> RunningToYang(const ly_ctx* ctx, const std::map<uint16_t, v1::TreeConfig>& trees);

// Extra facts for the <switch> state container.
struct SwitchFacts {
  std::string management_address;
  std::string netconf_address;
  bool arn_enabled = false;
  uint32_t arn_switch_id = 0;
  std::vector<v1::ArnLinkState> unhealthy_links;
  bool credit_enabled = false;
  uint64_t credit_reserve_bytes = 0;
  uint32_t credit_flows = 0;
};

// Adds the state data: <switch> (capabilities, ports, ARN, credit,
// statistics) and each configured tree's <state> (counters, per member with
// its identity and switch QPN) to *data (the running trees, may be null).
Status StateToYang(const ly_ctx* ctx, const v1::GetCapabilitiesResponse& caps, const v1::SwitchStats& stats,
                   const std::map<uint16_t, v1::TreeConfig>& trees, const SwitchFacts& facts,
                   lyd_node** data);

// The last libyang error of ctx as text with its data path ("... (at
// /incin-switch:trees/tree[id='7']/pool-size)").
std::string LyError(const ly_ctx* ctx, const std::string& fallback);

}  // namespace inc::sw::netconf
