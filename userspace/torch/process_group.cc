// SPDX-License-Identifier: Apache-2.0
// incin's torch.distributed backend (docs/pytorch.md): a c10d ProcessGroup
// whose all_reduce (SUM/MIN/MAX on float32, float16, bfloat16, float64,
// int32, int64), broadcast, barrier, all_gather and reduce_scatter on
// contiguous CPU tensors run in the incin switches through libinc's C API
// (libinc.so.0). Everything else goes to a gloo ProcessGroup made from the
// same store (passed in by incin/__init__.py), counted per collective and
// reason, logged once per reason, and summarised at shutdown.
//
// Collectives run synchronously on the calling thread: the returned Work is
// already complete (the order of the switch's and gloo's collectives is the
// call order on every rank). A failed offload is not redone on gloo (other
// ranks may already hold its result): it fails the Work, and later calls
// fall back as group_failed. One translation unit: the torch headers are
// heavy.
#include <inc/inc.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

namespace incin_torch {
namespace {

enum class Coll {
  kAllreduce,
  kBroadcast,
  kBarrier,
  kAllgather,
  kAllgatherBase,
  kReduceScatter,
  kReduceScatterBase,
  kReduce,
  kGather,
  kScatter,
  kAlltoall,
  kAllreduceCoalesced,
  kAllgatherCoalesced,
  kSend,
  kRecv,
  kCount
};
constexpr std::array<const char*, static_cast<size_t>(Coll::kCount)> kCollNames = {"allreduce",
                                                                                   "broadcast",
                                                                                   "barrier",
                                                                                   "allgather",
                                                                                   "_allgather_base",
                                                                                   "reduce_scatter",
                                                                                   "_reduce_scatter_base",
                                                                                   "reduce",
                                                                                   "gather",
                                                                                   "scatter",
                                                                                   "alltoall",
                                                                                   "allreduce_coalesced",
                                                                                   "allgather_coalesced",
                                                                                   "send",
                                                                                   "recv"};

// Why a call went to gloo. docs/pytorch.md explains each.
enum class Reason {
  kNone,                   // offloaded
  kDisabled,               // INCIN_TORCH_ENABLE=0
  kBadConfig,              // an INCIN_TORCH_* / INC_* value did not parse
  kNoGroup,                // no libinc group (INC_AM_ADDRESS unset, join failed on some rank)
  kSecondGroup,            // another process group of this process holds libinc's group
  kGroupFailed,            // an offloaded collective failed earlier
  kUnsupportedCollective,  // reduce, gather, scatter, alltoall, coalesced, send/recv
  kNotCpu,                 // a CUDA (or other device) tensor
  kSparse,                 // not a strided tensor
  kNoncontiguous,          // a tensor that is not contiguous
  kTensorList,             // more than one tensor per call (multi-device style lists)
  kShapeMismatch,          // output tensors whose dtype or size do not match the input
  kEmpty,                  // no elements
  kUnsupportedDtype,       // a reduction on bool, int8, uint8, int16, complex ...
  kUnsupportedOp,          // PRODUCT, AVG, MIN/MAX bitwise ops, PREMUL_SUM
  kSwitchUnsupported,      // the tree's switches do not offer the collective/type/op
  kCount
};
constexpr std::array<const char*, static_cast<size_t>(Reason::kCount)> kReasonNames = {
    "offloaded",
    "disabled",
    "bad_config",
    "no_group",
    "second_group",
    "group_failed",
    "unsupported_collective",
    "not_cpu",
    "sparse",
    "noncontiguous",
    "tensor_list",
    "shape_mismatch",
    "empty",
    "unsupported_dtype",
    "unsupported_op",
    "switch_unsupported"};

const char* Name(Coll c) {
  return kCollNames[static_cast<size_t>(c)];
}
const char* Name(Reason r) {
  return kReasonNames[static_cast<size_t>(r)];
}

enum class Level { kDebug, kInfo, kWarn, kError };

void Log(Level level, const std::string& msg) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  std::fprintf(stderr, "%s.%03lldZ %c incin-torch: %s\n", ts, static_cast<long long>(ms),
               kLetters[static_cast<int>(level)], msg.c_str());
  std::fflush(stderr);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

enum class SummaryMode { kOff, kRank0, kAll };

// The backend's environment (docs/pytorch.md "Configuration").
struct Config {
  bool enable = true;                         // INCIN_TORCH_ENABLE
  SummaryMode summary = SummaryMode::kRank0;  // INCIN_TORCH_SUMMARY=0|1|all
  std::string summary_json;                   // INCIN_TORCH_SUMMARY_JSON (%r = rank)
  bool fallback_log_all = false;              // INCIN_TORCH_FALLBACK_LOG=first|all
  std::string am;                             // INC_AM_ADDRESS
  std::string iface = "eth0";                 // INC_IFACE
  std::string transport;                      // INC_TRANSPORT ("" = auto)
  uint32_t join_timeout_ms = 30000;           // INC_JOIN_TIMEOUT_MS
  std::string error;                          // the first value that did not parse
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Config ReadConfig() {
  Config c;
  auto bad = [&](const char* name, const std::string& value, const char* accepted) {
    if (c.error.empty()) c.error = std::string(name) + "='" + value + "' is not " + accepted;
  };
  std::string v = Env("INCIN_TORCH_ENABLE");
  if (v == "0") {
    c.enable = false;
  } else if (!v.empty() && v != "1") {
    bad("INCIN_TORCH_ENABLE", v, "0 or 1");
  }
  v = Env("INCIN_TORCH_SUMMARY");
  if (v == "0") {
    c.summary = SummaryMode::kOff;
  } else if (v == "all") {
    c.summary = SummaryMode::kAll;
  } else if (!v.empty() && v != "1") {
    bad("INCIN_TORCH_SUMMARY", v, "0, 1 or all");
  }
  c.summary_json = Env("INCIN_TORCH_SUMMARY_JSON");
  v = Env("INCIN_TORCH_FALLBACK_LOG");
  if (v == "all") {
    c.fallback_log_all = true;
  } else if (!v.empty() && v != "first") {
    bad("INCIN_TORCH_FALLBACK_LOG", v, "first or all");
  }
  c.am = Env("INC_AM_ADDRESS");
  if (!Env("INC_IFACE").empty()) c.iface = Env("INC_IFACE");
  c.transport = Env("INC_TRANSPORT");
  v = Env("INC_JOIN_TIMEOUT_MS");
  if (!v.empty()) {
    char* end = nullptr;
    unsigned long ms = std::strtoul(v.c_str(), &end, 10);
    if (*end || ms == 0 || ms > 3600000 || v[0] == '-')
      bad("INC_JOIN_TIMEOUT_MS", v, "a number of milliseconds in 1..3600000");
    else
      c.join_timeout_ms = static_cast<uint32_t>(ms);
  }
  return c;
}

struct Tally {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// libinc holds one group per process and interface.
std::atomic<bool> g_libinc_busy{false};

// A Work that is complete when returned (its Future too).
class DoneWork : public c10d::Work {
 public:
  DoneWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::exception_ptr error)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
    if (error) {
      finish(error);
      future_->setError(error);
    } else {
      finish();
      future_->markCompleted(c10::IValue(outputs_));
    }
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

size_t RoundUp4(size_t n) {
  return (n + 3) & ~size_t{3};
}

class ProcessGroupIncin : public c10d::ProcessGroup {
 public:
  ProcessGroupIncin(int rank, int size, c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                    const std::string& job_id)
      : c10d::ProcessGroup(rank, size), gloo_(std::move(gloo)), job_id_(job_id), cfg_(ReadConfig()) {
    TORCH_CHECK(gloo_, "incin: the fallback gloo process group is missing");
    Join();
  }
  ~ProcessGroupIncin() override { Shutdown(); }

