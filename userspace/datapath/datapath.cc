// SPDX-License-Identifier: Apache-2.0
// libbpf implementation of inc::dp::Datapath around the inc_switch skeleton:
// loading (with pinned-state re-adoption), port attachment through pinned
// bpf_links, tree programming and counter reads.
#include "datapath/datapath.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "common/icrc.h"
#include "common/log.h"
#include "inc_switch.skel.h"

namespace inc::dp {
namespace {

constexpr uint16_t kSupportedDtypes =
    INC_BIT(INC_DTYPE_INT32) | INC_BIT(INC_DTYPE_FP32) | INC_BIT(INC_DTYPE_INT64) | INC_BIT(INC_DTYPE_FP64);
// Every op of the wire table has its lane loop in bpf/aggregate.h.
constexpr uint8_t kSupportedOps = INC_OPS_ALL;
static_assert(INC_OPS_ALL <= 0xff, "the tree configuration keeps ops in an 8-bit mask");
constexpr uint8_t kSupportedColls = INC_BIT(INC_COLL_ALLREDUCE) | INC_BIT(INC_COLL_REDUCE) |
                                    INC_BIT(INC_COLL_BROADCAST) | INC_BIT(INC_COLL_BARRIER);
constexpr uint32_t kMaxSlotCapacity = 1u << 20;

// Maps whose contents must survive an agent restart (see bpf/tree_maps.h).
const char* const kPinnedMaps[] = {"trees", "children", "port_child", "slots",       "psn",
                                   "stats", "drops",    "tree_stats", "member_stats"};

// Per-CPU counter arrays indexed by an enum that only ever grows at its end
// (a new drop reason): a smaller pinned one of a previous version is not
// re-adopted but copied into the new map, so an upgrade keeps the live trees
// and the counts.
bool IsGrowableCounterMap(const std::string& name) {
  return name == "stats" || name == "drops";
}

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof(buf), format, args);
  if (n <= 0) return 0;
  std::string line(buf, std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
  while (!line.empty() && line.back() == '\n') line.pop_back();
  switch (level) {
    case LIBBPF_WARN: LOG_WARN << "libbpf: " << line; break;
    case LIBBPF_INFO: LOG_DEBUG << "libbpf: " << line; break;
    default: break;
  }
  return n;
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct SkelDeleter {
  void operator()(inc_switch* s) const { inc_switch__destroy(s); }
};

Status MkdirP(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); i++) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + cur, errno);
    }
  }
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string IfName(uint32_t ifindex) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(ifindex, name) == nullptr) return "ifindex" + std::to_string(ifindex);
  return name;
}

std::string SlotRange(uint32_t base, uint32_t pool) {
  return "[" + std::to_string(base) + ", " + std::to_string(base + pool) + ")";
}

class XdpDatapath final : public Datapath {
 public:
  explicit XdpDatapath(Options o) : opts_(std::move(o)) {
    pin_dir_ = opts_.pin_root + "/" + opts_.switch_name;
  }
  ~XdpDatapath() override = default;  // links stay attached through their pins

  Status Init();

  bool adopted() const override { return adopted_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.slot_capacity = opts_.slot_capacity;
    c.dtype_mask = kSupportedDtypes;
    c.op_mask = kSupportedOps;
    c.coll_mask = kSupportedColls;
    c.verify_icrc = opts_.verify_icrc;
    return c;
  }

  Status AttachPort(const std::string& ifname) override;
  Status DetachPort(const std::string& ifname) override;
  std::vector<PortState> Ports() const override;
  Status ConfigureTree(const TreeSpec& spec) override;
  Status RemoveTree(uint16_t tree_id) override;
  Expected<std::vector<TreeSpec>> ListTrees() const override;
  uint32_t FreeSlots() const override;
  Expected<Stats> ReadStats() const override;
  Status Destroy() override;

  int ingress_prog_fd() const override { return bpf_program__fd(skel_->progs.inc_ingress_prog); }
  int egress_prog_fd() const override { return bpf_program__fd(skel_->progs.inc_egress_prog); }
  int map_fd(MapId map) const override {
    switch (map) {
      case MapId::kSlots: return fd(skel_->maps.slots);
      case MapId::kStats: return fd(skel_->maps.stats);
      case MapId::kDrops: return fd(skel_->maps.drops);
      case MapId::kBpt: return fd(skel_->maps.bpt);
      case MapId::kPortHealth: return fd(skel_->maps.port_health);
      case MapId::kPortTx: return fd(skel_->maps.port_tx);
      case MapId::kFwdStats: return fd(skel_->maps.fwd_stats);
      case MapId::kCreditFlows: return fd(skel_->maps.credit_flows);
      case MapId::kCreditCounters: return fd(skel_->maps.credit_counters);
      case MapId::kCreditIngress: return fd(skel_->maps.credit_ingress);
      case MapId::kCreditXskSlots: return fd(skel_->maps.credit_xsk_slots);
      case MapId::kCreditXsks: return fd(skel_->maps.credit_xsks);
      case MapId::kCreditStats: return fd(skel_->maps.credit_stats);
    }
    return -1;
  }
  std::string pin_dir() const override { return pin_dir_; }

