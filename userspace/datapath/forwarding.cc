// SPDX-License-Identifier: Apache-2.0
// Best-path table programming over the forwarder's maps (bpf/forward.h).
#include "datapath/forwarding.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "datapath/datapath.h"

// The forwarder's port maps are sized like the data path's devmap.
static_assert(INC_FWD_MAX_PORTS == INC_MAX_PORTS);

namespace inc::dp {
namespace {

std::string PortName(uint32_t ifindex) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(ifindex, name) == nullptr) return "ifindex" + std::to_string(ifindex);
  return name;
}

inc_bpt_key ToKey(const Prefix& p) {
  inc_bpt_key k{};
  k.prefixlen = p.length;
  k.addr = p.addr.be();
  return k;
}

}  // namespace

const char* ForwardStatName(int stat) {
  switch (stat) {
    case INC_FWD_FORWARDED: return "forwarded";
    case INC_FWD_NO_ROUTE: return "no_route";
    case INC_FWD_TTL: return "ttl_or_options";
    case INC_FWD_NO_PATH: return "no_usable_path";
    case INC_FWD_CONGESTED_PATH: return "congested_path_used";
    default: return "unknown";
  }
}

Expected<ForwardingTable> ForwardingTable::Open(const Datapath& dp) {
  int bpt = dp.map_fd(Datapath::MapId::kBpt), health = dp.map_fd(Datapath::MapId::kPortHealth);
  int tx = dp.map_fd(Datapath::MapId::kPortTx), stats = dp.map_fd(Datapath::MapId::kFwdStats);
  if (bpt < 0 || health < 0 || tx < 0 || stats < 0)
    return FailedPrecondition("the loaded data path has no best-path forwarder maps");
  return ForwardingTable(bpt, health, tx, stats);
}

Status ForwardingTable::SetRoute(const Route& route) {
  const Prefix& p = route.prefix;
  if (p.length > 32) return InvalidArgument("route " + p.ToString() + ": prefix length above 32");
  if (p.addr.host & ~Prefix::MaskOf(p.length))
    return InvalidArgument("route " + p.ToString() + ": host bits set in the prefix");
  if (route.hops.size() > INC_BPT_MAX_HOPS)
    return InvalidArgument("route " + p.ToString() + ": " + std::to_string(route.hops.size()) +
                           " next hops, at most " + std::to_string(INC_BPT_MAX_HOPS));
  inc_bpt_entry e{};
  e.nhops = static_cast<uint32_t>(route.hops.size());
  for (size_t i = 0; i < route.hops.size(); i++) {
    const NextHop& h = route.hops[i];
    if (h.flags & ~(INC_HOP_CONGESTED | INC_HOP_FAILED))
      return InvalidArgument("route " + p.ToString() + ": unknown next-hop flags " + std::to_string(h.flags));
    auto info = GetInterfaceInfo(h.port);
    if (!info.ok())
      return NotFound("route " + p.ToString() + ": next-hop port " + h.port + " does not exist");
    e.hops[i].ifindex = info->ifindex;
    e.hops[i].cost = h.cost;
    e.hops[i].flags = h.flags;
    std::memcpy(e.hops[i].dmac, h.mac.bytes.data(), 6);
    std::memcpy(e.hops[i].smac, info->mac.bytes.data(), 6);
  }
  inc_bpt_key k = ToKey(p);
  if (bpf_map_update_elem(bpt_fd_, &k, &e, BPF_ANY) != 0) {
    if (errno == ENOSPC || errno == E2BIG)
      return ResourceExhausted("route " + p.ToString() + ": best-path table full (" +
                               std::to_string(INC_BPT_MAX_PREFIXES) + " prefixes)");
    return ErrnoStatus("write route " + p.ToString(), errno);
  }
  return Status::Ok();
}

Status ForwardingTable::DeleteRoute(const Prefix& prefix) {
  inc_bpt_key k = ToKey(prefix);
  if (bpf_map_delete_elem(bpt_fd_, &k) != 0) {
    if (errno == ENOENT) return NotFound("no route for " + prefix.ToString());
    return ErrnoStatus("delete route " + prefix.ToString(), errno);
  }
  return Status::Ok();
}

