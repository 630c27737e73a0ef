// SPDX-License-Identifier: Apache-2.0
// incswitchd's NETCONF edge (netconf/yang_data.cc): the <config> of an
// edit-config, parsed strictly by libyang against the incin-switch module,
// validated as a whole as the server validates the edited datastore, and each
// <tree> entry translated by TreeFromYang into the TreeConfig the agent takes,
// then checked by the agent's own TreeConfigToSpec. The input is XML text.
// Invariants: a translated tree keeps the id of its list entry and has at
// least one child; translating it back to YANG (TreeToYang) and again
// (TreeFromYang) gives the same TreeConfig; a spec the agent accepts keeps
// that tree id.
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "fuzz_check.h"
#include "netconf/yang_data.h"
#include "switch/tree/translate.h"

namespace {
ly_ctx* g_ctx = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  ly_log_options(0);  // libyang's own messages: one per refused input otherwise
  auto ctx = inc::sw::netconf::NewContext(INC_YANG_DIR);
  if (!ctx.ok()) {
    std::fprintf(stderr, "fuzz_netconf_edit: %s\n", ctx.status().ToString().c_str());
    std::abort();
  }
  g_ctx = ctx->release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  lyd_node* raw = nullptr;
  if (lyd_parse_data_mem(g_ctx, text.c_str(), LYD_XML, LYD_PARSE_STRICT | LYD_PARSE_NO_STATE,
                         LYD_VALIDATE_NO_STATE, &raw) != LY_SUCCESS) {
    lyd_free_all(raw);
    return 0;
  }
  inc::sw::netconf::LydTree tree(raw);
  lyd_node* trees = nullptr;
  if (!tree || lyd_find_path(tree.get(), "/incin-switch:trees", 0, &trees) != LY_SUCCESS) return 0;

  const lyd_node* t;
  LY_LIST_FOR(lyd_child(trees), t) {
    auto config = inc::sw::netconf::TreeFromYang(t);
    if (!config.ok()) continue;
    const uint32_t id = static_cast<uint32_t>(strtoul(lyd_get_value(lyd_child(t)), nullptr, 10));
    FUZZ_CHECK(config->tree_id() == id);
    FUZZ_CHECK(config->children_size() > 0);

    lyd_node* back = nullptr;
    FUZZ_CHECK(inc::sw::netconf::TreeToYang(g_ctx, *config, &back).ok());
    inc::sw::netconf::LydTree back_owner(back);
    const lyd_node* again_node = lyd_child(back);
    FUZZ_CHECK(again_node != nullptr);
    auto again = inc::sw::netconf::TreeFromYang(again_node);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*config, *again));

    inc::sw::PortTable ports;
    for (const auto& child : config->children()) ports[child.port()] = inc::sw::PortFacts{true, true};
    if (config->has_parent()) ports[config->parent().port()] = inc::sw::PortFacts{true, true};
    inc::dp::Capabilities caps;
    caps.slot_capacity = 1u << 20;
    caps.dtype_mask = 0xFFFF;
    caps.op_mask = 0xFF;
    caps.coll_mask = 0xFF;
    auto spec = inc::sw::TreeConfigToSpec(*config, ports, caps);
    if (spec.ok()) FUZZ_CHECK(spec->tree_id == id);
  }
  return 0;
}