  const std::string getBackendName() const override { return "incin"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    uint64_t bytes = tensors.size() == 1 ? tensors[0].nbytes() : 0;
    // A non-contiguous tensor goes through a contiguous copy (gloo 1.13
    // reduces such a tensor's first numel() elements of storage instead).
    Reason r = TensorsReason(tensors, true);
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(tensors[0], opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      at::Tensor& t = tensors[0];
      size_t n = static_cast<size_t>(t.numel());
      auto work = Offload(Coll::kAllreduce, c10d::OpType::ALLREDUCE, bytes, tensors, &r, [&] {
        if (t.is_contiguous()) return inc_allreduce(comm_, t.data_ptr(), t.data_ptr(), n, dt, op);
        at::Tensor c = t.contiguous();
        inc_status s = inc_allreduce(comm_, c.data_ptr(), c.data_ptr(), n, dt, op);
        if (s == INC_OK) t.copy_(c);
        return s;
      });
      if (work) return work;
    }
    Fallback(Coll::kAllreduce, r, bytes);
    return gloo_->allreduce(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    uint64_t bytes = tensors.size() == 1 ? tensors[0].nbytes() : 0;
    Reason r = TensorsReason(tensors, true);
    if (r == Reason::kNone && opts.rootTensor != 0) r = Reason::kTensorList;
    if (r == Reason::kNone) {
      at::Tensor& t = tensors[0];
      uint32_t root = static_cast<uint32_t>(opts.rootRank);
      auto work = Offload(Coll::kBroadcast, c10d::OpType::BROADCAST, bytes, tensors, &r, [&] {
        // Bytes as int32 words (libinc's broadcast is exact for them); an odd
        // byte count or a non-contiguous tensor through a padded copy.
        if (bytes % 4 == 0 && t.is_contiguous())
          return inc_broadcast(comm_, t.data_ptr(), bytes / 4, INC_INT32, root);
        at::Tensor c = t.contiguous();
        std::vector<uint8_t> pad(RoundUp4(bytes), 0);
        std::memcpy(pad.data(), c.data_ptr(), bytes);
        inc_status s = inc_broadcast(comm_, pad.data(), pad.size() / 4, INC_INT32, root);
        if (s == INC_OK) {
          std::memcpy(c.data_ptr(), pad.data(), bytes);
          if (!c.is_same(t)) t.copy_(c);
        }
        return s;
      });
      if (work) return work;
    }
    Fallback(Coll::kBroadcast, r, bytes);
    return gloo_->broadcast(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    Reason r = GroupReason();
    if (r == Reason::kNone) {
      std::vector<at::Tensor> none;
      auto work =
          Offload(Coll::kBarrier, c10d::OpType::BARRIER, 0, none, &r, [&] { return inc_barrier(comm_); });
      if (work) return work;
    }
    Fallback(Coll::kBarrier, r, 0);
    return gloo_->barrier(opts);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    uint64_t bytes = inputs.size() == 1 ? inputs[0].nbytes() : 0;
    Reason r = TensorsReason(inputs);
    if (r == Reason::kNone && outputs.size() != 1) r = Reason::kTensorList;
    if (r == Reason::kNone) {
      if (outputs[0].size() != static_cast<size_t>(size_)) r = Reason::kShapeMismatch;
      for (const at::Tensor& o : outputs[0]) {
        if (r != Reason::kNone) break;
        if (!o.device().is_cpu())
          r = Reason::kNotCpu;
        else if (o.layout() != c10::kStrided)
          r = Reason::kSparse;
        else if (o.scalar_type() != inputs[0].scalar_type() || o.numel() != inputs[0].numel())
          r = Reason::kShapeMismatch;
      }
    }
    if (r == Reason::kNone) {
      const at::Tensor& in = inputs[0];
      std::vector<at::Tensor> outs = outputs[0];
      auto work = Offload(Coll::kAllgather, c10d::OpType::ALLGATHER, bytes, outs, &r, [&] {
        std::vector<uint8_t> recv;
        inc_status s = GatherBytes(in, &recv);
        if (s != INC_OK) return s;
        size_t block = RoundUp4(bytes);
        for (int i = 0; i < size_; i++)
          outs[i].copy_(at::from_blob(recv.data() + i * block, in.sizes(), in.options()));
        return s;
      });
      if (work) return work;
    }
    Fallback(Coll::kAllgather, r, bytes);
    return gloo_->allgather(outputs, inputs, opts);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    uint64_t bytes = input.nbytes();
    std::vector<at::Tensor> ins{input};
    Reason r = TensorsReason(ins);
    if (r == Reason::kNone) {
      std::vector<at::Tensor> outs{output};
      r = TensorsReason(outs);
    }
    if (r == Reason::kNone &&
        (output.scalar_type() != input.scalar_type() || output.numel() != input.numel() * size_))
      r = Reason::kShapeMismatch;
    if (r == Reason::kNone) {
      std::vector<at::Tensor> outs{output};
      auto work = Offload(Coll::kAllgatherBase, c10d::OpType::_ALLGATHER_BASE, bytes, outs, &r, [&] {
        if (bytes % 4 == 0)
          return inc_allgather(comm_, input.data_ptr(), output.data_ptr(), bytes / 4, INC_INT32);
        std::vector<uint8_t> recv;
        inc_status s = GatherBytes(input, &recv);
        if (s != INC_OK) return s;
        size_t block = RoundUp4(bytes);
        auto* dst = static_cast<uint8_t*>(output.data_ptr());
        for (int i = 0; i < size_; i++) std::memcpy(dst + i * bytes, recv.data() + i * block, bytes);
        return s;
      });
      if (work) return work;
    }
    Fallback(Coll::kAllgatherBase, r, bytes);
    return gloo_->_allgather_base(output, input, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    uint64_t bytes = outputs.size() == 1 ? outputs[0].nbytes() * size_ : 0;
    Reason r = TensorsReason(outputs);
    if (r == Reason::kNone && inputs.size() != 1) r = Reason::kTensorList;
    if (r == Reason::kNone && inputs[0].size() != static_cast<size_t>(size_)) r = Reason::kShapeMismatch;
    if (r == Reason::kNone) {
      for (const at::Tensor& i : inputs[0]) {
        if (!i.device().is_cpu())
          r = Reason::kNotCpu;
        else if (i.layout() != c10::kStrided)
          r = Reason::kSparse;
        else if (i.scalar_type() != outputs[0].scalar_type() || i.numel() != outputs[0].numel())
          r = Reason::kShapeMismatch;
        if (r != Reason::kNone) break;
      }
    }
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(outputs[0], opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      at::Tensor& out = outputs[0];
      int64_t n = out.numel();
      auto work = Offload(Coll::kReduceScatter, c10d::OpType::REDUCE_SCATTER, bytes, outputs, &r, [&] {
        at::Tensor send = at::empty({n * size_}, out.options());
        for (int i = 0; i < size_; i++) send.narrow(0, i * n, n).copy_(inputs[0][i].reshape({n}));
        return inc_reduce_scatter(comm_, send.data_ptr(), out.data_ptr(), static_cast<size_t>(n), dt, op);
      });
      if (work) return work;
    }
    Fallback(Coll::kReduceScatter, r, bytes);
    return gloo_->reduce_scatter(outputs, inputs, opts);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    uint64_t bytes = input.nbytes();
    std::vector<at::Tensor> both{output, input};
    Reason r = GroupReason();
    for (const at::Tensor& t : both) {
      if (r != Reason::kNone) break;
      std::vector<at::Tensor> one{t};
      r = TensorsReason(one);
    }
    if (r == Reason::kNone &&
        (output.scalar_type() != input.scalar_type() || input.numel() != output.numel() * size_))
      r = Reason::kShapeMismatch;
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(output, opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      std::vector<at::Tensor> outs{output};
      auto work = Offload(Coll::kReduceScatterBase, c10d::OpType::_REDUCE_SCATTER_BASE, bytes, outs, &r, [&] {
        return inc_reduce_scatter(comm_, input.data_ptr(), output.data_ptr(),
                                  static_cast<size_t>(output.numel()), dt, op);
      });
      if (work) return work;
    }
    Fallback(Coll::kReduceScatterBase, r, bytes);
    return gloo_->_reduce_scatter_base(output, input, opts);
  }

  // What the switches do not run: straight to gloo, counted.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    Fallback(Coll::kReduce, Reason::kUnsupportedCollective, Bytes(tensors));
    return gloo_->reduce(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    Fallback(Coll::kGather, Reason::kUnsupportedCollective, Bytes(inputs));
    return gloo_->gather(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    Fallback(Coll::kScatter, Reason::kUnsupportedCollective, Bytes(outputs));
    return gloo_->scatter(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    Fallback(Coll::kAlltoall, Reason::kUnsupportedCollective, input.nbytes());
    return gloo_->alltoall_base(output, input, output_splits, input_splits, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    Fallback(Coll::kAlltoall, Reason::kUnsupportedCollective, Bytes(inputs));
    return gloo_->alltoall(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    Fallback(Coll::kAllreduceCoalesced, Reason::kUnsupportedCollective, Bytes(tensors));
    return gloo_->allreduce_coalesced(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    Fallback(Coll::kAllgatherCoalesced, Reason::kUnsupportedCollective, Bytes(inputs));
    return gloo_->allgather_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    Fallback(Coll::kSend, Reason::kUnsupportedCollective, Bytes(tensors));
    return gloo_->send(tensors, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    Fallback(Coll::kRecv, Reason::kUnsupportedCollective, Bytes(tensors));
    return gloo_->recv(tensors, src, tag);
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    Fallback(Coll::kRecv, Reason::kUnsupportedCollective, Bytes(tensors));
    return gloo_->recvAnysource(tensors, tag);
  }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    gloo_->monitoredBarrier(opts, wait_all_ranks);
  }
  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }

  // Summary (INCIN_TORCH_SUMMARY, INCIN_TORCH_SUMMARY_JSON), then leaves
  // libinc's group. Idempotent: the destructor and Python's atexit call it.
  void Shutdown() {
    std::lock_guard<std::mutex> l(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    WriteSummary();
    if (comm_) {
      inc_comm_destroy(comm_);
      comm_ = nullptr;
      g_libinc_busy = false;
    }
  }

  std::string SummaryJson() const {
    std::lock_guard<std::mutex> l(mu_);
    return ToJson();
  }
  std::string SummaryText() const {
    std::lock_guard<std::mutex> l(mu_);
    return ToText();
  }
  std::string GroupState() const {
    std::lock_guard<std::mutex> l(mu_);
    return group_reason_ == Reason::kNone ? "ok" : Name(group_reason_);
  }

 private:
  void Join() {
    std::string local_detail;
    Reason r = Reason::kNone;
    if (!cfg_.error.empty()) {
      r = Reason::kBadConfig;
      local_detail = cfg_.error;
      Log(Level::kError, "bad configuration: " + cfg_.error + "; every collective runs on gloo");
    } else if (!cfg_.enable) {
      r = Reason::kDisabled;
    } else if (cfg_.am.empty()) {
      r = Reason::kNoGroup;
      local_detail = "INC_AM_ADDRESS is not set";
    } else if (g_libinc_busy.exchange(true)) {
      r = Reason::kSecondGroup;
      local_detail = "another process group of this process holds libinc's group";
    } else {
      inc_comm_config c;
      inc_comm_config_init(&c);
      c.am_address = cfg_.am.c_str();
      c.job_id = job_id_.c_str();
      c.rank = static_cast<uint32_t>(rank_);
      c.world_size = static_cast<uint32_t>(size_);
      c.iface = cfg_.iface.c_str();
      c.transport = cfg_.transport.empty() ? nullptr : cfg_.transport.c_str();
      c.join_timeout_ms = cfg_.join_timeout_ms;
      if (inc_comm_create(&c, &comm_) != INC_OK) {
        r = Reason::kNoGroup;
        local_detail = "joining job " + job_id_ + " as rank " + std::to_string(rank_) + " of " +
                       std::to_string(size_) + " at " + cfg_.am + " on " + cfg_.iface +
                       " failed: " + inc_last_error();
        comm_ = nullptr;
        g_libinc_busy = false;
      }
    }
    // All or nothing: every rank must take the same path for every call.
    at::Tensor ok = at::full({1}, r == Reason::kNone ? 1 : 0, at::kInt);
    std::vector<at::Tensor> v{ok};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MIN;
    gloo_->allreduce(v, o)->wait();
    if (r == Reason::kNone && ok.item<int>() == 0) {
      r = Reason::kNoGroup;
      local_detail = "another rank has no libinc group (see its log)";
      inc_comm_destroy(comm_);
      comm_ = nullptr;
      g_libinc_busy = false;
    }
    // The reason all ranks share where they differ (disabled on one, no AM
    // on another): the agreement above only says "not everywhere".
    group_reason_ = r;
    group_detail_ = local_detail;
    if (r == Reason::kNone) {
      Log(Level::kInfo, "rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
                            ": libinc group of job " + job_id_ + " formed on " + cfg_.iface);
    } else if (r == Reason::kNoGroup || r == Reason::kSecondGroup) {
      Log(Level::kWarn, "rank " + std::to_string(rank_) + ": no libinc group (" + local_detail +
                            "); every collective runs on gloo (reason=" + Name(r) + ")");
    }
  }

  Reason GroupReason() const { return group_reason_; }

  // The checks every offloaded tensor list passes: one contiguous, strided,
  // non-empty CPU tensor.
  Reason TensorsReason(const std::vector<at::Tensor>& tensors, bool any_layout = false) const {
    Reason r = GroupReason();
    if (r != Reason::kNone) return r;
    if (tensors.size() != 1) return Reason::kTensorList;
    const at::Tensor& t = tensors[0];
    if (!t.device().is_cpu()) return Reason::kNotCpu;
    if (t.layout() != c10::kStrided) return Reason::kSparse;
    if (!any_layout && !t.is_contiguous()) return Reason::kNoncontiguous;
    if (t.numel() == 0) return Reason::kEmpty;
    return Reason::kNone;
  }

  static Reason ReduceTypes(const at::Tensor& t, const c10d::ReduceOp& rop, inc_datatype* dt, inc_op* op) {
    switch (t.scalar_type()) {
      case at::kFloat: *dt = INC_FLOAT32; break;
      case at::kHalf: *dt = INC_FLOAT16; break;
      case at::kBFloat16: *dt = INC_BFLOAT16; break;
      case at::kDouble: *dt = INC_FLOAT64; break;
      case at::kInt: *dt = INC_INT32; break;
      case at::kLong: *dt = INC_INT64; break;
      default: return Reason::kUnsupportedDtype;
    }
    switch (rop.op_) {
      case c10d::ReduceOp::SUM: *op = INC_SUM; break;
      case c10d::ReduceOp::MIN: *op = INC_MIN; break;
      case c10d::ReduceOp::MAX: *op = INC_MAX; break;
      default: return Reason::kUnsupportedOp;
    }
    return Reason::kNone;
  }

  static uint64_t Bytes(const std::vector<at::Tensor>& tensors) {
    uint64_t n = 0;
    for (const at::Tensor& t : tensors) n += t.nbytes();
    return n;
  }

  // This rank's block (its bytes, padded to whole int32 words) from every
  // rank into *recv: world x padded block.
  inc_status GatherBytes(const at::Tensor& in, std::vector<uint8_t>* recv) {
    size_t bytes = in.nbytes();
    size_t block = RoundUp4(bytes);
    std::vector<uint8_t> send(block, 0);
    std::memcpy(send.data(), in.data_ptr(), bytes);
    recv->assign(block * size_, 0);
    return inc_allgather(comm_, send.data(), recv->data(), block / 4, INC_INT32);
  }

  // Runs fn (a libinc call). Returns the completed Work when it ran on the
  // switch, or failed there (the Work carries the error); nullptr with
  // *reason = switch_unsupported when the tree refused it before sending
  // anything (identically on every rank), for the caller to use gloo.
  template <typename Fn>
  c10::intrusive_ptr<c10d::Work> Offload(Coll coll, c10d::OpType type, uint64_t bytes,
                                         const std::vector<at::Tensor>& outputs, Reason* reason, Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (!comm_ || group_reason_ != Reason::kNone) {
      *reason = group_reason_ == Reason::kNone ? Reason::kGroupFailed : group_reason_;
      return {};
    }
    auto t0 = std::chrono::steady_clock::now();
    inc_status s = fn();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s == INC_OK) {
      Tally& t = tally_[static_cast<size_t>(coll)][0];
      t.calls++;
      t.bytes += bytes;
      t.seconds += secs;
      return c10::make_intrusive<DoneWork>(rank_, type, outputs, nullptr);
    }
    std::string err = inc_last_error();
    if (s == INC_FAILED_PRECONDITION && err.find(" does not ") != std::string::npos) {
      *reason = Reason::kSwitchUnsupported;
      return {};
    }
    group_reason_ = Reason::kGroupFailed;
    group_detail_ = std::string(inc_status_name(s)) + ": " + err;
    failed_calls_++;
    std::string msg = std::string("offloaded ") + Name(coll) + " failed on rank " + std::to_string(rank_) +
                      ": " + group_detail_ + " (the switch path is off for the rest of this process group)";
    Log(Level::kError, msg);
    return c10::make_intrusive<DoneWork>(rank_, type, outputs,
                                         std::make_exception_ptr(std::runtime_error("incin: " + msg)));
  }

  void Fallback(Coll coll, Reason reason, uint64_t bytes) {
    bool first;
    {
      std::lock_guard<std::mutex> l(mu_);
      Tally& t = tally_[static_cast<size_t>(coll)][static_cast<size_t>(reason)];
      t.calls++;
      t.bytes += bytes;
      first = logged_.insert({coll, reason}).second;
    }
    if (!first && !cfg_.fallback_log_all) return;
    // Group-wide reasons were logged at creation; the first call says so once.
    std::string detail;
    if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig || reason == Reason::kGroupFailed ||
         reason == Reason::kSecondGroup) &&
        !group_detail_.empty())
      detail = " detail=" + JsonString(group_detail_);
    Log(Level::kWarn, std::string("fallback reason=") + Name(reason) + " collective=" + Name(coll) +
                          " rank=" + std::to_string(rank_) + " bytes=" + std::to_string(bytes) + detail);
  }

  std::string ToJson() const {
    std::ostringstream o;
    o << "{\"rank\": " << rank_ << ", \"world\": " << size_ << ", \"backend\": \"incin\", \"group\": "
      << JsonString(group_reason_ == Reason::kNone ? "ok" : Name(group_reason_))
      << ", \"group_detail\": " << JsonString(group_detail_) << ", \"job_id\": " << JsonString(job_id_)
      << ", \"failed_offloads\": " << failed_calls_ << ", \"collectives\": {";
    std::array<uint64_t, static_cast<size_t>(Reason::kCount)> by_reason{};
    Tally off_total, fb_total;
    bool first_c = true;
    for (size_t c = 0; c < tally_.size(); c++) {
      const Tally& off = tally_[c][0];
      Tally fb;
      std::string reasons;
      for (size_t r = 1; r < tally_[c].size(); r++) {
        const Tally& t = tally_[c][r];
        if (!t.calls) continue;
        fb.calls += t.calls;
        fb.bytes += t.bytes;
        by_reason[r] += t.calls;
        reasons +=
            (reasons.empty() ? "" : ", ") + JsonString(kReasonNames[r]) + ": " + std::to_string(t.calls);
      }
      off_total.calls += off.calls;
      off_total.bytes += off.bytes;
      off_total.seconds += off.seconds;
      fb_total.calls += fb.calls;
      fb_total.bytes += fb.bytes;
      if (!off.calls && !fb.calls) continue;
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.6f", off.seconds);
      o << (first_c ? "" : ", ") << JsonString(kCollNames[c]) << ": {\"offloaded\": {\"calls\": " << off.calls
        << ", \"bytes\": " << off.bytes << ", \"seconds\": " << secs
        << "}, \"fallback\": {\"calls\": " << fb.calls << ", \"bytes\": " << fb.bytes
        << "}, \"fallback_reasons\": {" << reasons << "}}";
      first_c = false;
    }
    o << "}, \"totals\": {\"offloaded\": " << off_total.calls << ", \"offloaded_bytes\": " << off_total.bytes
      << ", \"fallback\": " << fb_total.calls << ", \"fallback_bytes\": " << fb_total.bytes
      << "}, \"fallback_reasons\": {";
    bool first_r = true;
    for (size_t r = 1; r < by_reason.size(); r++) {
      if (!by_reason[r]) continue;
      o << (first_r ? "" : ", ") << JsonString(kReasonNames[r]) << ": " << by_reason[r];
      first_r = false;
    }
    o << "}}";
    return o.str();
  }

  std::string ToText() const {
    std::ostringstream o;
    o << "incin-torch: summary rank " << rank_ << "/" << size_ << ": group "
      << (group_reason_ == Reason::kNone ? "ok" : Name(group_reason_))
      << (group_detail_.empty() ? "" : " (" + group_detail_ + ")") << ", job " << job_id_ << "\n";
    char line[256];
    std::snprintf(line, sizeof(line), "incin-torch:   %-22s %-32s %10s %14s %12s\n", "collective", "path",
                  "calls", "bytes", "seconds");
    o << line;
    for (size_t c = 0; c < tally_.size(); c++) {
      for (size_t r = 0; r < tally_[c].size(); r++) {
        const Tally& t = tally_[c][r];
        if (!t.calls) continue;
        std::string path = r == 0 ? "offloaded" : std::string("fallback:") + kReasonNames[r];
        std::string secs = "-";
        if (r == 0) {
          char b[32];
          std::snprintf(b, sizeof(b), "%.6f", t.seconds);
          secs = b;
        }
        std::snprintf(line, sizeof(line), "incin-torch:   %-22s %-32s %10llu %14llu %12s\n", kCollNames[c],
                      path.c_str(), static_cast<unsigned long long>(t.calls),
                      static_cast<unsigned long long>(t.bytes), secs.c_str());
        o << line;
      }
    }
    return o.str();
  }

  void WriteSummary() const {
    if (cfg_.summary == SummaryMode::kAll || (cfg_.summary == SummaryMode::kRank0 && rank_ == 0)) {
      std::string text = ToText();
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    }
    std::string path = cfg_.summary_json;
    size_t at = path.find("%r");
    if (at != std::string::npos)
      path.replace(at, 2, std::to_string(rank_));
    else if (rank_ != 0)
      path.clear();
    if (!path.empty()) {
      std::ofstream f(path, std::ios::trunc);
      f << ToJson() << "\n";
      if (!f) Log(Level::kError, "cannot write INCIN_TORCH_SUMMARY_JSON file " + path);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  std::string job_id_;
  Config cfg_;
  mutable std::mutex mu_;
  inc_comm* comm_ = nullptr;
  Reason group_reason_ = Reason::kNone;
  std::string group_detail_;
  uint64_t failed_calls_ = 0;
  bool shut_down_ = false;
  std::array<std::array<Tally, static_cast<size_t>(Reason::kCount)>, static_cast<size_t>(Coll::kCount)>
      tally_{};
  std::set<std::pair<Coll, Reason>> logged_;
};

}  // namespace
}  // namespace incin_torch

namespace py = pybind11;

PYBIND11_MODULE(_incin_torch, m) {
  m.doc() = "incin's torch.distributed backend (docs/pytorch.md); use `import incin`";
  py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
  using PG = incin_torch::ProcessGroupIncin;
  py::class_<PG, c10::intrusive_ptr<PG>>(m, "ProcessGroupIncin", base)
      .def(py::init(
               [](int rank, int size, const c10::intrusive_ptr<c10d::ProcessGroup>& gloo,
                  const std::string& job_id) { return c10::make_intrusive<PG>(rank, size, gloo, job_id); }),
           py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("job_id"),
           py::call_guard<py::gil_scoped_release>())
      .def("_shutdown", &PG::Shutdown, py::call_guard<py::gil_scoped_release>(),
           "prints the summary and leaves libinc's group (also done when the group is destroyed)")
      .def("summary_json", &PG::SummaryJson, "per-collective offloaded/fallback counts as JSON")
      .def("summary_text", &PG::SummaryText)
      .def("group_state", &PG::GroupState, "\"ok\" when the libinc group formed, else the reason");
  m.def("libinc_version", [] { return std::string(inc_version()); });
}