 private:
  struct Port {
    std::string name;
    uint32_t ifindex = 0;
    Fd link;
  };

  std::string links_dir() const { return pin_dir_ + "/links"; }
  int fd(bpf_map* m) const { return bpf_map__fd(m); }
  Status ReuseOrPrepare(bpf_map* map, const std::string& name);
  Status CopyGrownCounters(bpf_map* map, const std::string& name, const std::string& path);
  Status FillXpow();
  Status AddToDevmap(uint32_t ifindex);
  Status AdoptLinks();
  Expected<inc_endpoint> ToEndpoint(const Endpoint& e, const std::string& what) const;
  Endpoint FromEndpoint(const inc_endpoint& e) const;
  Status Validate(const TreeSpec& spec) const;
  Expected<inc_tree_cfg> ReadTree(uint16_t tree_id) const;
  Status ClearSlots(uint32_t base, uint32_t pool);
  Status SyncLocalIps();
  Status ClearTreeChildren(uint16_t tree_id, const inc_tree_cfg& old);
  Expected<TreeSpec> ToSpec(uint16_t tree_id, const inc_tree_cfg& cfg) const;

  Options opts_;
  std::string pin_dir_;
  std::unique_ptr<inc_switch, SkelDeleter> skel_;
  bool adopted_ = false;
  bool destroyed_ = false;
  std::set<std::string> reused_;
  // Pinned counter maps of an older data path with fewer entries (see
  // IsGrowableCounterMap), copied into the new maps after load.
  struct GrownMap {
    Fd fd;
    uint32_t entries = 0;
  };
  std::map<std::string, GrownMap> grown_;
  std::map<std::string, Port> ports_;
  mutable std::mutex mu_;  // serialises control-plane calls
};

Status XdpDatapath::ReuseOrPrepare(bpf_map* map, const std::string& name) {
  std::string path = pin_dir_ + "/" + name;
  if (!PathExists(path)) return Status::Ok();
  Fd pinned(bpf_obj_get(path.c_str()));
  if (pinned.get() < 0) return ErrnoStatus("open pinned map " + path, errno);
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(pinned.get(), &info, &len) != 0) return ErrnoStatus("map info " + path, errno);
  if (IsGrowableCounterMap(name) && info.type == bpf_map__type(map) &&
      info.key_size == bpf_map__key_size(map) && info.value_size == bpf_map__value_size(map) &&
      info.max_entries < bpf_map__max_entries(map)) {
    grown_[name] = GrownMap{std::move(pinned), info.max_entries};
    return Status::Ok();
  }
  if (info.type != bpf_map__type(map) || info.key_size != bpf_map__key_size(map) ||
      info.value_size != bpf_map__value_size(map) || info.max_entries != bpf_map__max_entries(map)) {
    return FailedPrecondition(
        "pinned map " + path + " does not match this data path (value size " +
        std::to_string(info.value_size) + " vs " + std::to_string(bpf_map__value_size(map)) + ", entries " +
        std::to_string(info.max_entries) + " vs " + std::to_string(bpf_map__max_entries(map)) +
        "); remove it (Destroy) or use the same slot capacity");
  }
  int err = bpf_map__reuse_fd(map, pinned.get());
  if (err) return ErrnoStatus("reuse pinned map " + path, -err);
  reused_.insert(name);
  return Status::Ok();
}

Status XdpDatapath::CopyGrownCounters(bpf_map* map, const std::string& name, const std::string& path) {
  const GrownMap& old = grown_.at(name);
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return ErrnoStatus("count CPUs", -ncpu);
  std::vector<uint64_t> per_cpu(ncpu);
  for (uint32_t i = 0; i < old.entries; i++) {
    if (bpf_map_lookup_elem(old.fd.get(), &i, per_cpu.data()) != 0)
      return ErrnoStatus("read pinned map " + path, errno);
    if (bpf_map_update_elem(bpf_map__fd(map), &i, per_cpu.data(), BPF_ANY) != 0)
      return ErrnoStatus("copy counters of " + path, errno);
  }
  if (unlink(path.c_str()) != 0) return ErrnoStatus("replace pinned map " + path, errno);
  LOG_INFO << "pinned map " << name << " grew from " << old.entries << " to " << bpf_map__max_entries(map)
           << " counters (a newer data path); counts copied";
  adopted_ = true;
  return Status::Ok();
}

