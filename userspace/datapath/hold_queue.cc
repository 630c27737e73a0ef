// SPDX-License-Identifier: Apache-2.0
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

#include "common/abi/wire.h"
#include "common/log.h"
#include "common/net.h"

namespace inc::dp {
namespace {

constexpr uint32_t kChunk = 2048;
constexpr size_t kEth = 14, kIp = 20, kUdp = 8;
constexpr uint64_t kStaleNs = 10'000'000;  // 'queued' unexplained this long: the kernel dropped them

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

Status XskIntake::Init(uint32_t chunks) {
  // The fill ring holds every chunk, RX half of them; the completion ring is
  // required by bind even though the intake never transmits. The UMEM is
  // faulted in as frames arrive (most switches hold little).
  xsk::Layout layout;
  layout.chunks = chunks;
  layout.chunk_size = kChunk;
  layout.fill = chunks;
  layout.completion = 64;
  layout.rx = chunks / 2;
  layout.populate = false;
  layout.what = "hold queue of " + port_;
  INC_RETURN_IF_ERROR(xsk_.Open(layout));
  xsk_.StockFill(0, chunks);
  return xsk_.Bind(ifindex_, queue_, 0, 0);
}

XskIntake::~XskIntake() = default;

size_t XskIntake::Receive(const std::function<void(const uint8_t*, size_t)>& fn, size_t max) {
  xsk::Ring& rx = xsk_.rx;
  xsk::Ring& fill = xsk_.fill;
  rx.cached_prod = xsk::LoadAcquire(rx.producer);
  uint32_t n = rx.cached_prod - rx.cached_cons;
  if (n > max) n = static_cast<uint32_t>(max);
  if (!n) return 0;
  const xdp_desc* descs = rx.frames();
  uint64_t* fq = fill.addrs();
  for (uint32_t i = 0; i < n; i++) {
    const xdp_desc& d = descs[(rx.cached_cons + i) & (rx.size - 1)];
    if (d.addr + d.len <= xsk_.umem_len()) fn(xsk_.umem() + d.addr, d.len);
    // The fill ring has room for every chunk, so this never overtakes the
    // kernel's consumer.
    fq[(fill.cached_prod + i) & (fill.size - 1)] = xsk_.ChunkOf(d.addr);
  }
  rx.cached_cons += n;
  xsk::StoreRelease(rx.consumer, rx.cached_cons);
  fill.cached_prod += n;
  xsk::StoreRelease(fill.producer, fill.cached_prod);
  received_ += n;
  return n;
}

XskIntake::Stats XskIntake::stats() const {
  Stats s;
  s.received = received_;
  const xsk::KernelStats k = xsk::ReadKernelStats(xsk_.fd());
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
