#include "datapath/hold_queue.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/abi.h"
#include "common/log.h"
#include "common/net.h"
#include "common/xsk_stats.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace inc::dp {
namespace {

constexpr uint32_t kChunk = 2048;
constexpr size_t kEth = 14, kIp = 20, kUdp = 8;
constexpr uint64_t kStaleNs = 10'000'000;  // 'queued' unexplained this long: the kernel dropped them

uint32_t Acquire(const uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
void Release(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

// The gate's flow key of a frame (bpf/credit.h), or false when the frame is
// not an option-less IPv4/UDP 4791 frame with a BTH.
bool ParseKey(const uint8_t* d, size_t len, CreditFlowKey* key) {
  if (len < kEth + kIp + kUdp + 12) return false;
  if (d[12] != 0x08 || d[13] != 0x00 || d[kEth] != 0x45 || d[kEth + 9] != IPPROTO_UDP) return false;
  uint16_t dport = static_cast<uint16_t>(d[kEth + kIp + 2] << 8 | d[kEth + kIp + 3]);
  if (dport != INC_ROCEV2_UDP_PORT) return false;
  uint32_t be = 0;
  std::memcpy(&be, d + kEth + 12, 4);
  key->src = Ipv4::FromBe(be);
  std::memcpy(&be, d + kEth + 16, 4);
  key->dst = Ipv4::FromBe(be);
  key->sport = static_cast<uint16_t>(d[kEth + kIp] << 8 | d[kEth + kIp + 1]);
  const uint8_t* bth = d + kEth + kIp + kUdp;
  key->dest_qpn = static_cast<uint32_t>(bth[5] << 16 | bth[6] << 8 | bth[7]);
  return true;
}

uint32_t RxQueues(const std::string& port) {
  uint32_t n = 0;
  DIR* dir = opendir(("/sys/class/net/" + port + "/queues").c_str());
  if (!dir) return 1;
  while (dirent* e = readdir(dir))
    if (std::strncmp(e->d_name, "rx-", 3) == 0) n++;
  closedir(dir);
  return n ? n : 1;
}

}  // namespace

// ------------------------------------------------------------- XskIntake

Expected<std::unique_ptr<XskIntake>> XskIntake::Open(const std::string& port, uint32_t queue,
                                                     uint32_t chunks) {
  if (chunks < 64 || (chunks & (chunks - 1)))
    return InvalidArgument("hold queue chunks must be a power of two >= 64, not " + std::to_string(chunks));
  std::unique_ptr<XskIntake> x(new XskIntake());
  x->port_ = port;
  x->queue_ = queue;
  x->ifindex_ = if_nametoindex(port.c_str());
  if (!x->ifindex_) return NotFound("hold queue port " + port + " does not exist");
  INC_RETURN_IF_ERROR(x->Init(chunks));
  return x;
}

Status XskIntake::Map(Ring* ring, uint64_t pgoff, uint64_t producer, uint64_t consumer, uint64_t desc,
                      size_t desc_size, uint32_t size) {
  ring->map_len = desc + size * desc_size;
  ring->map = mmap(nullptr, ring->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, pgoff);
  if (ring->map == MAP_FAILED) {
    ring->map = nullptr;
    return ErrnoStatus("mmap AF_XDP ring of " + port_, errno);
  }
  auto* base = static_cast<uint8_t*>(ring->map);
  ring->producer = reinterpret_cast<uint32_t*>(base + producer);
  ring->consumer = reinterpret_cast<uint32_t*>(base + consumer);
  ring->descs = base + desc;
  ring->size = size;
  return Status::Ok();
}

Status XskIntake::Init(uint32_t chunks) {
  fd_ = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return ErrnoStatus("socket(AF_XDP)", errno);
  umem_len_ = size_t{chunks} * kChunk;
  void* mem = mmap(nullptr, umem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return ErrnoStatus("allocate hold queue UMEM", errno);
  umem_ = static_cast<uint8_t*>(mem);
  xdp_umem_reg reg{};
  reg.addr = reinterpret_cast<uint64_t>(umem_);
  reg.len = umem_len_;
  reg.chunk_size = kChunk;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)))
    return ErrnoStatus("XDP_UMEM_REG on " + port_, errno);
  // The fill ring holds every chunk, RX half of them; the completion ring is
  // required by bind even though the intake never transmits.
  uint32_t fill = chunks, rx = chunks / 2, comp = 64;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_FILL_RING, &fill, sizeof(fill)) ||
      setsockopt(fd_, SOL_XDP, XDP_UMEM_COMPLETION_RING, &comp, sizeof(comp)) ||
      setsockopt(fd_, SOL_XDP, XDP_RX_RING, &rx, sizeof(rx)))
    return ErrnoStatus("size AF_XDP rings of " + port_, errno);
  xdp_mmap_offsets off{};
  socklen_t optlen = sizeof(off);
  if (getsockopt(fd_, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen))
    return ErrnoStatus("XDP_MMAP_OFFSETS", errno);
  INC_RETURN_IF_ERROR(Map(&fill_, XDP_UMEM_PGOFF_FILL_RING, off.fr.producer, off.fr.consumer, off.fr.desc,
                          sizeof(uint64_t), fill));
  INC_RETURN_IF_ERROR(
      Map(&rx_, XDP_PGOFF_RX_RING, off.rx.producer, off.rx.consumer, off.rx.desc, sizeof(xdp_desc), rx));
  auto* fq = static_cast<uint64_t*>(fill_.descs);
  for (uint32_t i = 0; i < chunks; i++) fq[i] = uint64_t{i} * kChunk;
  Release(fill_.producer, chunks);
  sockaddr_xdp sa{};
  sa.sxdp_family = AF_XDP;
  sa.sxdp_flags = XDP_COPY;
  sa.sxdp_ifindex = ifindex_;
  sa.sxdp_queue_id = queue_;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)))
    return ErrnoStatus("bind hold queue socket to " + port_ + " queue " + std::to_string(queue_), errno);
  return Status::Ok();
}