Status XdpDatapath::Init() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(LibbpfPrint); });

  if (opts_.switch_name.empty() || opts_.switch_name.find('/') != std::string::npos ||
      opts_.switch_name == "." || opts_.switch_name == "..") {
    return InvalidArgument("switch name '" + opts_.switch_name + "' is empty or not a plain name");
  }
  if (opts_.slot_capacity == 0 || opts_.slot_capacity > kMaxSlotCapacity) {
    return InvalidArgument("slot capacity " + std::to_string(opts_.slot_capacity) + " not in [1, " +
                           std::to_string(kMaxSlotCapacity) + "]");
  }
  skel_.reset(inc_switch__open());
  if (!skel_) return ErrnoStatus("open BPF skeleton inc_switch", errno);

  // Load-time constants: slice-by-8 CRC tables, ICRC verification.
  for (uint32_t i = 0; i < 256; i++) {
    uint8_t bytes[8] = {static_cast<uint8_t>(i)};
    for (int k = 0; k < 8; k++) skel_->rodata->inc_crc_tbl[k][i] = Crc32Le(0, bytes, k + 1);
  }
  skel_->rodata->inc_verify_icrc = opts_.verify_icrc ? 1 : 0;
  if (opts_.ip_ttl == 0) return InvalidArgument("IP TTL 0");
  skel_->rodata->inc_ip_ttl = opts_.ip_ttl;
  skel_->rodata->inc_ip_tos = opts_.ip_tos;

  int err = bpf_map__set_max_entries(skel_->maps.slots, opts_.slot_capacity * INC_SLOT_COPIES);
  if (err) return ErrnoStatus("size slot map", -err);

  INC_RETURN_IF_ERROR(MkdirP(links_dir()));
  for (const char* name : kPinnedMaps) {
    bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name);
    if (!m) return Internal(std::string("skeleton lacks map ") + name);
    INC_RETURN_IF_ERROR(ReuseOrPrepare(m, name));
  }
  adopted_ = !reused_.empty();

  err = inc_switch__load(skel_.get());
  if (err) return ErrnoStatus("load XDP data path (verifier log above)", -err);

  for (const char* name : kPinnedMaps) {
    if (reused_.count(name)) continue;
    bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name);
    std::string path = pin_dir_ + "/" + name;
    if (grown_.count(name)) INC_RETURN_IF_ERROR(CopyGrownCounters(m, name, path));
    err = bpf_map__pin(m, path.c_str());
    if (err) return ErrnoStatus("pin map " + path, -err);
  }
  INC_RETURN_IF_ERROR(FillXpow());
  INC_RETURN_IF_ERROR(AdoptLinks());
  INC_RETURN_IF_ERROR(SyncLocalIps());
  LOG_INFO << "data path for switch " << opts_.switch_name << (adopted_ ? " re-adopted" : " created")
           << " at " << pin_dir_ << " (" << opts_.slot_capacity << " slots, ICRC verification "
           << (opts_.verify_icrc ? "on" : "off") << ")";
  return Status::Ok();
}

Status XdpDatapath::FillXpow() {
  for (uint32_t i = 0; i < INC_XPOW_ENTRIES; i++) {
    uint32_t v = Crc32XPow8n(4 * static_cast<size_t>(i));
    if (bpf_map_update_elem(fd(skel_->maps.xpow), &i, &v, BPF_ANY) != 0)
      return ErrnoStatus("fill xpow map", errno);
  }
  return Status::Ok();
}

Status XdpDatapath::AddToDevmap(uint32_t ifindex) {
  bpf_devmap_val val{};
  val.ifindex = ifindex;
  val.bpf_prog.fd = egress_prog_fd();
  if (bpf_map_update_elem(fd(skel_->maps.ports), &ifindex, &val, BPF_ANY) != 0)
    return ErrnoStatus("add port " + IfName(ifindex) + " to the replication devmap", errno);
  return Status::Ok();
}

Status XdpDatapath::AdoptLinks() {
  DIR* dir = opendir(links_dir().c_str());
  if (!dir) return ErrnoStatus("open " + links_dir(), errno);
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(dir);
  for (const auto& name : names) {
    std::string path = links_dir() + "/" + name;
    Fd link(bpf_obj_get(path.c_str()));
    if (link.get() < 0) return ErrnoStatus("open pinned link " + path, errno);
    uint32_t ifindex = if_nametoindex(name.c_str());
    if (ifindex == 0) {
      LOG_WARN << "pinned link for vanished port " << name << " removed";
      unlink(path.c_str());
      continue;
    }
    INC_RETURN_IF_ERROR(AddToDevmap(ifindex));
    if (bpf_link_update(link.get(), ingress_prog_fd(), nullptr) != 0)
      return ErrnoStatus("switch port " + name + " to the new XDP program", errno);
    Port p;
    p.name = name;
    p.ifindex = ifindex;
    p.link = std::move(link);
    ports_[name] = std::move(p);
    adopted_ = true;
    LOG_INFO << "re-adopted XDP link on " << name;
  }
  return Status::Ok();
}

