// SPDX-License-Identifier: Apache-2.0
// Credit flow control programming over the gate's maps (bpf/credit.h).
#include "datapath/credit_table.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <tuple>

#include "datapath/datapath.h"

namespace inc::dp {
namespace {

constexpr size_t kCounterBytes = sizeof(inc_credit_counters) * INC_CREDIT_MAX_FLOWS;

size_t MappedBytes() {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (kCounterBytes + page - 1) / page * page;
}

inc_credit_flow_key ToKey(const CreditFlowKey& k) {
  inc_credit_flow_key out{};
  out.saddr = k.src.be();
  out.daddr = k.dst.be();
  out.sport = htons(k.sport);
  out.dest_qpn = k.dest_qpn;
  return out;
}

CreditFlowKey FromKey(const inc_credit_flow_key& k) {
  CreditFlowKey out;
  out.src = Ipv4::FromBe(k.saddr);
  out.dst = Ipv4::FromBe(k.daddr);
  out.sport = ntohs(k.sport);
  out.dest_qpn = k.dest_qpn;
  return out;
}

uint64_t Load(const __u64* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

}  // namespace

std::string CreditFlowKey::ToString() const {
  return src.ToString() + ":" + std::to_string(sport) + "->" + dst.ToString() + " qpn " +
         std::to_string(dest_qpn);
}

bool CreditFlowKey::operator<(const CreditFlowKey& o) const {
  return std::tie(src.host, dst.host, sport, dest_qpn) <
         std::tie(o.src.host, o.dst.host, o.sport, o.dest_qpn);
}

bool CreditFlowKey::operator==(const CreditFlowKey& o) const {
  return src == o.src && dst == o.dst && sport == o.sport && dest_qpn == o.dest_qpn;
}

const char* CreditStatName(int stat) {
  switch (stat) {
    case INC_CREDIT_FORWARDED: return "forwarded";
    case INC_CREDIT_FORWARDED_BYTES: return "forwarded_bytes";
    case INC_CREDIT_QUEUED_NO_CREDIT: return "queued_no_credit";
    case INC_CREDIT_QUEUED_BEHIND: return "queued_behind";
    case INC_CREDIT_QUEUED_NO_HOP: return "queued_no_hop";
    case INC_CREDIT_DROP_NO_QUEUE: return "drop_no_queue";
    case INC_CREDIT_DROP_MALFORMED: return "drop_malformed";
    case INC_CREDIT_DROP_BAD_INDEX: return "drop_bad_index";
    case INC_CREDIT_UNKNOWN_FLOW: return "unknown_flow";
    case INC_CREDIT_DELIVERED: return "delivered";
    default: return "unknown";
  }
}

Expected<CreditTable> CreditTable::Open(const Datapath& dp) {
  int flows = dp.map_fd(Datapath::MapId::kCreditFlows),
      counters = dp.map_fd(Datapath::MapId::kCreditCounters);
  int slots = dp.map_fd(Datapath::MapId::kCreditXskSlots), xsks = dp.map_fd(Datapath::MapId::kCreditXsks);
  int stats = dp.map_fd(Datapath::MapId::kCreditStats), ingress = dp.map_fd(Datapath::MapId::kCreditIngress);
  if (flows < 0 || counters < 0 || ingress < 0 || slots < 0 || xsks < 0 || stats < 0)
    return FailedPrecondition("the loaded data path has no credit flow control maps");
  void* mem = mmap(nullptr, MappedBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, counters, 0);
  if (mem == MAP_FAILED) return ErrnoStatus("mmap credit_counters", errno);
  CreditTable t(flows, counters, ingress, slots, xsks, stats, static_cast<inc_credit_counters*>(mem));
  // A re-opened table keeps the indexes of flows already in the map.
  inc_credit_flow_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(flows, prev, &next) == 0) {
    inc_credit_flow f{};
    if (bpf_map_lookup_elem(flows, &next, &f) == 0 && f.index < INC_CREDIT_MAX_FLOWS) t.used_[f.index] = true;
    key = next;
    prev = &key;
  }
  return t;
}

CreditTable::CreditTable(int flows, int counters, int ingress, int xsk_slots, int xsks, int stats,
                         inc_credit_counters* mem)
    : flows_fd_(flows),
      counters_fd_(counters),
      ingress_fd_(ingress),
      xsk_slots_fd_(xsk_slots),
      xsks_fd_(xsks),
      stats_fd_(stats),
      mem_(mem),
      used_(INC_CREDIT_MAX_FLOWS, false) {}

CreditTable::CreditTable(CreditTable&& o) noexcept {
  *this = std::move(o);
}

CreditTable& CreditTable::operator=(CreditTable&& o) noexcept {
  if (this != &o) {
    Release();
    flows_fd_ = o.flows_fd_;
    counters_fd_ = o.counters_fd_;
    ingress_fd_ = o.ingress_fd_;
    xsk_slots_fd_ = o.xsk_slots_fd_;
    xsks_fd_ = o.xsks_fd_;
    stats_fd_ = o.stats_fd_;
    mem_ = o.mem_;
    used_ = std::move(o.used_);
    o.mem_ = nullptr;
  }
  return *this;
}

CreditTable::~CreditTable() {
  Release();
}

void CreditTable::Release() {
  if (mem_) munmap(mem_, MappedBytes());
  mem_ = nullptr;
}

Expected<inc_credit_flow> CreditTable::BuildEntry(const CreditFlowKey& key, const CreditHop& hop) const {
  if (key.dest_qpn > INC_QPN_MASK)
    return InvalidArgument("credit flow " + key.ToString() + ": DestQP above 24 bits");
  inc_credit_flow f{};
  if (!hop.port.empty()) {
    auto info = GetInterfaceInfo(hop.port);
    if (!info.ok())
      return NotFound("credit flow " + key.ToString() + ": next-hop port " + hop.port + " does not exist");
    f.ifindex = info->ifindex;
    std::memcpy(f.dmac, hop.mac.bytes.data(), 6);
    std::memcpy(f.smac, info->mac.bytes.data(), 6);
    f.flags = INC_CREDIT_HOP_VALID;
  }
  if (hop.count_only) f.flags |= INC_CREDIT_COUNT_ONLY;
  return f;
}

Expected<inc_credit_flow> CreditTable::Entry(const CreditFlowKey& key) const {
  inc_credit_flow_key k = ToKey(key);
  inc_credit_flow f{};
  if (bpf_map_lookup_elem(flows_fd_, &k, &f) != 0) {
    if (errno == ENOENT) return NotFound("no credit flow " + key.ToString());
    return ErrnoStatus("read credit flow " + key.ToString(), errno);
  }
  if (f.index >= INC_CREDIT_MAX_FLOWS)
    return Internal("credit flow " + key.ToString() + " has index " + std::to_string(f.index));
  return f;
}

Expected<uint32_t> CreditTable::AddFlow(const CreditFlowKey& key, const CreditHop& hop) {
  auto f = BuildEntry(key, hop);
  if (!f.ok()) return f.status();
  if (Entry(key).ok()) return AlreadyExists("credit flow " + key.ToString() + " exists");
  uint32_t index = 0;
  while (index < INC_CREDIT_MAX_FLOWS && used_[index]) index++;
  if (index == INC_CREDIT_MAX_FLOWS)
    return ResourceExhausted("credit flow table full (" + std::to_string(INC_CREDIT_MAX_FLOWS) + " flows)");
  // Zero the counters before XDP can find the flow.
  inc_credit_counters* c = &mem_[index];
  __atomic_store_n(&c->granted, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&c->consumed, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&c->queued, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&c->held, 0, __ATOMIC_RELEASE);
  f->index = index;
  inc_credit_flow_key k = ToKey(key);
  if (bpf_map_update_elem(flows_fd_, &k, &*f, BPF_NOEXIST) != 0) {
    if (errno == EEXIST) return AlreadyExists("credit flow " + key.ToString() + " exists");
    if (errno == E2BIG || errno == ENOSPC) return ResourceExhausted("credit flow map full");
    return ErrnoStatus("add credit flow " + key.ToString(), errno);
  }
  used_[index] = true;
  return index;
}

Status CreditTable::SetNextHop(const CreditFlowKey& key, const CreditHop& hop) {
  auto old = Entry(key);
  if (!old.ok()) return old.status();
  auto f = BuildEntry(key, hop);
  if (!f.ok()) return f.status();
  f->index = old->index;
  inc_credit_flow_key k = ToKey(key);
  if (bpf_map_update_elem(flows_fd_, &k, &*f, BPF_EXIST) != 0)
    return ErrnoStatus("set next hop of credit flow " + key.ToString(), errno);
  return Status::Ok();
}

Status CreditTable::RemoveFlow(const CreditFlowKey& key) {
  auto f = Entry(key);
  if (!f.ok()) return f.status();
  inc_credit_flow_key k = ToKey(key);
  if (bpf_map_delete_elem(flows_fd_, &k) != 0)
    return ErrnoStatus("remove credit flow " + key.ToString(), errno);
  used_[f->index] = false;
  std::vector<inc_credit_ingress_key> stale;
  inc_credit_ingress_key cur{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(ingress_fd_, prev, &next) == 0) {
    if (next.index == f->index) stale.push_back(next);
    cur = next;
    prev = &cur;
  }
  for (const auto& k : stale) bpf_map_delete_elem(ingress_fd_, &k);
  return Status::Ok();
}

Status CreditTable::WatchIngress(uint32_t index, uint32_t ifindex) {
  inc_credit_ingress_key k{index, ifindex};
  uint64_t zero = 0;
  if (bpf_map_update_elem(ingress_fd_, &k, &zero, BPF_NOEXIST) != 0 && errno != EEXIST) {
    if (errno == E2BIG || errno == ENOSPC) return ResourceExhausted("credit ingress map full");
    return ErrnoStatus(
        "watch ingress " + std::to_string(ifindex) + " of credit index " + std::to_string(index), errno);
  }
  return Status::Ok();
}

Expected<uint64_t> CreditTable::IngressBytes(uint32_t index, uint32_t ifindex) const {
  inc_credit_ingress_key k{index, ifindex};
  uint64_t bytes = 0;
  if (bpf_map_lookup_elem(ingress_fd_, &k, &bytes) != 0)
    return NotFound("ingress " + std::to_string(ifindex) + " of credit index " + std::to_string(index) +
                    " is not watched");
  return bytes;
}

Expected<CreditFlowState> CreditTable::Lookup(const CreditFlowKey& key) const {
  auto f = Entry(key);
  if (!f.ok()) return f.status();
  CreditFlowState s;
  s.key = key;
  s.index = f->index;
  if (f->flags & INC_CREDIT_HOP_VALID) s.ifindex = f->ifindex;
  s.count_only = (f->flags & INC_CREDIT_COUNT_ONLY) != 0;
  std::memcpy(s.dmac.bytes.data(), f->dmac, 6);
  std::memcpy(s.smac.bytes.data(), f->smac, 6);
  s.counters = ReadIndex(f->index);
  return s;
}

Expected<std::vector<CreditFlowState>> CreditTable::ListFlows() const {
  std::vector<CreditFlowState> out;
  inc_credit_flow_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(flows_fd_, prev, &next) == 0) {
    auto s = Lookup(FromKey(next));
    if (s.ok()) out.push_back(*s);
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return ErrnoStatus("list credit flows", errno);
  return out;
}

Status CreditTable::SetGranted(const CreditFlowKey& key, uint64_t granted_total) {
  auto f = Entry(key);
  if (!f.ok()) return f.status();
  __atomic_store_n(&mem_[f->index].granted, granted_total, __ATOMIC_RELEASE);
  return Status::Ok();
}

Status CreditTable::AddCredit(const CreditFlowKey& key, uint64_t bytes) {
  auto f = Entry(key);
  if (!f.ok()) return f.status();
  // The agent is granted's only writer, so load + store loses nothing.
  __u64* g = &mem_[f->index].granted;
  __atomic_store_n(g, Load(g) + bytes, __ATOMIC_RELEASE);
  return Status::Ok();
}

CreditCounters CreditTable::ReadIndex(uint32_t index) const {
  CreditCounters c;
  if (index >= INC_CREDIT_MAX_FLOWS) return c;
  inc_credit_counters* m = &mem_[index];
  c.consumed = Load(&m->consumed);
  c.granted = Load(&m->granted);
  c.available = static_cast<int64_t>(c.granted - c.consumed);
  c.queued = Load(&m->queued);
  c.held = Load(&m->held);
  return c;
}

Expected<CreditCounters> CreditTable::Read(const CreditFlowKey& key) const {
  auto f = Entry(key);
  if (!f.ok()) return f.status();
  return ReadIndex(f->index);
}

bool CreditTable::TakeCredit(uint32_t index, uint64_t bytes) {
  if (index >= INC_CREDIT_MAX_FLOWS) return false;
  inc_credit_counters* m = &mem_[index];
  uint64_t before = __atomic_fetch_add(&m->consumed, bytes, __ATOMIC_ACQ_REL);
  if (static_cast<int64_t>(Load(&m->granted) - before) >= static_cast<int64_t>(bytes)) return true;
  __atomic_fetch_sub(&m->consumed, bytes, __ATOMIC_ACQ_REL);
  return false;
}

void CreditTable::GiveBackCredit(uint32_t index, uint64_t bytes) {
  if (index < INC_CREDIT_MAX_FLOWS) __atomic_fetch_sub(&mem_[index].consumed, bytes, __ATOMIC_ACQ_REL);
}

Status CreditTable::DecrementQueued(uint32_t index, uint64_t frames) {
  if (index >= INC_CREDIT_MAX_FLOWS)
    return InvalidArgument("credit index " + std::to_string(index) + " out of range");
  __u64* q = &mem_[index].queued;
  __u64 cur = Load(q);
  do {
    if (cur < frames)
      return FailedPrecondition("credit flow index " + std::to_string(index) + " has " + std::to_string(cur) +
                                " queued frames, cannot take " + std::to_string(frames));
  } while (!__atomic_compare_exchange_n(q, &cur, cur - frames, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
  return Status::Ok();
}

Status CreditTable::BindXsk(const std::string& port, uint32_t queue, int xsk_fd) {
  auto info = GetInterfaceInfo(port);
  if (!info.ok()) return NotFound("hold queue port " + port + " does not exist");
  inc_credit_xsk_key k{info->ifindex, queue};
  uint32_t slot = 0;
  if (bpf_map_lookup_elem(xsk_slots_fd_, &k, &slot) != 0) {
    std::vector<bool> taken(INC_CREDIT_MAX_XSKS, false);
    inc_credit_xsk_key cur{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(xsk_slots_fd_, prev, &next) == 0) {
      uint32_t s = 0;
      if (bpf_map_lookup_elem(xsk_slots_fd_, &next, &s) == 0 && s < INC_CREDIT_MAX_XSKS) taken[s] = true;
      cur = next;
      prev = &cur;
    }
    while (slot < INC_CREDIT_MAX_XSKS && taken[slot]) slot++;
    if (slot == INC_CREDIT_MAX_XSKS)
      return ResourceExhausted("hold queue sockets full (" + std::to_string(INC_CREDIT_MAX_XSKS) + ")");
  }
  // The socket first, then the slot: XDP never finds a slot without one.
  if (bpf_map_update_elem(xsks_fd_, &slot, &xsk_fd, BPF_ANY) != 0)
    return ErrnoStatus("put hold queue socket of " + port + " queue " + std::to_string(queue), errno);
  if (bpf_map_update_elem(xsk_slots_fd_, &k, &slot, BPF_ANY) != 0)
    return ErrnoStatus("bind hold queue of " + port + " queue " + std::to_string(queue), errno);
  return Status::Ok();
}

Status CreditTable::UnbindXsk(const std::string& port, uint32_t queue) {
  auto info = GetInterfaceInfo(port);
  if (!info.ok()) return NotFound("hold queue port " + port + " does not exist");
  inc_credit_xsk_key k{info->ifindex, queue};
  uint32_t slot = 0;
  if (bpf_map_lookup_elem(xsk_slots_fd_, &k, &slot) != 0)
    return NotFound("no hold queue socket on " + port + " queue " + std::to_string(queue));
  if (bpf_map_delete_elem(xsk_slots_fd_, &k) != 0) return ErrnoStatus("unbind hold queue of " + port, errno);
  if (bpf_map_delete_elem(xsks_fd_, &slot) != 0 && errno != ENOENT)
    return ErrnoStatus("remove hold queue socket of " + port, errno);
  return Status::Ok();
}

Expected<std::map<std::string, uint64_t>> CreditTable::ReadStats() const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return ErrnoStatus("count possible CPUs", -ncpu);
  std::map<std::string, uint64_t> out;
  std::vector<uint64_t> v(ncpu);
  for (uint32_t i = 0; i < INC_CREDIT__MAX; i++) {
    if (bpf_map_lookup_elem(stats_fd_, &i, v.data()) != 0) return ErrnoStatus("read credit stats", errno);
    uint64_t sum = 0;
    for (auto x : v) sum += x;
    out[CreditStatName(static_cast<int>(i))] = sum;
  }
  return out;
}

}  // namespace inc::dp