XskIntake::~XskIntake() {
  for (Ring* r : {&rx_, &fill_})
    if (r->map) munmap(r->map, r->map_len);
  if (fd_ >= 0) close(fd_);
  if (umem_) munmap(umem_, umem_len_);
}

size_t XskIntake::Receive(const std::function<void(const uint8_t*, size_t)>& fn, size_t max) {
  uint32_t cons = *rx_.consumer, prod = Acquire(rx_.producer);
  uint32_t n = prod - cons;
  if (n > max) n = static_cast<uint32_t>(max);
  if (!n) return 0;
  auto* descs = static_cast<xdp_desc*>(rx_.descs);
  auto* fq = static_cast<uint64_t*>(fill_.descs);
  uint32_t fill_prod = *fill_.producer;
  for (uint32_t i = 0; i < n; i++) {
    const xdp_desc& d = descs[(cons + i) & (rx_.size - 1)];
    if (d.addr + d.len <= umem_len_) fn(umem_ + d.addr, d.len);
    // The fill ring has room for every chunk, so this never overtakes the
    // kernel's consumer.
    fq[(fill_prod + i) & (fill_.size - 1)] = d.addr - d.addr % kChunk;
  }
  Release(rx_.consumer, cons + n);
  Release(fill_.producer, fill_prod + n);
  received_ += n;
  return n;
}

XskIntake::Stats XskIntake::stats() const {
  Stats s;
  s.received = received_;
  const XskKernelStats k = ReadXskKernelStats(fd_);
  s.rx_dropped = k.rx_dropped;
  s.rx_ring_full = k.rx_ring_full;
  s.fill_empty = k.rx_fill_empty;
  return s;
}

// ------------------------------------------------------------- HoldQueue