Status XdpDatapath::AttachPort(const std::string& ifname) {
  std::lock_guard<std::mutex> lock(mu_);
  if (destroyed_) return FailedPrecondition("data path destroyed");
  if (ports_.count(ifname)) return Status::Ok();
  auto info = GetInterfaceInfo(ifname);
  if (!info.ok()) return info.status().WithContext("attach port");
  INC_RETURN_IF_ERROR(AddToDevmap(info->ifindex));
  bpf_link_create_opts lopts{};
  lopts.sz = sizeof(lopts);
  lopts.flags = opts_.generic_xdp ? XDP_FLAGS_SKB_MODE : 0;
  Fd link(bpf_link_create(ingress_prog_fd(), info->ifindex, BPF_XDP, &lopts));
  if (link.get() < 0) {
    int e = errno;
    uint32_t key = info->ifindex;
    bpf_map_delete_elem(fd(skel_->maps.ports), &key);
    if (e == EBUSY || e == EEXIST) {
      // Switch ports stay exclusive (docs/operations.md "Other XDP programs
      // on the same interface"): name what is in the way and how to clear it.
      std::string what = "another XDP program";
      bpf_xdp_query_opts q{};
      q.sz = sizeof(q);
      if (bpf_xdp_query(static_cast<int>(info->ifindex), 0, &q) == 0 && q.prog_id) {
        what += " (id " + std::to_string(q.prog_id);
        if (int pfd = bpf_prog_get_fd_by_id(q.prog_id); pfd >= 0) {
          bpf_prog_info pi{};
          uint32_t len = sizeof(pi);
          if (bpf_obj_get_info_by_fd(pfd, &pi, &len) == 0 && pi.name[0]) what += std::string(", ") + pi.name;
          close(pfd);
        }
        what += ")";
      }
      return FailedPrecondition(
          "attach XDP to " + ifname + ": " + what +
          " is attached; a switch port runs incin's program alone: remove it (xdp-loader "
          "unload " +
          ifname + " --all, or ip link set dev " + ifname + " xdp off) or use another port");
    }
    return ErrnoStatus("attach XDP to " + ifname, e);
  }
  std::string path = links_dir() + "/" + ifname;
  if (bpf_obj_pin(link.get(), path.c_str()) != 0) {
    int e = errno;
    bpf_link_detach(link.get());
    return ErrnoStatus("pin XDP link " + path, e);
  }
  Port p;
  p.name = ifname;
  p.ifindex = info->ifindex;
  p.link = std::move(link);
  ports_[ifname] = std::move(p);
  LOG_INFO << "XDP attached to " << ifname << (opts_.generic_xdp ? " (generic)" : " (native)");
  return SyncLocalIps();
}

Status XdpDatapath::DetachPort(const std::string& ifname) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(ifname);
  if (it == ports_.end()) return NotFound("port " + ifname + " is not attached");
  uint32_t key = it->second.ifindex;
  bpf_map_delete_elem(fd(skel_->maps.ports), &key);
  unlink((links_dir() + "/" + ifname).c_str());
  if (bpf_link_detach(it->second.link.get()) != 0 && errno != ENOENT && errno != ENOLINK) {
    LOG_WARN << "detach XDP link of " << ifname << ": " << std::strerror(errno);
  }
  ports_.erase(it);
  return SyncLocalIps();
}

std::vector<PortState> XdpDatapath::Ports() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PortState> out;
  for (const auto& [name, p] : ports_) {
    PortState s;
    s.name = name;
    s.ifindex = p.ifindex;
    auto info = GetInterfaceInfo(name);
    if (info.ok()) {
      s.mac = info->mac;
      s.ip = info->ip;
    }
    s.attached = true;
    out.push_back(s);
  }
  return out;
}

Expected<inc_endpoint> XdpDatapath::ToEndpoint(const Endpoint& e, const std::string& what) const {
  auto info = GetInterfaceInfo(e.port);
  if (!info.ok()) {
    return Status(info.status().code() == Code::kInvalidArgument ? Code::kInvalidArgument : Code::kNotFound,
                  what + ": port '" + e.port + "': " + info.status().message());
  }
  if (info->ip.host == 0) return FailedPrecondition(what + ": port " + e.port + " has no IPv4 address");
  if (e.peer_qpn > INC_QPN_MASK || e.switch_qpn > INC_QPN_MASK)
    return InvalidArgument(what + ": QPN above 24 bits");
  if (e.member_lo > e.member_hi)
    return InvalidArgument(what + ": member range [" + std::to_string(e.member_lo) + ", " +
                           std::to_string(e.member_hi) + ") is reversed");
  if (e.peer_ip.host == 0) return InvalidArgument(what + ": peer IP is 0.0.0.0");
  inc_endpoint out{};
  out.ifindex = info->ifindex;
  std::memcpy(out.peer_mac, e.peer_mac.bytes.data(), 6);
  std::memcpy(out.port_mac, info->mac.bytes.data(), 6);
  out.peer_ip = e.peer_ip.be();
  out.switch_ip = info->ip.be();
  out.peer_qpn = e.peer_qpn;
  out.switch_qpn = e.switch_qpn;
  out.rkey = e.rkey;
  out.slot_stride = e.slot_stride;
  out.va_base = e.va_base;
  out.member_lo = e.member_lo;
  out.member_hi = e.member_hi;
  out.flags = INC_EP_VALID;
  return out;
}

Endpoint XdpDatapath::FromEndpoint(const inc_endpoint& e) const {
  Endpoint out;
  out.port = IfName(e.ifindex);
  std::memcpy(out.peer_mac.bytes.data(), e.peer_mac, 6);
  out.peer_ip = Ipv4::FromBe(e.peer_ip);
  out.peer_qpn = e.peer_qpn;
  out.switch_qpn = e.switch_qpn;
  out.rkey = e.rkey;
  out.va_base = e.va_base;
  out.slot_stride = e.slot_stride;
  out.member_lo = e.member_lo;
  out.member_hi = e.member_hi;
  return out;
}

