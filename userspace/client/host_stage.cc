// SPDX-License-Identifier: Apache-2.0
#include "client/host_stage.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <new>
#include <thread>

#include "client/float_sum.h"
#include "client/gather_sum.h"
#include "client/numerics.h"
#include "client/protocol.h"
#include "client/reduction_plan.h"

namespace inc::client {

namespace {

constexpr uint64_t kMagic = 0x31534f48434e4931ull;  // "1INCHOS1"
constexpr uint32_t kMaxLocal = 256;
constexpr size_t kMsgBytes = 480;

size_t AlignUp(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

void FutexWake(std::atomic<uint32_t>* a) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(a), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void FutexWait(std::atomic<uint32_t>* a, uint32_t expected, int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(a), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

bool ProcessAlive(int32_t pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

struct HostStage::Header {
  std::atomic<uint64_t> magic;  // set last by the leader
  uint32_t local_size;
  uint32_t reserved;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  int32_t pids[kMaxLocal];
  alignas(64) std::atomic<uint32_t> attached;
  alignas(64) std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> aborted;
  std::atomic<uint32_t> join_state;  // 0 pending, 1 joined, 2 failed
  uint32_t info_elems4;
  uint32_t info_gather;
  uint32_t info_tree_id;
  int32_t status_code;
  char status_msg[kMsgBytes];
  char abort_msg[kMsgBytes];
};

std::string HostStageName(const std::string& job_id, uint32_t node) {
  std::string s = "/incin-";
  for (char c : job_id)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return s + "-" + std::to_string(node);
}

HostStage::HostStage(const HostStageOptions& o, int fd, void* base, size_t bytes)
    : o_(o), fd_(fd), base_(base), bytes_(bytes), h_(static_cast<Header*>(base)) {}

HostStage::~HostStage() {
  if (leader() && !unlinked_) shm_unlink(o_.name.c_str());
  if (base_) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

Expected<std::unique_ptr<HostStage>> HostStage::Open(const HostStageOptions& o) {
  if (o.local_size == 0 || o.local_size > kMaxLocal)
    return InvalidArgument("local size must be in 1.." + std::to_string(kMaxLocal));
  if (o.local_rank >= o.local_size)
    return InvalidArgument("local rank " + std::to_string(o.local_rank) + " >= local size " +
                           std::to_string(o.local_size));
  if (o.slot_bytes < 65536 || o.slot_bytes % 64)
    return InvalidArgument("slot_bytes must be a multiple of 64 of at least 64 KiB");
  if (o.name.size() < 2 || o.name[0] != '/' || o.name.find('/', 1) != std::string::npos)
    return InvalidArgument("shared-memory name must be '/' and a name without '/': '" + o.name + "'");
  const size_t header = AlignUp(sizeof(Header), 4096);
  if (o.local_rank == 0) {
    const size_t total = header + size_t{o.local_size + 1} * o.slot_bytes;
    shm_unlink(o.name.c_str());  // a stale segment of a crashed run
    int fd = shm_open(o.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return Internal("shm_open " + o.name + ": " + std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(o.name.c_str());
      return ResourceExhausted("ftruncate " + o.name + " to " + std::to_string(total) + ": " +
                               std::strerror(e));
    }
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      shm_unlink(o.name.c_str());
      return Internal("mmap " + o.name + ": " + std::strerror(e));
    }
    auto* h = new (p) Header();
    h->local_size = o.local_size;
    h->slot_bytes = o.slot_bytes;
    h->total_bytes = total;
    h->pids[0] = static_cast<int32_t>(getpid());
    h->magic.store(kMagic, std::memory_order_release);
    return std::unique_ptr<HostStage>(new HostStage(o, fd, p, total));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.attach_timeout_ms);
  std::string last = "no segment " + o.name + " yet (is local rank 0 running?)";
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = shm_open(o.name.c_str(), O_RDWR, 0);
    if (fd >= 0) {
      struct stat stbuf;
      if (fstat(fd, &stbuf) == 0 && static_cast<size_t>(stbuf.st_size) >= header) {
        size_t total = static_cast<size_t>(stbuf.st_size);
        void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
          auto* h = static_cast<Header*>(p);
          if (h->magic.load(std::memory_order_acquire) == kMagic && h->total_bytes == total &&
              ProcessAlive(h->pids[0])) {
            if (h->local_size != o.local_size) {
              std::string m = "local rank 0 says " + std::to_string(h->local_size) +
                              " ranks per host, this rank " + std::to_string(o.local_size);
              munmap(p, total);
              close(fd);
              return InvalidArgument(m);
            }
            HostStageOptions mine = o;
            mine.slot_bytes = h->slot_bytes;
            h->pids[o.local_rank] = static_cast<int32_t>(getpid());
            h->attached.fetch_add(1, std::memory_order_acq_rel);
            FutexWake(&h->attached);
            return std::unique_ptr<HostStage>(new HostStage(mine, fd, p, total));
          }
          last = "segment " + o.name + " is not (yet) that of a live local rank 0";
          munmap(p, total);
        }
      }
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return DeadlineExceeded("local rank " + std::to_string(o.local_rank) + " could not attach within " +
                          std::to_string(o.attach_timeout_ms) + " ms: " + last);
}

Status HostStage::WaitAttached() {
  if (!leader()) return Status::Ok();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.attach_timeout_ms);
  for (;;) {
    uint32_t n = h_->attached.load(std::memory_order_acquire);
    if (n + 1 >= o_.local_size) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded("only " + std::to_string(n + 1) + " of " + std::to_string(o_.local_size) +
                              " local ranks attached to " + o_.name + " within " +
                              std::to_string(o_.attach_timeout_ms) + " ms");
    FutexWait(&h_->attached, n, 50);
  }
  shm_unlink(o_.name.c_str());  // every rank has it mapped: no leftover after a crash
  unlinked_ = true;
  return Status::Ok();
}

void HostStage::PublishJoin(const Status& st, const HostInfo& info) {
  h_->info_elems4 = info.elems4;
  h_->info_gather = info.gather_sum ? 1 : 0;
  h_->info_tree_id = info.tree_id;
  Publish(st);
  h_->join_state.store(st.ok() ? 1 : 2, std::memory_order_release);
  FutexWake(&h_->join_state);
}

Expected<HostInfo> HostStage::WaitJoin() {
  for (int i = 0;; i++) {
    uint32_t s = h_->join_state.load(std::memory_order_acquire);
    if (s == 1) {
      HostInfo info;
      info.elems4 = h_->info_elems4;
      info.gather_sum = h_->info_gather != 0;
      info.tree_id = h_->info_tree_id;
      return info;
    }
    if (s == 2) return Published().WithContext("local rank 0's JoinGroup");
    if (i % 20 == 0) INC_RETURN_IF_ERROR(CheckAlive());
    FutexWait(&h_->join_state, s, 50);
  }
}

uint8_t* HostStage::slot(uint32_t local_rank) const {
  return static_cast<uint8_t*>(base_) + AlignUp(sizeof(Header), 4096) + size_t{local_rank} * o_.slot_bytes;
}

uint8_t* HostStage::result() const {
  return slot(o_.local_size);
}

Status HostStage::CheckAlive() const {
  if (h_->aborted.load(std::memory_order_acquire))
    return Status(Code::kAborted, std::string("host stage aborted: ") + h_->abort_msg);
  for (uint32_t i = 0; i < o_.local_size; i++)
    if (i != o_.local_rank && h_->pids[i] && !ProcessAlive(h_->pids[i]))
      return Status(Code::kAborted,
                    "local rank " + std::to_string(i) + " (pid " + std::to_string(h_->pids[i]) + ") is gone");
  return Status::Ok();
}

Status HostStage::Barrier() {
  if (h_->aborted.load(std::memory_order_acquire)) return CheckAlive();
  if (o_.local_size == 1) return Status::Ok();
  const uint32_t gen = h_->generation.load(std::memory_order_acquire);
  if (h_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == o_.local_size) {
    h_->arrived.store(0, std::memory_order_relaxed);
    h_->generation.fetch_add(1, std::memory_order_acq_rel);
    FutexWake(&h_->generation);
    return Status::Ok();
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 64; i++) {
    if (h_->generation.load(std::memory_order_acquire) != gen) return Status::Ok();
    sched_yield();
  }
  // With on_wait the waits are short, so the caller's progress keeps up;
  // liveness and the timeout are checked about every 500 ms either way.
  const int wait_ms = o_.on_wait ? 1 : 20, check_every = 500 / wait_ms;
  for (int i = 1;; i++) {
    if (h_->generation.load(std::memory_order_acquire) != gen) return Status::Ok();
    if (o_.on_wait) o_.on_wait();
    FutexWait(&h_->generation, gen, wait_ms);
    if (i % check_every == 0) {
      INC_RETURN_IF_ERROR(CheckAlive());
      if (o_.barrier_timeout_ms &&
          std::chrono::steady_clock::now() - start > std::chrono::milliseconds(o_.barrier_timeout_ms))
        return DeadlineExceeded("local barrier: not every local rank arrived within " +
                                std::to_string(o_.barrier_timeout_ms) + " ms");
    } else if (h_->aborted.load(std::memory_order_acquire)) {
      return CheckAlive();
    }
  }
}

void HostStage::Publish(const Status& st) {
  h_->status_code = static_cast<int32_t>(st.code());
  std::snprintf(h_->status_msg, kMsgBytes, "%s", st.message().c_str());
}

Status HostStage::Published() const {
  if (h_->status_code == 0) return Status::Ok();
  return Status(static_cast<Code>(h_->status_code), h_->status_msg);
}

void HostStage::Abort(const std::string& why) {
  if (h_->aborted.exchange(1) == 0) std::snprintf(h_->abort_msg, kMsgBytes, "%s", why.c_str());
  FutexWake(&h_->generation);
  FutexWake(&h_->join_state);
}

// --- collectives ---

namespace {

// The switch's FP32 MIN/MAX key (bpf/aggregate.h inc_minmax32).
inline int32_t Key32(int32_t x) {
  return x ^ ((x >> 31) & 0x7fffffff);
}

// acc (op)= src over n lanes, as the switch computes (sums wrap; a sum that
// leaves the type wraps there too).
template <typename T, typename U>
void CombineInt(T* acc, const T* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; i++) acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(src[i]));
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; i++) acc[i] = std::min(acc[i], src[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; i++) acc[i] = std::max(acc[i], src[i]);
      break;
    case ReduceOp::kBand:
      for (size_t i = 0; i < n; i++) acc[i] &= src[i];
      break;
    case ReduceOp::kBor:
      for (size_t i = 0; i < n; i++) acc[i] |= src[i];
      break;
    case ReduceOp::kBxor:
      for (size_t i = 0; i < n; i++) acc[i] ^= src[i];
      break;
  }
}

void CombineOrd32(int32_t* acc, const int32_t* src, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; i++) {
    bool take = op == ReduceOp::kMin ? Key32(src[i]) < Key32(acc[i]) : Key32(src[i]) > Key32(acc[i]);
    if (take) acc[i] = src[i];
  }
}

// The user elements [first, first + n) as float32 (16-bit types widened).
const float* AsF32(DataType t, const void* send, size_t first, size_t n, std::vector<float>* tmp) {
  if (t == DataType::kFloat32) return static_cast<const float*>(send) + first;
  tmp->resize(n);
  const auto* in = static_cast<const uint16_t*>(send) + first;
  for (size_t i = 0; i < n; i++) (*tmp)[i] = t == DataType::kFloat16 ? F16ToF32(in[i]) : Bf16ToF32(in[i]);
  return tmp->data();
}

void StoreF32(DataType t, const float* x, size_t n, void* recv, size_t first) {
  if (t == DataType::kFloat32) {
    std::memcpy(static_cast<float*>(recv) + first, x, n * 4);
    return;
  }
  auto* o = static_cast<uint16_t*>(recv) + first;
  for (size_t i = 0; i < n; i++) o[i] = t == DataType::kFloat16 ? F32ToF16(x[i]) : F32ToBf16(x[i]);
}

}  // namespace

HostCollectives::HostCollectives(HostStage* stage, HostNet* net, uint32_t rank, uint32_t world,
                                 const HostInfo& info)
    : st_(stage),
      net_(net),
      rank_(rank),
      world_(world),
      local_size_(stage->local_size()),
      node_(rank / stage->local_size()),
      info_(info) {}

Status HostCollectives::Step(const std::function<Status()>& leader_work) {
  INC_RETURN_IF_ERROR(st_->Barrier());
  if (st_->leader()) st_->Publish(net_ ? leader_work() : Internal("the local leader has no tree member"));
  INC_RETURN_IF_ERROR(st_->Barrier());
  return st_->Published();
}

Status HostCollectives::Barrier() {
  return Step([this] { return net_->Barrier(); });
}

Status HostCollectives::Broadcast(const void* send, void* recv, size_t bytes, uint32_t root) {
  if (bytes == 0) return Status::Ok();
  const uint32_t root_node = root / local_size_, root_local = root % local_size_;
  const size_t chunk = st_->slot_bytes();
  for (size_t first = 0; first < bytes; first += chunk) {
    const size_t n = std::min(chunk, bytes - first);
    if (rank_ == root) std::memcpy(st_->slot(root_local), static_cast<const uint8_t*>(send) + first, n);
    INC_RETURN_IF_ERROR(Step([&] {
      return net_->Broadcast(node_ == root_node ? st_->slot(root_local) : nullptr, st_->result(), n,
                             root_node);
    }));
    if (recv) std::memcpy(static_cast<uint8_t*>(recv) + first, st_->result(), n);
  }
  return Status::Ok();
}

// Lanes of the host's ranks combined by the leader (acc = slot 0 + ...).
template <typename T, typename U>
void CombineSlots(HostStage* st, uint32_t local_size, size_t n, ReduceOp op, T* acc) {
  std::memcpy(acc, st->slot(0), n * sizeof(T));
  for (uint32_t l = 1; l < local_size; l++)
    CombineInt<T, U>(acc, reinterpret_cast<const T*>(st->slot(l)), n, op);
}

Status HostCollectives::Reduce(uint8_t collective, const void* send, void* recv, size_t count, DataType t,
                               ReduceOp op, uint32_t root, bool want) {
  if (count == 0) return Status::Ok();
  const uint32_t root_node = collective == INC_COLL_ALLREDUCE ? 0 : root / local_size_;
  const bool host_recv = collective == INC_COLL_ALLREDUCE || node_ == root_node;
  const uint32_t me = st_->local_rank();
  want = want && recv != nullptr;
  const size_t esize = DataTypeSize(t);
  const ReductionPlan plan = PlanReduction(t, op);
  if (plan.form == LaneForm::kFloatSum)
    return FloatSum(collective, send, recv, count, t, root_node, host_recv, want);

  const uint32_t per = ElemsPerPacket(info_.elems4, plan.lane);
  if (per == 0) return Internal("elems_per_packet 0");
  const size_t chunk = std::max<size_t>(per, st_->slot_bytes() / plan.lane / per * per);
  std::vector<float> wide, out32;
  for (size_t first = 0; first < count; first += chunk) {
    const size_t n = std::min(chunk, count - first);
    uint8_t* lanes = st_->slot(me);
    if (plan.form == LaneForm::kFloatKey32) {
      std::memcpy(lanes, AsF32(t, send, first, n, &wide), n * 4);
    } else if (plan.form == LaneForm::kFloatKey64) {
      const double* x = static_cast<const double*>(send) + first;
      auto* q = reinterpret_cast<int64_t*>(lanes);
      for (size_t i = 0; i < n; i++) q[i] = OrderedFromF64(x[i]);
    } else {
      std::memcpy(lanes, static_cast<const uint8_t*>(send) + first * esize, n * esize);
    }
    INC_RETURN_IF_ERROR(Step([&] {
      uint8_t* acc = st_->result();
      if (plan.form == LaneForm::kFloatKey32) {
        std::memcpy(acc, st_->slot(0), n * 4);
        for (uint32_t l = 1; l < local_size_; l++)
          CombineOrd32(reinterpret_cast<int32_t*>(acc), reinterpret_cast<const int32_t*>(st_->slot(l)), n,
                       op);
      } else if (plan.lane == 4) {
        CombineSlots<int32_t, uint32_t>(st_, local_size_, n, op, reinterpret_cast<int32_t*>(acc));
      } else {
        CombineSlots<int64_t, uint64_t>(st_, local_size_, n, op, reinterpret_cast<int64_t*>(acc));
      }
      return net_->Reduce(collective, plan.wire, static_cast<uint8_t>(op), acc, n, root_node, host_recv, {});
    }));
    if (!want) continue;
    const uint8_t* res = st_->result();
    switch (plan.form) {
      case LaneForm::kFloatKey32: {
        // float32 straight into recv; float16/bfloat16 through float32
        // (exact: the result is one of the inputs).
        if (t == DataType::kFloat32) {
          std::memcpy(static_cast<float*>(recv) + first, res, n * 4);
        } else {
          out32.resize(n);
          std::memcpy(out32.data(), res, n * 4);
          StoreF32(t, out32.data(), n, recv, first);
        }
        break;
      }
      case LaneForm::kFloatKey64: {
        const auto* q = reinterpret_cast<const int64_t*>(res);
        double* o = static_cast<double*>(recv) + first;
        for (size_t i = 0; i < n; i++) o[i] = F64FromOrdered(q[i]);
        break;
      }
      case LaneForm::kRaw: std::memcpy(static_cast<uint8_t*>(recv) + first * esize, res, n * esize); break;
      case LaneForm::kFloatSum: break;  // returned above
    }
  }
  return Status::Ok();
}

// A float SUM through the host stage, as FloatSum in communicator.cc does
// it for one rank per host (client/float_sum.h), over every rank of the
// job: the exponents agreed over all ranks, headroom and certificate for
// world ranks, the local partials integer sums of quantised lanes, and
// gathered blocks in global rank order. The bits are therefore the same
// for any number of ranks per host.
Status HostCollectives::FloatSum(uint8_t collective, const void* send, void* recv, size_t count, DataType t,
                                 uint32_t root_node, bool host_recv, bool want) {
  const size_t esize = DataTypeSize(t);
  const bool f64 = FixedPointType(t) == DataType::kFloat64;
  const size_t lane = f64 ? 8 : 4;
  const uint32_t per = ElemsPerPacket(info_.elems4, lane);
  if (per == 0) return Internal("elems_per_packet 0");
  const uint16_t code = CertificateCode(t, world_);
  const uint32_t me = st_->local_rank();
  if (code == 0 || (info_.gather_sum && GatherSumFits(world_, count, esize, info_.elems4))) {
    std::vector<uint32_t> all(PacketCount(count, per));
    for (size_t b = 0; b < all.size(); b++) all[b] = static_cast<uint32_t>(b);
    return GatherBlocks(collective, all, send, recv, count, t, per, root_node, host_recv, want);
  }
  // Chunks of whole blocks whose lanes and one flag byte per block fit the
  // result area.
  const size_t chunk_blocks = std::max<size_t>(1, st_->slot_bytes() / (size_t{per} * lane + 1));
  const size_t chunk = chunk_blocks * per;
  const int headroom = HeadroomBits(world_);
  std::vector<float> wide, out32;
  for (size_t first = 0; first < count; first += chunk) {
    const size_t n = std::min(chunk, count - first);
    const uint64_t blocks = PacketCount(n, per);
    const float* x32 = f64 ? nullptr : AsF32(t, send, first, n, &wide);
    const double* x64 = static_cast<const double*>(send) + first;
    // Block exponents: the max over the host's ranks, then over the hosts.
    auto* mine = reinterpret_cast<int32_t*>(st_->slot(me));
    for (uint64_t b = 0; b < blocks; b++) {
      PacketRange r = PacketElements(b, n, per);
      mine[b] = x32 ? BlockExponentF32(x32 + r.first, r.count) : BlockExponentF64(x64 + r.first, r.count);
    }
    INC_RETURN_IF_ERROR(Step([&] {
      auto* acc = reinterpret_cast<int32_t*>(st_->result());
      CombineSlots<int32_t, uint32_t>(st_, local_size_, blocks, ReduceOp::kMax, acc);
      return net_->Reduce(INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_MAX, acc, blocks, 0, true, {})
          .WithContext("exponent pre-pass");
    }));
    const std::vector<int32_t> agreed(reinterpret_cast<const int32_t*>(st_->result()),
                                      reinterpret_cast<const int32_t*>(st_->result()) + blocks);
    FloatSumPlan plan = PlanFloatSum(agreed.data(), blocks);
    // Lanes of the fast blocks; the others stay zero.
    uint8_t* lanes = st_->slot(me);
    for (const auto* list : {&plan.zero, &plan.gather})
      for (uint32_t b : *list) {
        PacketRange r = PacketElements(b, n, per);
        std::memset(lanes + r.first * lane, 0, r.count * lane);
      }
    for (uint32_t b : plan.fast) {
      PacketRange r = PacketElements(b, n, per);
      if (x32)
        QuantiseF32(x32 + r.first, r.count, agreed[b], headroom, lanes + r.first * 4);
      else
        QuantiseF64(x64 + r.first, r.count, agreed[b], headroom, lanes + r.first * 8);
    }
    uint8_t* flags = st_->result() + n * lane;  // the leader's verdicts for every local rank
    if (!plan.fast.empty()) {
      INC_RETURN_IF_ERROR(Step([&] {
        uint8_t* acc = st_->result();
        // Fixed-point lanes add as integers (the headroom covers every rank).
        if (f64)
          CombineSlots<int64_t, uint64_t>(st_, local_size_, n, ReduceOp::kSum,
                                          reinterpret_cast<int64_t*>(acc));
        else
          CombineSlots<int32_t, uint32_t>(st_, local_size_, n, ReduceOp::kSum,
                                          reinterpret_cast<int32_t*>(acc));
        std::vector<uint8_t> uncertified;
        HostNetSum sum{plan.fast.data(), plan.fast.size(), code, &uncertified};
        Status s = net_->Reduce(collective, f64 ? INC_DTYPE_FP64 : INC_DTYPE_FP32, INC_OP_SUM, acc, n,
                                root_node, host_recv, sum);
        for (size_t k = 0; k < plan.fast.size(); k++) flags[k] = k < uncertified.size() && uncertified[k];
        return s;
      }));
    }
    std::vector<uint32_t> gathered = plan.gather;
    for (size_t k = 0; k < plan.fast.size(); k++)
      if (flags[k]) {
        gathered.push_back(plan.fast[k]);
        uncertified_blocks_++;
      }
    std::sort(gathered.begin(), gathered.end());
    if (want) {
      const uint8_t* res = st_->result();
      if (f64) {
        double* o = static_cast<double*>(recv) + first;
        for (uint32_t b : plan.zero) {
          PacketRange r = PacketElements(b, n, per);
          std::memset(o + r.first, 0, r.count * 8);
        }
        for (uint32_t b : plan.fast) {
          if (std::binary_search(gathered.begin(), gathered.end(), b)) continue;  // its input is still needed
          PacketRange r = PacketElements(b, n, per);
          DequantiseF64(res + r.first * 8, r.count, agreed[b], headroom, o + r.first);
        }
      } else {
        // float32 decodes straight into recv; float16/bfloat16 through float32.
        float* o = static_cast<float*>(recv) + first;
        if (t != DataType::kFloat32) {
          out32.assign(n, 0.0f);
          o = out32.data();
        } else {
          for (uint32_t b : plan.zero) {
            PacketRange r = PacketElements(b, n, per);
            std::memset(o + r.first, 0, r.count * 4);
          }
        }
        for (uint32_t b : plan.fast) {
          if (std::binary_search(gathered.begin(), gathered.end(), b)) continue;  // its input is still needed
          PacketRange r = PacketElements(b, n, per);
          DequantiseF32(res + r.first * 4, r.count, agreed[b], headroom, o + r.first);
        }
        if (t != DataType::kFloat32) {
          // Narrowed block by block, leaving the gathered ones' inputs.
          for (uint64_t b = 0; b < blocks; b++) {
            if (std::binary_search(gathered.begin(), gathered.end(), static_cast<uint32_t>(b))) continue;
            PacketRange r = PacketElements(b, n, per);
            StoreF32(t, out32.data() + r.first, r.count, recv, first + r.first);
          }
        }
      }
    }
    INC_RETURN_IF_ERROR(GatherBlocks(collective, gathered, static_cast<const uint8_t*>(send) + first * esize,
                                     want ? static_cast<uint8_t*>(recv) + first * esize : nullptr, n, t, per,
                                     root_node, host_recv, want));
  }
  return Status::Ok();
}

// Blocks of a float SUM gathered in global rank order: each rank's values
// at their place in a vector of disjoint regions, the host's regions
// combined by the leader and the hosts' by the switch (INT32 SUM of
// disjoint bytes), every rank adding them in rank order.
Status HostCollectives::GatherBlocks(uint8_t collective, const std::vector<uint32_t>& blocks,
                                     const void* send, void* recv, uint64_t count, DataType t, uint32_t per,
                                     uint32_t root_node, bool host_recv, bool want) {
  const size_t esize = DataTypeSize(t);
  gathered_blocks_ += blocks.size();
  for (const GatherChunk& c : ChunkGather(blocks, count, per, world_, esize, st_->slot_bytes())) {
    const size_t lanes = c.Lanes(esize);
    GatherChunkContribution(c, count, per, world_, rank_, esize, send,
                            reinterpret_cast<int32_t*>(st_->slot(st_->local_rank())));
    INC_RETURN_IF_ERROR(Step([&] {
      auto* acc = reinterpret_cast<int32_t*>(st_->result());
      CombineSlots<int32_t, uint32_t>(st_, local_size_, lanes, ReduceOp::kSum, acc);
      return net_->Reduce(collective, INC_DTYPE_INT32, INC_OP_SUM, acc, lanes, root_node, host_recv, {})
          .WithContext("gathered float sum");
    }));
    if (want) GatherChunkSum(c, t, count, per, world_, reinterpret_cast<const int32_t*>(st_->result()), recv);
  }
  return Status::Ok();
}

}  // namespace inc::client