Expected<std::unique_ptr<HoldQueue>> HoldQueue::Open(CreditTable* table,
                                                     const std::vector<std::string>& ports,
                                                     uint64_t limit_bytes, uint32_t chunks_per_queue) {
  std::unique_ptr<HoldQueue> q(new HoldQueue(table, limit_bytes));
  q->packet_fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (q->packet_fd_ < 0) return ErrnoStatus("socket(AF_PACKET) for the hold queue", errno);
  for (const auto& port : ports) {
    for (uint32_t queue = 0, n = RxQueues(port); queue < n; queue++) {
      auto x = XskIntake::Open(port, queue, chunks_per_queue);
      if (!x.ok()) return x.status();
      INC_RETURN_IF_ERROR(table->BindXsk(port, queue, (*x)->fd()));
      q->intakes_.push_back(std::move(*x));
    }
  }
  return q;
}

HoldQueue::~HoldQueue() {
  for (const auto& x : intakes_) (void)table_->UnbindXsk(x->port(), x->queue());
  if (packet_fd_ >= 0) close(packet_fd_);
}

std::vector<int> HoldQueue::fds() const {
  std::vector<int> out;
  for (const auto& x : intakes_) out.push_back(x->fd());
  return out;
}

void HoldQueue::Take(const uint8_t* data, size_t len, uint32_t ingress) {
  stats_.received++;
  CreditFlowKey key;
  if (!ParseKey(data, len, &key)) {
    stats_.dropped_malformed++;
    return;
  }
  auto s = table_->Lookup(key);
  if (!s.ok()) {
    stats_.dropped_no_flow++;
    return;
  }
  if (held_bytes_ + len > limit_bytes_) {
    stats_.dropped_overflow++;
    (void)table_->DecrementQueued(s->index);  // 0 after a reconcile: nothing to undo
    return;
  }
  FlowQueue& q = flows_[key];
  q.frames.push_back(Frame{std::vector<uint8_t>(data, data + len), ingress});
  q.bytes += len;
  held_bytes_ += len;
}

size_t HoldQueue::Intake() {
  size_t n = 0;
  for (auto& x : intakes_) {
    uint32_t ingress = x->ifindex();
    n += x->Receive([&](const uint8_t* d, size_t len) { Take(d, len, ingress); }, 256);
  }
  return n;
}