Status XdpDatapath::Validate(const TreeSpec& spec) const {
  const std::string t = "tree " + std::to_string(spec.tree_id);
  if (spec.tree_id == 0 || spec.tree_id >= INC_MAX_TREES)
    return InvalidArgument("tree id " + std::to_string(spec.tree_id) + " not in [1, " +
                           std::to_string(INC_MAX_TREES - 1) + "]");
  if (spec.role != INC_ROLE_SINGLE && spec.role != INC_ROLE_LEAF && spec.role != INC_ROLE_ROOT)
    return InvalidArgument(t + ": role " + std::to_string(spec.role) +
                           " is not single(1), leaf(2) or root(3)");
  if (spec.pool_size == 0) return InvalidArgument(t + ": pool size 0");
  if (spec.max_elems == 0 || spec.max_elems > INC_MAX_PAYLOAD_BYTES / 4)
    return InvalidArgument(t + ": elements per packet " + std::to_string(spec.max_elems) + " not in [1, " +
                           std::to_string(INC_MAX_PAYLOAD_BYTES / 4) + "]");
  if (spec.dtype_mask & ~kSupportedDtypes)
    return InvalidArgument(t + ": data type mask 0x" + std::to_string(spec.dtype_mask) +
                           " has types the data path does not compute (INT32, FP32, INT64 only)");
  if (spec.op_mask & ~kSupportedOps) return InvalidArgument(t + ": operation mask has unknown operations");
  if (spec.coll_mask & ~kSupportedColls)
    return InvalidArgument(t +
                           ": collective mask has collectives the data path does not run (ReduceScatter and "
                           "AllGather are host-level)");
  if (spec.children.empty() || spec.children.size() > INC_MAX_CHILDREN)
    return InvalidArgument(t + ": " + std::to_string(spec.children.size()) + " children, need 1.." +
                           std::to_string(INC_MAX_CHILDREN));
  if (spec.role == INC_ROLE_LEAF && !spec.parent) return InvalidArgument(t + ": leaf role needs a parent");
  if (spec.role != INC_ROLE_LEAF && spec.parent) return InvalidArgument(t + ": only a leaf has a parent");
  if (spec.rank_at_parent >= INC_MAX_CHILDREN) return InvalidArgument(t + ": rank at parent above 63");
  if (uint64_t{spec.slot_base} + spec.pool_size > opts_.slot_capacity)
    return ResourceExhausted(t + ": slots " + SlotRange(spec.slot_base, spec.pool_size) +
                             " exceed the capacity of " + std::to_string(opts_.slot_capacity));
  std::set<std::string> ports;
  for (size_t i = 0; i < spec.children.size(); i++) {
    const auto& c = spec.children[i];
    if (!ports.insert(c.port).second)
      return InvalidArgument(t + ": children " + std::to_string(i) + " and another share port " + c.port +
                             " (a tree has at most one child per port)");
    for (size_t j = 0; j < i; j++) {
      const auto& o = spec.children[j];
      if (c.member_lo < c.member_hi && o.member_lo < o.member_hi && c.member_lo < o.member_hi &&
          o.member_lo < c.member_hi)
        return InvalidArgument(t + ": member ranges of children " + std::to_string(j) + " and " +
                               std::to_string(i) + " overlap");
    }
  }
  return Status::Ok();
}

Expected<inc_tree_cfg> XdpDatapath::ReadTree(uint16_t tree_id) const {
  uint32_t key = tree_id;
  inc_tree_cfg cfg{};
  if (bpf_map_lookup_elem(fd(skel_->maps.trees), &key, &cfg) != 0) return ErrnoStatus("read tree", errno);
  return cfg;
}

// Makes local_ips hold exactly this switch's addresses: the IPv4 address of
// every attached port and the switch_ip of every endpoint of every active
// tree (the addresses INC frames are sent to). Anything else with opcode
// 0x2B is transit traffic the data path passes to the kernel.
Status XdpDatapath::SyncLocalIps() {
  std::map<uint32_t, uint32_t> want;
  for (const auto& [name, port] : ports_) {
    auto info = GetInterfaceInfo(name);
    if (info.ok() && info->ip.host != 0) want[info->ip.be()]++;
  }
  for (uint32_t t = 1; t < INC_MAX_TREES; t++) {
    auto cfg = ReadTree(static_cast<uint16_t>(t));
    if (!cfg.ok()) return cfg.status();
    if (!(cfg->flags & INC_TREE_ACTIVE)) continue;
    if (cfg->role == INC_ROLE_LEAF) want[cfg->parent.switch_ip]++;
    for (uint32_t r = 0; r < INC_MAX_CHILDREN; r++) {
      if (!(cfg->children_mask & (1ull << r))) continue;
      uint32_t idx = inc_child_index(t, r);
      inc_endpoint ep{};
      if (bpf_map_lookup_elem(fd(skel_->maps.children), &idx, &ep) != 0)
        return ErrnoStatus("read child", errno);
      if (ep.flags & INC_EP_VALID) want[ep.switch_ip]++;
    }
  }
  int map = fd(skel_->maps.local_ips);
  std::vector<uint32_t> stale;
  uint32_t key = 0, next = 0;
  for (uint32_t* prev = nullptr; bpf_map_get_next_key(map, prev, &next) == 0; prev = &key) {
    if (!want.count(next)) stale.push_back(next);
    key = next;
  }
  for (uint32_t ip : stale) bpf_map_delete_elem(map, &ip);
  for (const auto& [ip, users] : want) {
    if (bpf_map_update_elem(map, &ip, &users, BPF_ANY) != 0) return ErrnoStatus("set local address", errno);
  }
  return Status::Ok();
}