Expected<std::vector<Route>> ForwardingTable::ListRoutes() const {
  std::vector<Route> out;
  inc_bpt_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(bpt_fd_, prev, &next) == 0) {
    inc_bpt_entry e{};
    if (bpf_map_lookup_elem(bpt_fd_, &next, &e) == 0) {
      Route r;
      r.prefix.addr = Ipv4::FromBe(next.addr);
      r.prefix.length = static_cast<uint8_t>(next.prefixlen);
      for (uint32_t i = 0; i < e.nhops && i < INC_BPT_MAX_HOPS; i++) {
        NextHop h;
        h.port = PortName(e.hops[i].ifindex);
        std::memcpy(h.mac.bytes.data(), e.hops[i].dmac, 6);
        h.cost = e.hops[i].cost;
        h.flags = e.hops[i].flags;
        r.hops.push_back(h);
      }
      out.push_back(std::move(r));
    }
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return ErrnoStatus("list routes", errno);
  std::sort(out.begin(), out.end(), [](const Route& a, const Route& b) { return a.prefix < b.prefix; });
  return out;
}

Status ForwardingTable::Reconcile(const std::vector<Route>& routes) {
  std::set<Prefix> wanted;
  for (const auto& r : routes) {
    if (!wanted.insert(r.prefix).second)
      return InvalidArgument("route " + r.prefix.ToString() + " given twice");
  }
  auto have = ListRoutes();
  if (!have.ok()) return have.status();
  for (const auto& r : routes) INC_RETURN_IF_ERROR(SetRoute(r));
  for (const auto& r : *have) {
    if (!wanted.count(r.prefix)) {
      Status s = DeleteRoute(r.prefix);
      if (!s.ok() && s.code() != Code::kNotFound) return s;
    }
  }
  return Status::Ok();
}

Status ForwardingTable::SetPortHealth(const std::string& port, uint32_t flags) {
  if (flags & ~uint32_t{INC_PORT_CONGESTED | INC_PORT_FAILED})
    return InvalidArgument("port " + port + ": unknown health flags " + std::to_string(flags));
  auto info = GetInterfaceInfo(port);
  if (!info.ok()) return NotFound("port " + port + " does not exist");
  uint32_t key = info->ifindex;
  if (flags == 0) {
    if (bpf_map_delete_elem(health_fd_, &key) != 0 && errno != ENOENT)
      return ErrnoStatus("clear health of " + port, errno);
    return Status::Ok();
  }
  inc_port_health v{};
  v.flags = flags;
  if (bpf_map_update_elem(health_fd_, &key, &v, BPF_ANY) != 0)
    return ErrnoStatus("set health of " + port, errno);
  return Status::Ok();
}

Expected<std::map<std::string, uint32_t>> ForwardingTable::PortHealth() const {
  std::map<std::string, uint32_t> out;
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(health_fd_, prev, &next) == 0) {
    inc_port_health v{};
    if (bpf_map_lookup_elem(health_fd_, &next, &v) == 0) out[PortName(next)] = v.flags;
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return ErrnoStatus("list port health", errno);
  return out;
}

Status ForwardingTable::TrackPort(const std::string& port) {
  auto info = GetInterfaceInfo(port);
  if (!info.ok()) return NotFound("port " + port + " does not exist");
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return ErrnoStatus("count CPUs", -ncpu);
  std::vector<inc_port_tx> zero(ncpu);
  uint32_t key = info->ifindex;
  if (bpf_map_update_elem(port_tx_fd_, &key, zero.data(), BPF_NOEXIST) != 0 && errno != EEXIST)
    return ErrnoStatus("track port " + port, errno);
  return Status::Ok();
}

Expected<ForwardStats> ForwardingTable::ReadStats() const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return ErrnoStatus("count CPUs", -ncpu);
  ForwardStats st;
  std::vector<uint64_t> u64s(ncpu);
  for (uint32_t i = 0; i < INC_FWD__MAX; i++) {
    if (bpf_map_lookup_elem(stats_fd_, &i, u64s.data()) != 0)
      return ErrnoStatus("read forwarder stats", errno);
    uint64_t sum = 0;
    for (auto v : u64s) sum += v;
    st.global[ForwardStatName(i)] = sum;
  }
  std::vector<inc_port_tx> tx(ncpu);
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(port_tx_fd_, prev, &next) == 0) {
    if (bpf_map_lookup_elem(port_tx_fd_, &next, tx.data()) == 0) {
      PortForwardCounters& c = st.ports[PortName(next)];
      for (const auto& t : tx) {
        c.packets += t.packets;
        c.bytes += t.bytes;
      }
    }
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return ErrnoStatus("read port counters", errno);
  return st;
}

}  // namespace inc::dp