Status HoldQueue::Send(const CreditFlowState& s, Frame& f) {
  uint8_t* d = f.bytes.data();
  std::memcpy(d, s.dmac.bytes.data(), 6);
  std::memcpy(d + 6, s.smac.bytes.data(), 6);
  // TTL - 1 with the incremental checksum update of RFC 1624, as XDP does.
  uint16_t check = 0;
  std::memcpy(&check, d + kEth + 10, 2);
  uint32_t sum = uint32_t{check} + htons(0x0100);
  check = static_cast<uint16_t>(sum + (sum >> 16));
  d[kEth + 8]--;
  std::memcpy(d + kEth + 10, &check, 2);
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = static_cast<int>(s.ifindex);
  to.sll_halen = ETH_ALEN;
  std::memcpy(to.sll_addr, s.dmac.bytes.data(), 6);
  ssize_t r = sendto(packet_fd_, d, f.bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  if (r == static_cast<ssize_t>(f.bytes.size())) return Status::Ok();
  int err = r < 0 ? errno : EMSGSIZE;
  // Undo the rewrite: the frame stays at the head for the next attempt.
  d[kEth + 8]++;
  sum = uint32_t{check} + static_cast<uint16_t>(~htons(0x0100));
  check = static_cast<uint16_t>(sum + (sum >> 16));
  std::memcpy(d + kEth + 10, &check, 2);
  return ErrnoStatus("hold queue send on ifindex " + std::to_string(s.ifindex), err);
}

size_t HoldQueue::Drain(uint64_t now_ns) {
  size_t sent = 0;
  for (auto& [key, q] : flows_) {
    if (q.frames.empty()) continue;
    auto s = table_->Lookup(key);
    if (!s.ok()) {
      Forget(key);
      continue;
    }
    if (!s->ifindex || s->count_only) continue;  // no next hop yet: keep waiting
    while (!q.frames.empty()) {
      Frame& f = q.frames.front();
      uint64_t len = f.bytes.size();
      if (!table_->TakeCredit(s->index, len)) break;
      Status st = Send(*s, f);
      if (!st.ok()) {
        table_->GiveBackCredit(s->index, len);
        stats_.send_errors++;
        LOG_DEBUG << "credit: " << st.ToString();
        break;
      }
      (void)table_->DecrementQueued(s->index);  // 0 after a reconcile: nothing to undo
      sent_bytes_[{s->index, f.ingress}] += len;
      stats_.sent++;
      stats_.sent_bytes += len;
      q.bytes -= len;
      held_bytes_ -= len;
      q.frames.pop_front();
      sent++;
    }
  }
  if (now_ns - last_reconcile_ns_ >= kStaleNs / 2) {
    last_reconcile_ns_ = now_ns;
    Reconcile(now_ns);
  }
  return sent;
}

// XDP counts a frame in 'queued' before it redirects it; if the intake
// socket's rings were full the kernel drops it after that, and the flow would
// wait behind a frame that never comes. A flow whose 'queued' stays above
// what the hold queue holds, unchanged for kStaleNs while XDP diverted no new
// frame of it, is corrected down by the difference (compare-and-swap in DecrementQueued, so a frame XDP
// diverts meanwhile is never lost from the count).
void HoldQueue::Reconcile(uint64_t now_ns) {
  auto flows = table_->ListFlows();
  if (!flows.ok()) return;
  for (const auto& s : *flows) {
    auto it = flows_.find(s.key);
    uint64_t local = it == flows_.end() ? 0 : it->second.frames.size();
    uint64_t excess = s.counters.queued > local ? s.counters.queued - local : 0;
    Stale& st = stale_[s.key];
    // Frames still on their way to the intake look the same for a moment;
    // only an excess that stays while XDP diverts nothing new is a loss.
    if (!excess || excess != st.excess || s.counters.held != st.held) {
      st = Stale{excess, s.counters.held, now_ns};
      continue;
    }
    if (now_ns - st.since_ns < kStaleNs) continue;
    if (table_->DecrementQueued(s.index, excess).ok()) {
      stats_.reconciled += excess;
      LOG_WARN << "credit: flow " << s.key.ToString() << ": " << excess
               << " held frames were dropped by the kernel before the hold queue saw them";
    }
    st = Stale{};
  }
}

void HoldQueue::Forget(const CreditFlowKey& key) {
  auto it = flows_.find(key);
  if (it != flows_.end()) {
    stats_.dropped_no_flow += it->second.frames.size();
    held_bytes_ -= it->second.bytes;
    flows_.erase(it);
  }
  stale_.erase(key);
}

uint64_t HoldQueue::SentBytes(uint32_t index, uint32_t ifindex) const {
  auto it = sent_bytes_.find({index, ifindex});
  return it == sent_bytes_.end() ? 0 : it->second;
}

void HoldQueue::ForgetIndex(uint32_t index) {
  for (auto it = sent_bytes_.begin(); it != sent_bytes_.end();)
    it = it->first.first == index ? sent_bytes_.erase(it) : std::next(it);
}

std::map<CreditFlowKey, HeldFlow> HoldQueue::Held() const {
  std::map<CreditFlowKey, HeldFlow> out;
  for (const auto& [key, q] : flows_)
    if (!q.frames.empty()) out[key] = HeldFlow{q.frames.size(), q.bytes};
  return out;
}

HoldQueueStats HoldQueue::stats() const {
  HoldQueueStats s = stats_;
  for (const auto& x : intakes_) {
    auto k = x->stats();
    s.kernel_drops += k.rx_dropped + k.rx_ring_full + k.fill_empty;
  }
  return s;
}

}  // namespace inc::dp