Status XdpDatapath::ClearSlots(uint32_t base, uint32_t pool) {
  inc_slot zero{};
  for (uint32_t i = base * INC_SLOT_COPIES; i < (base + pool) * INC_SLOT_COPIES; i++) {
    if (bpf_map_update_elem(fd(skel_->maps.slots), &i, &zero, BPF_ANY) != 0)
      return ErrnoStatus("reset slot", errno);
  }
  return Status::Ok();
}

Status XdpDatapath::ClearTreeChildren(uint16_t tree_id, const inc_tree_cfg& old) {
  inc_endpoint zero{};
  for (uint32_t r = 0; r < INC_MAX_CHILDREN; r++) {
    uint32_t idx = inc_child_index(tree_id, r);
    inc_endpoint ep{};
    if (bpf_map_lookup_elem(fd(skel_->maps.children), &idx, &ep) == 0 && (ep.flags & INC_EP_VALID)) {
      inc_port_key key{};
      key.ifindex = ep.ifindex;
      key.tree_id = tree_id;
      bpf_map_delete_elem(fd(skel_->maps.port_child), &key);
    }
    if (old.children_mask & (1ull << r) || ep.flags) {
      if (bpf_map_update_elem(fd(skel_->maps.children), &idx, &zero, BPF_ANY) != 0)
        return ErrnoStatus("clear child", errno);
    }
  }
  return Status::Ok();
}

Status XdpDatapath::ConfigureTree(const TreeSpec& in) {
  std::lock_guard<std::mutex> lock(mu_);
  if (destroyed_) return FailedPrecondition("data path destroyed");
  INC_RETURN_IF_ERROR(Validate(in));
  TreeSpec spec = in;
  if (spec.dtype_mask == 0) spec.dtype_mask = kSupportedDtypes;
  if (spec.op_mask == 0) spec.op_mask = kSupportedOps;
  if (spec.coll_mask == 0) spec.coll_mask = kSupportedColls;
  const std::string t = "tree " + std::to_string(spec.tree_id);

  // Slot ranges of the other trees.
  for (uint32_t id = 1; id < INC_MAX_TREES; id++) {
    if (id == spec.tree_id) continue;
    auto other = ReadTree(static_cast<uint16_t>(id));
    if (!other.ok()) return other.status();
    if (!(other->flags & INC_TREE_ACTIVE)) continue;
    if (spec.slot_base < other->slot_base + other->pool_size &&
        other->slot_base < spec.slot_base + spec.pool_size)
      return FailedPrecondition(t + ": slots " + SlotRange(spec.slot_base, spec.pool_size) +
                                " overlap tree " + std::to_string(id) + "'s " +
                                SlotRange(other->slot_base, other->pool_size));
  }

  for (const auto& c : spec.children) {
    if (!ports_.count(c.port)) {
      LOG_WARN << t << ": child port " << c.port << " is not attached; results will not reach it until it is";
    }
  }
  std::vector<inc_endpoint> eps;
  for (size_t i = 0; i < spec.children.size(); i++) {
    auto ep = ToEndpoint(spec.children[i], t + " child " + std::to_string(i));
    if (!ep.ok()) return ep.status();
    eps.push_back(*ep);
  }
  inc_tree_cfg cfg{};
  if (spec.parent) {
    auto ep = ToEndpoint(*spec.parent, t + " parent");
    if (!ep.ok()) return ep.status();
    cfg.parent = *ep;
  }

  auto old = ReadTree(spec.tree_id);
  if (!old.ok()) return old.status();
  bool existed = old->flags & INC_TREE_ACTIVE;
  if (existed) {
    auto current = ToSpec(spec.tree_id, *old);
    if (current.ok() && *current == spec) return Status::Ok();  // idempotent
  }

  cfg.key = spec.key;
  cfg.role = spec.role;
  cfg.num_children = static_cast<uint8_t>(spec.children.size());
  cfg.rank_at_parent = spec.rank_at_parent;
  cfg.flags = INC_TREE_ACTIVE;
  cfg.pool_size = spec.pool_size;
  cfg.max_elems = spec.max_elems;
  cfg.slot_base = spec.slot_base;
  cfg.dtype_mask = spec.dtype_mask;
  cfg.op_mask = spec.op_mask;
  cfg.coll_mask = spec.coll_mask;
  cfg.generation = existed ? old->generation + 1 : 1;
  cfg.children_mask = spec.children.size() == 64 ? ~0ull : ((1ull << spec.children.size()) - 1);

  bool layout_changed = !existed || old->slot_base != spec.slot_base || old->pool_size != spec.pool_size ||
                        old->role != spec.role;
  if (layout_changed) {
    // The tree stops aggregating while its slots are reset.
    if (existed) {
      inc_tree_cfg off = *old;
      off.flags = 0;
      uint32_t key = spec.tree_id;
      if (bpf_map_update_elem(fd(skel_->maps.trees), &key, &off, BPF_ANY) != 0)
        return ErrnoStatus(t + ": pause tree", errno);
    }
    INC_RETURN_IF_ERROR(ClearSlots(spec.slot_base, spec.pool_size));
  }
  // Children are rewritten in place so packets in flight keep matching;
  // entries the new spec no longer has are removed after the tree is updated.
  std::vector<inc_endpoint> old_eps(INC_MAX_CHILDREN);
  for (uint32_t r = 0; r < INC_MAX_CHILDREN; r++) {
    uint32_t idx = inc_child_index(spec.tree_id, r);
    if (bpf_map_lookup_elem(fd(skel_->maps.children), &idx, &old_eps[r]) != 0) old_eps[r] = inc_endpoint{};
  }
  for (uint32_t r = 0; r < eps.size(); r++) {
    uint32_t idx = inc_child_index(spec.tree_id, r);
    if (bpf_map_update_elem(fd(skel_->maps.children), &idx, &eps[r], BPF_ANY) != 0)
      return ErrnoStatus(t + ": write child", errno);
    inc_port_key key{};
    key.ifindex = eps[r].ifindex;
    key.tree_id = spec.tree_id;
    if (bpf_map_update_elem(fd(skel_->maps.port_child), &key, &r, BPF_ANY) != 0)
      return ErrnoStatus(t + ": write port table", errno);
  }
  uint32_t key = spec.tree_id;
  if (bpf_map_update_elem(fd(skel_->maps.trees), &key, &cfg, BPF_ANY) != 0)
    return ErrnoStatus(t + ": write tree", errno);
  std::set<uint32_t> new_ports;
  for (const auto& ep : eps) new_ports.insert(ep.ifindex);
  inc_endpoint zero{};
  for (uint32_t r = 0; r < INC_MAX_CHILDREN; r++) {
    const inc_endpoint& o = old_eps[r];
    if (!(o.flags & INC_EP_VALID)) continue;
    if (!new_ports.count(o.ifindex)) {
      inc_port_key pk{};
      pk.ifindex = o.ifindex;
      pk.tree_id = spec.tree_id;
      bpf_map_delete_elem(fd(skel_->maps.port_child), &pk);
    }
    if (r >= eps.size()) {
      uint32_t idx = inc_child_index(spec.tree_id, r);
      if (bpf_map_update_elem(fd(skel_->maps.children), &idx, &zero, BPF_ANY) != 0)
        return ErrnoStatus(t + ": clear child", errno);
    }
  }
  LOG_INFO << (existed ? "reconfigured " : "configured ") << t << ": role " << int{spec.role} << ", "
           << spec.children.size() << " children, slots " << SlotRange(spec.slot_base, spec.pool_size)
           << (existed && layout_changed ? " (slots reset)" : "");
  return SyncLocalIps();
}

Status XdpDatapath::RemoveTree(uint16_t tree_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tree_id == 0 || tree_id >= INC_MAX_TREES)
    return NotFound("tree " + std::to_string(tree_id) + " not found");
  auto old = ReadTree(tree_id);
  if (!old.ok()) return old.status();
  if (!(old->flags & INC_TREE_ACTIVE)) return NotFound("tree " + std::to_string(tree_id) + " not found");
  inc_tree_cfg zero{};
  uint32_t key = tree_id;
  if (bpf_map_update_elem(fd(skel_->maps.trees), &key, &zero, BPF_ANY) != 0)
    return ErrnoStatus("remove tree", errno);
  INC_RETURN_IF_ERROR(ClearTreeChildren(tree_id, *old));
  INC_RETURN_IF_ERROR(ClearSlots(old->slot_base, old->pool_size));
  LOG_DEBUG << "removed tree " << tree_id;  // the switch agent logs it at info, with its job
  return SyncLocalIps();
}

Expected<TreeSpec> XdpDatapath::ToSpec(uint16_t tree_id, const inc_tree_cfg& cfg) const {
  TreeSpec s;
  s.tree_id = tree_id;
  s.key = cfg.key;
  s.role = cfg.role;
  s.pool_size = cfg.pool_size;
  s.max_elems = cfg.max_elems;
  s.slot_base = cfg.slot_base;
  s.dtype_mask = cfg.dtype_mask;
  s.op_mask = cfg.op_mask;
  s.coll_mask = cfg.coll_mask;
  s.rank_at_parent = cfg.rank_at_parent;
  for (uint32_t r = 0; r < cfg.num_children && r < INC_MAX_CHILDREN; r++) {
    uint32_t idx = inc_child_index(tree_id, r);
    inc_endpoint ep{};
    if (bpf_map_lookup_elem(fd(skel_->maps.children), &idx, &ep) != 0)
      return ErrnoStatus("read child", errno);
    s.children.push_back(FromEndpoint(ep));
  }
  if (cfg.role == INC_ROLE_LEAF) s.parent = FromEndpoint(cfg.parent);
  return s;
}

Expected<std::vector<TreeSpec>> XdpDatapath::ListTrees() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TreeSpec> out;
  for (uint32_t id = 1; id < INC_MAX_TREES; id++) {
    auto cfg = ReadTree(static_cast<uint16_t>(id));
    if (!cfg.ok()) return cfg.status();
    if (!(cfg->flags & INC_TREE_ACTIVE)) continue;
    auto spec = ToSpec(static_cast<uint16_t>(id), *cfg);
    if (!spec.ok()) return spec.status();
    out.push_back(std::move(*spec));
  }
  return out;
}

uint32_t XdpDatapath::FreeSlots() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t used = 0;
  for (uint32_t id = 1; id < INC_MAX_TREES; id++) {
    auto cfg = ReadTree(static_cast<uint16_t>(id));
    if (cfg.ok() && (cfg->flags & INC_TREE_ACTIVE)) used += cfg->pool_size;
  }
  return used >= opts_.slot_capacity ? 0 : opts_.slot_capacity - static_cast<uint32_t>(used);
}

void AddCounters(Counters* c, const inc_counters& v) {
  c->rx_packets += v.rx_packets;
  c->rx_bytes += v.rx_bytes;
  c->tx_packets += v.tx_packets;
  c->tx_bytes += v.tx_bytes;
  c->completions += v.completions;
  c->retransmissions += v.retransmissions;
  c->drops += v.drops;
}

Expected<Stats> XdpDatapath::ReadStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return ErrnoStatus("count CPUs", -ncpu);
  Stats st;
  std::vector<uint64_t> u64s(ncpu);
  for (uint32_t i = 0; i < INC_STAT__MAX; i++) {
    if (bpf_map_lookup_elem(fd(skel_->maps.stats), &i, u64s.data()) != 0)
      return ErrnoStatus("read stats", errno);
    uint64_t sum = 0;
    for (auto v : u64s) sum += v;
    st.global[StatName(i)] = sum;
  }
  for (uint32_t i = 1; i < INC_DROP__MAX; i++) {
    if (bpf_map_lookup_elem(fd(skel_->maps.drops), &i, u64s.data()) != 0)
      return ErrnoStatus("read drops", errno);
    uint64_t sum = 0;
    for (auto v : u64s) sum += v;
    st.drops[DropReasonName(i)] = sum;
  }
  std::vector<inc_counters> cs(ncpu);
  for (uint32_t id = 1; id < INC_MAX_TREES; id++) {
    auto cfg = ReadTree(static_cast<uint16_t>(id));
    if (!cfg.ok()) return cfg.status();
    if (!(cfg->flags & INC_TREE_ACTIVE)) continue;
    if (bpf_map_lookup_elem(fd(skel_->maps.tree_stats), &id, cs.data()) != 0)
      return ErrnoStatus("read tree stats", errno);
    Counters& t = st.trees[static_cast<uint16_t>(id)];
    for (const auto& c : cs) AddCounters(&t, c);
    for (uint32_t r = 0; r < cfg->num_children && r < INC_MAX_CHILDREN; r++) {
      uint32_t idx = inc_child_index(id, r);
      if (bpf_map_lookup_elem(fd(skel_->maps.member_stats), &idx, cs.data()) != 0)
        return ErrnoStatus("read member stats", errno);
      Counters& m = st.members[{static_cast<uint16_t>(id), static_cast<uint16_t>(r)}];
      for (const auto& c : cs) AddCounters(&m, c);
    }
  }
  return st;
}

Status XdpDatapath::Destroy() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (destroyed_) return Status::Ok();
    for (const auto& [name, p] : ports_) names.push_back(name);
  }
  Status first;
  for (const auto& n : names) {
    Status s = DetachPort(n);
    if (!s.ok() && first.ok()) first = s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const char* name : kPinnedMaps) {
    std::string path = pin_dir_ + "/" + name;
    if (unlink(path.c_str()) != 0 && errno != ENOENT && first.ok())
      first = ErrnoStatus("unpin " + path, errno);
  }
  rmdir(links_dir().c_str());
  rmdir(pin_dir_.c_str());
  destroyed_ = true;
  LOG_INFO << "data path for switch " << opts_.switch_name << " destroyed";
  return first;
}

}  // namespace

Expected<std::unique_ptr<Datapath>> Datapath::Open(const Options& options) {
  auto dp = std::make_unique<XdpDatapath>(options);
  Status st = dp->Init();
  if (!st.ok()) return st.WithContext("open data path");
  return std::unique_ptr<Datapath>(std::move(dp));
}

}  // namespace inc::dp
