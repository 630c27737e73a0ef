// SPDX-License-Identifier: Apache-2.0
// incin's torch.distributed backend (docs/pytorch.md): a c10d ProcessGroup
// whose all_reduce (SUM/MIN/MAX on float32, float16, bfloat16, float64,
// int32, int64), broadcast, barrier, all_gather and reduce_scatter on CPU
// tensors run in the incin switches through libinc's C API (libinc.so.0).
// Everything else goes to a gloo ProcessGroup made from the same store
// (passed in by incin/__init__.py), counted per collective and reason,
// logged once per reason, and summarised at shutdown.
//
// The rules that keep ranks together (docs/pytorch.md "Failures"):
// - Whether a call is offloaded is decided from its arguments (which every
//   rank passes alike) and the group state agreed at creation, never from
//   anything one rank sees alone.
// - Offloaded collectives wait for the slowest rank as long as the process
//   group's timeout (libinc's op_timeout_ms). A failure is an error on the
//   calling rank; libinc tells the AM, which fails the tree, so every other
//   rank's current or next offloaded call fails too. From then on every call
//   on the group raises, naming the cause: no rank goes on alone, on the
//   switches or on gloo.
// - A caller's argument error raises (like gloo's) and changes nothing.
// - 0-element calls complete locally (gloo 1.13 dies of SIGFPE on some).
//
// Threading (docs/pytorch.md "Threading"): offloaded collectives run on the
// group's own worker thread, one FIFO queue per process group, so every rank
// issues them to libinc in call order (libinc's group is not re-entrant: one
// collective at a time). The caller gets an AsyncWork at once (wait(),
// isCompleted(), getFuture() as gloo's; an error reaches wait() and the
// future); the Work and the queued task hold the tensors until it completes.
// A call that goes to gloo first waits until the queue is empty (the
// offloaded calls before it were issued), then calls gloo on the caller's
// thread: gloo sees its calls in the same order on every rank, also a
// switch_unsupported redo that the worker issues. barrier() waits for every
// offloaded and gloo Work handed out before it. A failed offload fails the
// group: queued calls behind it complete with the "failed earlier" error.
// What gloo 1.13 lacks (bfloat16 and AVG all_reduce, the _base forms) is
// composed here from gloo's primitives. One translation unit: the torch
// headers are heavy.
#include <Python.h>
#include <inc/inc.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "require.h"

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
  kMonitoredBarrier,
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
                                                                                   "recv",
                                                                                   "monitored_barrier"};

// Why a call went to gloo. docs/pytorch.md explains each. Every one of them
// is the same on every rank: the group's state agreed at creation, or the
// call's arguments.
enum class Reason {
  kNone,                   // offloaded
  kDisabled,               // INCIN_TORCH_ENABLE=0
  kBadConfig,              // an INCIN_* value did not parse
  kNoGroup,                // no libinc group (INCIN_AM unset, join failed on some rank)
  kSecondGroup,            // another process group of this process holds libinc's group
  kUnsupportedCollective,  // reduce, gather, scatter, alltoall, coalesced, send/recv
  kNotCpu,                 // a CUDA (or other device) tensor
  kSparse,                 // not a strided tensor
  kTensorList,             // more than one tensor per call (multi-device style lists)
  kUnsupportedDtype,       // a reduction on bool, int8, uint8, int16, complex ...
  kUnsupportedOp,          // PRODUCT, AVG, PREMUL_SUM, bitwise ops on floating tensors
  kSwitchUnsupported,      // the tree's switches do not offer the collective/type/op
  kCount
};
constexpr std::array<const char*, static_cast<size_t>(Reason::kCount)> kReasonNames = {
    "offloaded", "disabled", "bad_config",  "no_group",          "second_group",   "unsupported_collective",
    "not_cpu",   "sparse",   "tensor_list", "unsupported_dtype", "unsupported_op", "switch_unsupported"};

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
  bool require_offload = false;               // INCIN_REQUIRE_OFFLOAD: a fallback raises instead
  std::string am;                             // INCIN_AM
  std::string iface = "eth0";                 // INCIN_IFACE
  std::string transport;                      // INCIN_TRANSPORT ("" = auto)
  uint32_t join_timeout_ms = 30000;           // INCIN_JOIN_TIMEOUT_MS
  std::string error;                          // the first value that did not parse
};

// Settings through libinc's table (inc.h inc_setting_*: INCIN_ names, the
// old INC_ ones with a deprecation warning); the first bad value is kept
// in c.error, naming the variable.
Config ReadConfig() {
  Config c;
  auto text = [&](const char* name) -> std::string {
    const char* v = nullptr;
    if (inc_setting_string(name, &v) == INC_OK) return v ? v : "";
    if (c.error.empty()) c.error = inc_last_error();
    return "";
  };
  c.enable = text("INCIN_TORCH_ENABLE") != "0";
  std::string v = text("INCIN_TORCH_SUMMARY");
  if (v == "0") {
    c.summary = SummaryMode::kOff;
  } else if (v == "all") {
    c.summary = SummaryMode::kAll;
  }
  c.summary_json = text("INCIN_TORCH_SUMMARY_JSON");
  c.fallback_log_all = text("INCIN_TORCH_FALLBACK_LOG") == "all";
  int required = 0;
  if (inc_setting_bool("INCIN_REQUIRE_OFFLOAD", &required) != INC_OK) {
    required = 1;  // garbled, but asked for: fail rather than fall back silently
    if (c.error.empty()) c.error = inc_last_error();
  }
  c.require_offload = required != 0;
  c.am = text("INCIN_AM");
  v = text("INCIN_IFACE");
  if (!v.empty()) c.iface = v;
  c.transport = text("INCIN_TRANSPORT");
  uint64_t ms = 0;
  if (inc_setting_uint("INCIN_JOIN_TIMEOUT_MS", &ms) != INC_OK) {
    if (c.error.empty()) c.error = inc_last_error();
  } else if (ms != 0) {
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

// An offloaded collective queued on the group's worker thread: complete
// (its Future too) when the worker ran it; a 0-element call's, at once. wait(timeout), isCompleted() and
// exceptions are c10d::Work's (as gloo's AsyncWork); it holds the output
// tensors until then.
class AsyncWork : public c10d::Work {
 public:
  AsyncWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}
  // On the worker thread (or gloo's, for a redo on gloo). The Work first,
  // then the Future, whose callbacks (DDP's) run here.
  void Complete(std::exception_ptr error) {
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

// A collective composed of a gloo Work and a step after it (copying a
// reduce_scatter's block out of an allreduce): complete when the step ran.
// The step runs on gloo's thread as a callback of the inner Work's future.
class ThenWork : public c10d::Work {
 public:
  ThenWork(int rank, c10d::OpType type, c10::intrusive_ptr<c10d::Work> inner,
           c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(rank, type), inner_(std::move(inner)), future_(std::move(future)) {}
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
  bool wait(std::chrono::milliseconds timeout) override {
    // gloo's Work honours the timeout (and throws its own error); the step
    // after it is a local copy.
    inner_->wait(timeout);
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

size_t RoundUp4(size_t n) {
  return (n + 3) & ~size_t{3};
}

// Bytes of a tensor for the counters; nbytes() is not defined for sparse
// tensors (their values and indices are counted instead).
uint64_t BytesOf(const at::Tensor& t) {
  if (!t.defined()) return 0;
  if (t.layout() == c10::kStrided) return t.nbytes();
  if (t.layout() == c10::kSparse) return t._values().nbytes() + t._indices().nbytes();
  return 0;
}

uint64_t BytesOf(const std::vector<at::Tensor>& tensors) {
  uint64_t n = 0;
  for (const at::Tensor& t : tensors) n += BytesOf(t);
  return n;
}

bool AllEmpty(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.numel() != 0) return false;
  return true;
}

std::string SizesString(at::IntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); i++) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + ")";
}

// Argument checks: the same conditions and wording as ProcessGroupGloo's,
// thrown as c10::Error (RuntimeError in Python), prefixed with the
// collective ("ProcessGroupIncin::broadcast: invalid root rank: 4").
[[noreturn]] void ArgError(Coll c, const std::string& msg) {
  C10_THROW_ERROR(Error, std::string("ProcessGroupIncin::") + Name(c) + ": " + msg);
}

void CheckRootRank(Coll c, int64_t root, int size) {
  if (root < 0 || root >= size) ArgError(c, "invalid root rank: " + std::to_string(root));
}

void CheckRootTensor(Coll c, int64_t root, size_t n) {
  if (root < 0 || static_cast<uint64_t>(root) >= n)
    ArgError(c, "invalid root tensor: " + std::to_string(root));
}

void CheckDense(Coll c, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.layout() != c10::kStrided) ArgError(c, "only supports dense tensors");
}

void CheckSingle(Coll c, const std::vector<at::Tensor>& tensors, const char* msg) {
  if (tensors.size() != 1) ArgError(c, msg);
}

void CheckTypeAndSizes(Coll c, const std::vector<at::Tensor>& tensors, const at::Tensor& like) {
  for (size_t i = 0; i < tensors.size(); i++) {
    if (!tensors[i].options().type_equal(like.options()))
      ArgError(c, "invalid tensor type at index " + std::to_string(i) + " (expected " + like.toString() +
                      ", got " + tensors[i].toString() + ")");
    if (tensors[i].sizes() != like.sizes())
      ArgError(c, "invalid tensor size at index " + std::to_string(i) + " (expected " +
                      SizesString(like.sizes()) + ", got " + SizesString(tensors[i].sizes()) + ")");
  }
}

void CheckLayouts(Coll c, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.layout() != tensors[0].layout()) ArgError(c, "tensors must all have the same layout");
}

// Worker threads still running. A group that ends on its own worker lets
// the thread go (detached) while it is still ending the group (leaving
// libinc's group, destroying gloo's): incin's exit hook waits for them, or
// the process would exit under them.
std::mutex g_threads_mu;
std::condition_variable g_threads_cv;
int g_threads = 0;

// The state of a process group's worker thread, owned jointly by the group
// and the thread (the thread may outlive the group: StopWorker).
struct WorkerState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t queued = 0, done = 0;  // tasks queued and run so far
  bool stop = false;              // no more tasks: the thread ends when the queue is empty
  std::thread::id id;             // the worker's, once started
};

// Releases the GIL for a wait when this thread holds it, and takes it back
// after. A wait for the worker must not hold the GIL: the worker takes it to
// run a Python Future callback, or to drop the last reference to a tensor
// whose Python object Python already let go of (torch then owns the object
// and decrefs it under the GIL). The group's destructor runs under the GIL
// when Python drops the last reference (destroy_process_group).
class WithoutGil {
 public:
  WithoutGil() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~WithoutGil() {
    if (state_) PyEval_RestoreThread(state_);
  }
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

class ProcessGroupIncin : public c10d::ProcessGroup {
 public:
  ProcessGroupIncin(int rank, int size, c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                    const std::string& job_id, std::chrono::milliseconds timeout)
      : c10d::ProcessGroup(rank, size),
        gloo_(std::move(gloo)),
        job_id_(job_id),
        cfg_(ReadConfig()),
        timeout_(timeout) {
    TORCH_CHECK(gloo_, "incin: the fallback gloo process group is missing");
    Join();
  }
  ~ProcessGroupIncin() override { Shutdown(); }

  const std::string getBackendName() const override { return "incin"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const Coll c = Coll::kAllreduce;
    Usable(c);
    if (tensors.empty()) ArgError(c, "requires non-empty tensor list");
    CheckLayouts(c, tensors);
    CheckTypeAndSizes(c, tensors, tensors[0]);
    if (AllEmpty(tensors)) return Local(c, c10d::OpType::ALLREDUCE, tensors);
    uint64_t bytes = BytesOf(tensors);
    // A non-contiguous tensor goes through a contiguous copy (gloo 1.13
    // reduces such a tensor's first numel() elements of storage instead).
    Reason r = TensorsReason(tensors);
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(tensors[0], opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      at::Tensor t = tensors[0];
      size_t n = static_cast<size_t>(t.numel());
      return Offload(
          c, c10d::OpType::ALLREDUCE, bytes, tensors,
          [this, t, n, dt, op]() mutable {
            if (t.is_contiguous()) return inc_allreduce(comm_, t.data_ptr(), t.data_ptr(), n, dt, op);
            at::Tensor cont = t.contiguous();
            inc_status s = inc_allreduce(comm_, cont.data_ptr(), cont.data_ptr(), n, dt, op);
            if (s == INC_OK) t.copy_(cont);
            return s;
          },
          [this, tensors, opts]() mutable { return GlooAllreduce(tensors, opts); });
    }
    return Gloo(c, r, bytes, [&] { return GlooAllreduce(tensors, opts); });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const Coll c = Coll::kBroadcast;
    Usable(c);
    CheckRootRank(c, opts.rootRank, size_);
    CheckRootTensor(c, opts.rootTensor, tensors.size());
    CheckDense(c, tensors);
    CheckTypeAndSizes(c, tensors, tensors[0]);
    if (AllEmpty(tensors)) return Local(c, c10d::OpType::BROADCAST, tensors);
    uint64_t bytes = BytesOf(tensors);
    Reason r = TensorsReason(tensors);
    if (r == Reason::kNone) {
      at::Tensor t = tensors[0];
      uint32_t root = static_cast<uint32_t>(opts.rootRank);
      return Offload(
          c, c10d::OpType::BROADCAST, bytes, tensors,
          [this, t, bytes, root]() mutable {
            // Bytes as int32 words (libinc's broadcast is exact for them); an odd
            // byte count or a non-contiguous tensor through a padded copy.
            if (bytes % 4 == 0 && t.is_contiguous())
              return inc_broadcast(comm_, t.data_ptr(), bytes / 4, INC_INT32, root);
            at::Tensor cont = t.contiguous();
            std::vector<uint8_t> pad(RoundUp4(bytes), 0);
            std::memcpy(pad.data(), cont.data_ptr(), bytes);
            inc_status s = inc_broadcast(comm_, pad.data(), pad.size() / 4, INC_INT32, root);
            if (s == INC_OK) {
              std::memcpy(cont.data_ptr(), pad.data(), bytes);
              if (!cont.is_same(t)) t.copy_(cont);
            }
            return s;
          },
          [this, tensors, opts]() mutable { return GlooBroadcast(tensors, opts); });
    }
    return Gloo(c, r, bytes, [&] { return GlooBroadcast(tensors, opts); });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    const Coll c = Coll::kBarrier;
    Usable(c);
    // Like gloo's barrier: after every earlier Work of this group, the
    // offloaded ones (the queue) and the gloo ones.
    Drain();
    WaitPending();
    Reason r = group_reason_;
    if (r == Reason::kNone) {
      return Offload(
          c, c10d::OpType::BARRIER, 0, {}, [this] { return inc_barrier(comm_); },
          [this, opts]() mutable { return gloo_->barrier(opts); });
    }
    return Gloo(c, r, 0, [&] { return gloo_->barrier(opts); });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    const Coll c = Coll::kAllgather;
    Usable(c);
    if (inputs.empty()) ArgError(c, "requires non-empty input tensor list");
    if (inputs.size() != outputs.size())
      ArgError(c, "requires input/output tensor lists to have the same length");
    for (size_t i = 0; i < outputs.size(); i++) {
      size_t expected = inputs.size() * static_cast<size_t>(size_);
      if (outputs[i].size() != expected)
        ArgError(c, "invalid output tensor list at index " + std::to_string(i) + " (expected length " +
                        std::to_string(expected) + ", got " + std::to_string(outputs[i].size()) + ")");
    }
    CheckDense(c, inputs);
    CheckTypeAndSizes(c, inputs, inputs[0]);
    for (const auto& o : outputs) CheckTypeAndSizes(c, o, inputs[0]);
    if (AllEmpty(inputs)) {
      std::vector<at::Tensor> flat;
      for (const auto& o : outputs) flat.insert(flat.end(), o.begin(), o.end());
      return Local(c, c10d::OpType::ALLGATHER, flat);
    }
    uint64_t bytes = BytesOf(inputs);
    Reason r = TensorsReason(inputs);
    if (r == Reason::kNone && !Cpu(outputs[0])) r = Reason::kNotCpu;
    if (r == Reason::kNone) {
      at::Tensor in = inputs[0].contiguous();
      std::vector<at::Tensor> outs = outputs[0];
      return Offload(
          c, c10d::OpType::ALLGATHER, bytes, outs,
          [this, in, outs]() mutable {
            at::Tensor all = at::empty({size_ * in.numel()}, in.options());
            inc_status s = GatherInto(in, all.data_ptr());
            if (s != INC_OK) return s;
            for (int i = 0; i < size_; i++)
              outs[i].copy_(all.narrow(0, i * in.numel(), in.numel()).view(in.sizes()));
            return s;
          },
          [this, outputs, inputs, opts]() mutable { return gloo_->allgather(outputs, inputs, opts); });
    }
    return Gloo(c, r, bytes, [&] { return gloo_->allgather(outputs, inputs, opts); });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    const Coll c = Coll::kAllgatherBase;
    Usable(c);
    CheckDense(c, {output, input});
    if (output.scalar_type() != input.scalar_type())
      ArgError(c, "output tensor must have the same type as input tensor");
    if (output.numel() != input.numel() * size_)
      ArgError(c, "output tensor size must be equal to world_size times input tensor size");
    if (input.numel() == 0) return Local(c, c10d::OpType::_ALLGATHER_BASE, {output});
    uint64_t bytes = BytesOf(input);
    std::vector<at::Tensor> ins{input};
    Reason r = TensorsReason(ins);
    if (r == Reason::kNone && !output.device().is_cpu()) r = Reason::kNotCpu;
    if (r == Reason::kNone) {
      return Offload(
          c, c10d::OpType::_ALLGATHER_BASE, bytes, {output},
          [this, output, input]() mutable {
            at::Tensor in = input.contiguous();
            at::Tensor dst = output.is_contiguous() ? output : at::empty({output.numel()}, output.options());
            inc_status s = GatherInto(in, dst.data_ptr());
            if (s == INC_OK && !dst.is_same(output)) output.copy_(dst.view(output.sizes()));
            return s;
          },
          [this, output, input, opts]() mutable { return GlooAllgatherBase(output, input, opts); });
    }
    // gloo 1.13 has no _allgather_base: its allgather into views of output.
    return Gloo(c, r, bytes, [&] { return GlooAllgatherBase(output, input, opts); });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const Coll c = Coll::kReduceScatter;
    Usable(c);
    if (outputs.empty()) ArgError(c, "requires non-empty output tensor list");
    if (inputs.size() != outputs.size())
      ArgError(c, "requires input/output tensor lists to have the same length");
    for (size_t i = 0; i < inputs.size(); i++) {
      if (inputs[i].size() != static_cast<size_t>(size_))
        ArgError(c, "invalid input tensor list at index " + std::to_string(i) + " (expected length " +
                        std::to_string(size_) + ", got " + std::to_string(inputs[i].size()) + ")");
      CheckDense(c, inputs[i]);
      for (const at::Tensor& t : inputs[i]) {
        if (t.scalar_type() != outputs[i].scalar_type())
          ArgError(c, "input tensors must have the same type as the output tensor");
        if (t.numel() != outputs[i].numel())
          ArgError(c, "input tensors must have as many elements as the output tensor");
      }
    }
    CheckDense(c, outputs);
    if (AllEmpty(outputs)) return Local(c, c10d::OpType::REDUCE_SCATTER, outputs);
    uint64_t bytes = BytesOf(outputs) * size_;
    Reason r = TensorsReason(outputs);
    if (r == Reason::kNone && !Cpu(inputs[0])) r = Reason::kNotCpu;
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(outputs[0], opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      at::Tensor out = outputs[0];
      std::vector<at::Tensor> ins = inputs[0];
      int64_t n = out.numel();
      return Offload(
          c, c10d::OpType::REDUCE_SCATTER, bytes, outputs,
          [this, out, ins, n, dt, op]() mutable {
            at::Tensor send = at::empty({n * size_}, out.options());
            for (int i = 0; i < size_; i++) send.narrow(0, i * n, n).copy_(ins[i].reshape({n}));
            at::Tensor dst = out.is_contiguous() ? out : at::empty({n}, out.options());
            inc_status s =
                inc_reduce_scatter(comm_, send.data_ptr(), dst.data_ptr(), static_cast<size_t>(n), dt, op);
            if (s == INC_OK && !dst.is_same(out)) out.copy_(dst.view(out.sizes()));
            return s;
          },
          [this, outputs, inputs, opts]() mutable { return GlooReduceScatterList(outputs, inputs, opts); });
    }
    return Gloo(c, r, bytes, [&] { return GlooReduceScatterList(outputs, inputs, opts); });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    const Coll c = Coll::kReduceScatterBase;
    Usable(c);
    CheckDense(c, {output, input});
    if (output.scalar_type() != input.scalar_type())
      ArgError(c, "input tensor must be the same type as the output tensor");
    if (input.numel() != output.numel() * size_)
      ArgError(c, "input tensor must be the same size as output size times world size");
    if (output.numel() == 0) return Local(c, c10d::OpType::_REDUCE_SCATTER_BASE, {output});
    uint64_t bytes = BytesOf(input);
    Reason r = TensorsReason({output});
    if (r == Reason::kNone && !input.device().is_cpu()) r = Reason::kNotCpu;
    inc_datatype dt = INC_INT32;
    inc_op op = INC_SUM;
    if (r == Reason::kNone) r = ReduceTypes(output, opts.reduceOp, &dt, &op);
    if (r == Reason::kNone) {
      return Offload(
          c, c10d::OpType::_REDUCE_SCATTER_BASE, bytes, {output},
          [this, output, input, dt, op]() mutable {
            at::Tensor in = input.contiguous();
            at::Tensor dst = output.is_contiguous() ? output : at::empty({output.numel()}, output.options());
            inc_status s = inc_reduce_scatter(comm_, in.data_ptr(), dst.data_ptr(),
                                              static_cast<size_t>(output.numel()), dt, op);
            if (s == INC_OK && !dst.is_same(output)) output.copy_(dst.view(output.sizes()));
            return s;
          },
          [this, output, input, opts]() mutable {
            return GlooReduceScatter(c10d::OpType::_REDUCE_SCATTER_BASE, output, input.reshape({-1}).clone(),
                                     opts);
          });
    }
    // A copy: the allreduce must not change the caller's input.
    return Gloo(c, r, bytes, [&] {
      return GlooReduceScatter(c10d::OpType::_REDUCE_SCATTER_BASE, output, input.reshape({-1}).clone(), opts);
    });
  }

  // What the switches do not run: straight to gloo, counted. 0-element
  // calls complete locally after gloo's argument checks (gloo 1.13 dies of
  // SIGFPE on an empty all_gather_coalesced).
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const Coll c = Coll::kReduce;
    Usable(c);
    if (!tensors.empty() && AllEmpty(tensors)) {
      CheckRootRank(c, opts.rootRank, size_);
      CheckRootTensor(c, opts.rootTensor, tensors.size());
      CheckSingle(c, tensors, "requires a single-element tensor list");
      CheckDense(c, tensors);
      return Local(c, c10d::OpType::REDUCE, tensors);
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(tensors),
                [&] { return gloo_->reduce(tensors, opts); });
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const Coll c = Coll::kGather;
    Usable(c);
    if (inputs.size() == 1 && inputs[0].numel() == 0) {
      CheckRootRank(c, opts.rootRank, size_);
      CheckDense(c, inputs);
      if (rank_ == opts.rootRank) {
        if (outputs.size() != 1)
          ArgError(c, "requires a single-element output list containing a list with " +
                          std::to_string(size_) + " tensors.");
        if (outputs[0].size() != static_cast<size_t>(size_))
          ArgError(c, "Incorrect output list size " + std::to_string(outputs[0].size()) +
                          ". Output list size should be " + std::to_string(size_) +
                          ", same as size of the process group.");
        CheckTypeAndSizes(c, outputs[0], inputs[0]);
        return Local(c, c10d::OpType::GATHER, outputs[0]);
      }
      if (!outputs.empty()) ArgError(c, "requires empty output on non-root");
      return Local(c, c10d::OpType::GATHER, {});
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(inputs),
                [&] { return gloo_->gather(outputs, inputs, opts); });
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const Coll c = Coll::kScatter;
    Usable(c);
    if (outputs.size() == 1 && outputs[0].numel() == 0) {
      CheckRootRank(c, opts.rootRank, size_);
      CheckDense(c, outputs);
      if (rank_ == opts.rootRank) {
        if (inputs.size() != 1)
          ArgError(c, "requires a single-element input list containing a list with " + std::to_string(size_) +
                          " tensors");
        if (inputs[0].size() != static_cast<size_t>(size_))
          ArgError(c, "Incorrect input list size " + std::to_string(inputs[0].size()) +
                          ". Input list size should be " + std::to_string(size_) +
                          ", same as size of the process group.");
        CheckTypeAndSizes(c, inputs[0], outputs[0]);
      } else if (!inputs.empty()) {
        ArgError(c, "requires empty input on non-root");
      }
      return Local(c, c10d::OpType::SCATTER, outputs);
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(outputs),
                [&] { return gloo_->scatter(outputs, inputs, opts); });
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    const Coll c = Coll::kAlltoall;
    Usable(c);
    // Only an equal split has 0 elements on every rank when it has on this
    // one (with explicit splits the other ranks may still exchange data).
    if (input.numel() == 0 && output.numel() == 0 && output_splits.empty() && input_splits.empty()) {
      CheckDense(c, {output, input});
      return Local(c, c10d::OpType::ALLTOALL_BASE, {output});
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(input),
                [&] { return gloo_->alltoall_base(output, input, output_splits, input_splits, opts); });
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    const Coll c = Coll::kAlltoall;
    Usable(c);
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(inputs),
                [&] { return gloo_->alltoall(outputs, inputs, opts); });
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    const Coll c = Coll::kAllreduceCoalesced;
    Usable(c);
    if (!tensors.empty() && AllEmpty(tensors)) {
      CheckLayouts(c, tensors);
      for (const at::Tensor& t : tensors) {
        if (!t.options().type_equal(tensors[0].options())) ArgError(c, "tensors must all have the same type");
        if (t.device() != tensors[0].device()) ArgError(c, "tensors must all be on the same device");
      }
      CheckDense(c, tensors);
      return Local(c, c10d::OpType::ALLREDUCE_COALESCED, tensors);
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(tensors),
                [&] { return gloo_->allreduce_coalesced(tensors, opts); });
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    const Coll c = Coll::kAllgatherCoalesced;
    Usable(c);
    if (!inputs.empty() && AllEmpty(inputs)) {
      if (outputs.size() != static_cast<size_t>(size_))
        ArgError(c, "output lists should be equal to world size");
      for (const auto& list : outputs) {
        if (list.size() != inputs.size())
          ArgError(c, "invalid output size: (expected length " + std::to_string(inputs.size()) + ", got " +
                          std::to_string(list.size()) + ")");
        for (size_t i = 0; i < list.size(); i++) {
          if (list[i].sizes() != inputs[i].sizes())
            ArgError(c, "invalid size of output tensor at index " + std::to_string(i) + " (expected length " +
                            SizesString(inputs[i].sizes()) + ", got " + SizesString(list[i].sizes()) + ")");
          if (!inputs[i].options().type_equal(list[i].options()))
            ArgError(c, "invalid tensor type at index " + std::to_string(i) + " (expected " +
                            inputs[i].toString() + ", got " + list[i].toString() + ")");
        }
      }
      CheckDense(c, inputs);
      std::vector<at::Tensor> flat;
      for (const auto& o : outputs) flat.insert(flat.end(), o.begin(), o.end());
      return Local(c, c10d::OpType::ALLGATHER_COALESCED, flat);
    }
    return Gloo(c, Reason::kUnsupportedCollective, BytesOf(inputs),
                [&] { return gloo_->allgather_coalesced(outputs, inputs, opts); });
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    Usable(Coll::kSend);
    return Gloo(Coll::kSend, Reason::kUnsupportedCollective, BytesOf(tensors),
                [&] { return gloo_->send(tensors, dst, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    Usable(Coll::kRecv);
    return Gloo(Coll::kRecv, Reason::kUnsupportedCollective, BytesOf(tensors),
                [&] { return gloo_->recv(tensors, src, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    Usable(Coll::kRecv);
    return Gloo(Coll::kRecv, Reason::kUnsupportedCollective, BytesOf(tensors),
                [&] { return gloo_->recvAnysource(tensors, tag); });
  }
  // gloo's monitored barrier (send/recv with rank 0, naming the ranks that did
  // not arrive) after every earlier Work of this group, like barrier().
  // Python: incin.monitored_barrier (torch 1.13's dist.monitored_barrier
  // accepts only the backend named "gloo").
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    Usable(Coll::kMonitoredBarrier);
    Drain();
    WaitPending();
    Count(Coll::kMonitoredBarrier, Reason::kUnsupportedCollective, 0);
    gloo_->monitoredBarrier(opts, wait_all_ranks);
  }
  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }

  // Summary (INCIN_TORCH_SUMMARY, INCIN_TORCH_SUMMARY_JSON), then leaves
  // libinc's group. Idempotent: the destructor and Python's atexit call it.
  void Shutdown() {
    // Without the GIL throughout: the worker may need it, and leaving
    // libinc's group is a call to the AM.
    WithoutGil nogil;
    // Queued offloaded calls complete first, and no task runs after this
    // (libinc's group is still there until below).
    StopWorker();
    std::string libinc = LibincStatus();
    std::lock_guard<std::mutex> l(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    libinc_final_ = libinc;
    WriteSummary();
    if (comm_) {
      inc_comm_destroy(comm_);
      comm_ = nullptr;
      g_libinc_busy = false;
    }
  }

  std::string SummaryJson() const {
    std::string libinc = LibincStatus();
    std::lock_guard<std::mutex> l(mu_);
    return ToJson(libinc);
  }
  std::string SummaryText() const {
    std::lock_guard<std::mutex> l(mu_);
    return ToText();
  }
  std::string GroupState() const {
    std::lock_guard<std::mutex> l(mu_);
    return StateName();
  }
  int64_t TimeoutMs() const { return timeout_.count(); }

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
      local_detail = "INCIN_AM is not set";
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
      // A collective waits for the slowest rank as long as gloo would: the
      // process group's timeout (libinc then fails the tree for every rank).
      c.op_timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(
          timeout_.count(), 1, static_cast<int64_t>(std::numeric_limits<uint32_t>::max())));
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
                            ": libinc group of job " + job_id_ + " formed on " + cfg_.iface + " (timeout " +
                            std::to_string(timeout_.count()) + " ms)");
    } else if (r == Reason::kNoGroup || r == Reason::kSecondGroup) {
      Log(Level::kWarn, "rank " + std::to_string(rank_) + ": no libinc group (" + local_detail +
                            "); every collective runs on gloo (reason=" + Name(r) + ")");
    }
  }

  std::string StateName() const {
    if (failed_) return "failed";
    return group_reason_ == Reason::kNone ? "ok" : Name(group_reason_);
  }

  // Every call first: after a failed offload (or shutdown) the group takes
  // no more calls on any path, so no rank goes on alone.
  void Usable(Coll c) {
    std::lock_guard<std::mutex> l(mu_);
    if (!failed_ && !shut_down_) return;
    refused_calls_++;
    std::string why = shut_down_ ? std::string("the process group was shut down")
                                 : "this process group failed earlier and takes no more calls: " + failure_ +
                                       " (destroy it and create a new one)";
    C10_THROW_ERROR(Error, std::string("incin: ") + Name(c) + " refused: " + why);
  }

  static bool Cpu(const std::vector<at::Tensor>& tensors) {
    for (const at::Tensor& t : tensors)
      if (!t.device().is_cpu()) return false;
    return true;
  }

  // What the offloaded path needs of the (valid, non-empty) tensors: one
  // strided CPU tensor, and the group's switch path. Non-contiguous tensors
  // go through contiguous copies.
  Reason TensorsReason(const std::vector<at::Tensor>& tensors) const {
    if (group_reason_ != Reason::kNone) return group_reason_;
    if (tensors.size() != 1) return Reason::kTensorList;
    const at::Tensor& t = tensors[0];
    if (!t.device().is_cpu()) return Reason::kNotCpu;
    if (t.layout() != c10::kStrided) return Reason::kSparse;
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
      case c10d::ReduceOp::BAND: *op = INC_BAND; break;
      case c10d::ReduceOp::BOR: *op = INC_BOR; break;
      case c10d::ReduceOp::BXOR: *op = INC_BXOR; break;
      default: return Reason::kUnsupportedOp;
    }
    // Bitwise ops on floating tensors are gloo's error to raise, not ours.
    const bool bitwise = *op == INC_BAND || *op == INC_BOR || *op == INC_BXOR;
    if (bitwise && *dt != INC_INT32 && *dt != INC_INT64) return Reason::kUnsupportedOp;
    return Reason::kNone;
  }

  // Every rank's copy of `in` (contiguous) into dst (world x in.nbytes()
  // bytes): straight when whole int32 words, else through blocks padded to
  // them.
  inc_status GatherInto(const at::Tensor& in, void* dst) {
    size_t bytes = in.nbytes();
    if (bytes % 4 == 0) return inc_allgather(comm_, in.data_ptr(), dst, bytes / 4, INC_INT32);
    size_t block = RoundUp4(bytes);
    std::vector<uint8_t> send(block, 0), recv(block * size_);
    std::memcpy(send.data(), in.data_ptr(), bytes);
    inc_status s = inc_allgather(comm_, send.data(), recv.data(), block / 4, INC_INT32);
    if (s != INC_OK) return s;
    for (int i = 0; i < size_; i++)
      std::memcpy(static_cast<uint8_t*>(dst) + i * bytes, recv.data() + i * block, bytes);
    return s;
  }

  // all_gather_into_tensor on gloo 1.13: its allgather into world views of
  // the output (a contiguous one, else a scratch tensor copied back).
  c10::intrusive_ptr<c10d::Work> GlooAllgatherBase(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) {
    at::Tensor flat =
        output.is_contiguous() ? output.view({-1}) : at::empty({output.numel()}, output.options());
    std::vector<std::vector<at::Tensor>> outs(1);
    for (int i = 0; i < size_; i++)
      outs[0].push_back(flat.narrow(0, i * input.numel(), input.numel()).view(input.sizes()));
    std::vector<at::Tensor> ins{input};
    auto inner = gloo_->allgather(outs, ins, opts);
    at::Tensor out = output;
    bool scratch = !output.is_contiguous();
    auto fut = inner->getFuture()->then(
        [out, flat, scratch](c10::ivalue::Future& f) mutable {
          f.value();  // rethrows gloo's error
          if (scratch) out.copy_(flat.view(out.sizes()));
          return c10::IValue(std::vector<at::Tensor>{out});
        },
        c10::ListType::create(c10::TensorType::get()));
    return c10::make_intrusive<ThenWork>(rank_, c10d::OpType::_ALLGATHER_BASE, inner, fut);
  }

  // all_reduce on gloo, with what gloo 1.13 lacks composed here: bfloat16
  // (reduced in float32, rounded back once) and AVG on floating types (SUM,
  // then divided by the world size; float16/bfloat16 summed in float32).
  // gloo's allreduce leaves the same bytes on every rank and the steps after
  // it are local and deterministic, so every rank gets the same result.
  // Everything else is gloo's own call (and gloo's errors).
  c10::intrusive_ptr<c10d::Work> GlooAllreduce(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceOptions& opts) {
    if (tensors.size() != 1 || tensors[0].layout() != c10::kStrided) return gloo_->allreduce(tensors, opts);
    at::Tensor t = tensors[0];
    const bool avg = opts.reduceOp == c10d::ReduceOp::AVG && at::isFloatingType(t.scalar_type());
    const bool bf16 = t.scalar_type() == at::kBFloat16;
    // gloo 1.13 reduces numel() elements from data_ptr() whatever the
    // strides: a non-contiguous tensor through a contiguous copy.
    if (!avg && !bf16 && t.is_contiguous()) return gloo_->allreduce(tensors, opts);
    const bool widen = bf16 || t.scalar_type() == at::kHalf;
    at::Tensor scratch = widen ? t.to(at::kFloat).contiguous() : t.clone(at::MemoryFormat::Contiguous);
    c10d::AllreduceOptions ao = opts;
    if (avg) ao.reduceOp = c10d::ReduceOp::SUM;
    std::vector<at::Tensor> v{scratch};
    auto inner = gloo_->allreduce(v, ao);
    const int64_t world = size_;
    auto fut = inner->getFuture()->then(
        [t, scratch, avg, world](c10::ivalue::Future& f) mutable {
          f.value();  // rethrows gloo's error
          if (avg) scratch.div_(world);
          t.copy_(scratch);
          return c10::IValue(std::vector<at::Tensor>{t});
        },
        c10::ListType::create(c10::TensorType::get()));
    return c10::make_intrusive<ThenWork>(rank_, c10d::OpType::ALLREDUCE, inner, fut);
  }

  // broadcast on gloo; a non-contiguous tensor through a contiguous copy
  // (gloo 1.13 sends numel() elements from data_ptr() whatever the strides).
  c10::intrusive_ptr<c10d::Work> GlooBroadcast(std::vector<at::Tensor>& tensors,
                                               const c10d::BroadcastOptions& opts) {
    if (tensors.size() != 1 || tensors[0].layout() != c10::kStrided || tensors[0].is_contiguous())
      return gloo_->broadcast(tensors, opts);
    at::Tensor t = tensors[0];
    at::Tensor scratch = t.contiguous();
    std::vector<at::Tensor> v{scratch};
    auto inner = gloo_->broadcast(v, opts);
    auto fut = inner->getFuture()->then(
        [t, scratch](c10::ivalue::Future& f) mutable {
          f.value();  // rethrows gloo's error
          t.copy_(scratch);
          return c10::IValue(std::vector<at::Tensor>{t});
        },
        c10::ListType::create(c10::TensorType::get()));
    return c10::make_intrusive<ThenWork>(rank_, c10d::OpType::BROADCAST, inner, fut);
  }

  // reduce_scatter (list form) on gloo: the inputs concatenated.
  c10::intrusive_ptr<c10d::Work> GlooReduceScatterList(std::vector<at::Tensor>& outputs,
                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                       const c10d::ReduceScatterOptions& opts) {
    if (outputs.size() != 1)
      ArgError(Coll::kReduceScatter, "on gloo, reduce_scatter takes one output tensor (multi-device lists)");
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : inputs[0]) flat.push_back(t.reshape({-1}));
    return GlooReduceScatter(c10d::OpType::REDUCE_SCATTER, outputs[0], at::cat(flat), opts);
  }

  // reduce_scatter on gloo 1.13 (which has none): an allreduce of `flat`
  // (this rank's world x count inputs, a tensor of our own) with the
  // caller's op, then this rank's block copied into output. gloo's
  // arithmetic, so exactly what its allreduce gives for that block.
  c10::intrusive_ptr<c10d::Work> GlooReduceScatter(c10d::OpType type, at::Tensor& output, at::Tensor flat,
                                                   const c10d::ReduceScatterOptions& opts) {
    c10d::AllreduceOptions ao;
    ao.reduceOp = opts.reduceOp;
    ao.timeout = opts.timeout;
    std::vector<at::Tensor> v{flat};
    auto inner = GlooAllreduce(v, ao);
    at::Tensor out = output;
    int64_t n = output.numel();
    int64_t at_ = static_cast<int64_t>(rank_) * n;
    auto fut = inner->getFuture()->then(
        [out, flat, n, at_](c10::ivalue::Future& f) mutable {
          f.value();  // rethrows gloo's error
          out.copy_(flat.narrow(0, at_, n).view(out.sizes()));
          return c10::IValue(std::vector<at::Tensor>{out});
        },
        c10::ListType::create(c10::TensorType::get()));
    return c10::make_intrusive<ThenWork>(rank_, type, inner, fut);
  }

  using IncFn = std::function<inc_status()>;
  using GlooFn = std::function<c10::intrusive_ptr<c10d::Work>()>;

  // Queues fn (a libinc call; it owns copies of the tensor handles) on the
  // worker thread and returns its Work at once. On the worker: OK completes
  // the Work; switch_unsupported (the tree refused before sending anything,
  // identically on every rank) runs redo, the same call on gloo, and the
  // Work completes with it; libinc's INVALID_ARGUMENT (checked before
  // anything is sent) is the caller's argument error: the Work raises it
  // and the group stays as it was; anything else fails the group (the Work
  // raises, and every later call).
  c10::intrusive_ptr<c10d::Work> Offload(Coll coll, c10d::OpType type, uint64_t bytes,
                                         std::vector<at::Tensor> outputs, IncFn fn, GlooFn redo) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (failed_ || shut_down_ || !comm_) {
        l.unlock();
        Usable(coll);
        C10_THROW_ERROR(Error, std::string("incin: ") + Name(coll) + ": no libinc group");
      }
    }
    auto work = c10::make_intrusive<AsyncWork>(rank_, type, std::move(outputs));
    if (!Enqueue([this, coll, bytes, work, fn = std::move(fn), redo = std::move(redo)] {
          RunOffload(coll, bytes, work, fn, redo);
        }))
      C10_THROW_ERROR(Error,
                      std::string("incin: ") + Name(coll) + " refused: the process group was shut down");
    return work;
  }

  // On the worker thread.
  void RunOffload(Coll coll, uint64_t bytes, const c10::intrusive_ptr<AsyncWork>& work, const IncFn& fn,
                  const GlooFn& redo) {
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (failed_ || shut_down_) {
        refused_calls_++;
        error = std::make_exception_ptr(c10::Error(
            std::string("incin: ") + Name(coll) + " refused: " +
                (shut_down_ ? std::string("the process group was shut down")
                            : "this process group failed earlier and takes no more calls: " + failure_ +
                                  " (destroy it and create a new one)"),
            ""));
      }
    }
    if (error) return work->Complete(error);
    auto t0 = std::chrono::steady_clock::now();
    inc_status s;
    try {
      std::lock_guard<std::mutex> in_libinc(libinc_mu_);
      s = fn();
    } catch (...) {  // a tensor copy that failed (out of memory): this call's error
      return work->Complete(std::current_exception());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s == INC_OK) {
      {
        std::lock_guard<std::mutex> l(mu_);
        Tally& t = tally_[static_cast<size_t>(coll)][0];
        t.calls++;
        t.bytes += bytes;
        t.seconds += secs;
      }
      return work->Complete(nullptr);
    }
    std::string err = inc_last_error();
    if (s == INC_FAILED_PRECONDITION && err.find(" does not ") != std::string::npos) {
      c10::intrusive_ptr<c10d::Work> g;
      try {
        g = Gloo(coll, Reason::kSwitchUnsupported, bytes, redo);
      } catch (...) {
        return work->Complete(std::current_exception());
      }
      if (!g) return work->Complete(nullptr);
      g->getFuture()->addCallback(
          [work](c10::ivalue::Future& f) { work->Complete(f.hasError() ? f.exception_ptr() : nullptr); });
      return;
    }
    if (s == INC_INVALID_ARGUMENT) {
      {
        std::lock_guard<std::mutex> l(mu_);
        arg_errors_[static_cast<size_t>(coll)]++;
      }
      return work->Complete(std::make_exception_ptr(
          c10::Error(std::string("ProcessGroupIncin::") + Name(coll) + ": " + err, "")));
    }
    std::string why;
    {
      std::lock_guard<std::mutex> l(mu_);
      failed_ = true;
      // inc_last_error() starts with the status name ("DEADLINE_EXCEEDED: ...").
      failure_ = std::string("offloaded ") + Name(coll) + " failed on rank " + std::to_string(rank_) +
                 " after " + std::to_string(static_cast<int64_t>(secs * 1000)) + " ms: " +
                 (err.rfind(inc_status_name(s), 0) == 0 ? err : std::string(inc_status_name(s)) + ": " + err);
      failed_calls_++;
      why = failure_;
    }
    Log(Level::kError, why + " (every later call on this process group raises)");
    work->Complete(std::make_exception_ptr(std::runtime_error("incin: " + why)));
  }

  // The worker: one thread per process group, started at the first
  // offloaded call, tasks in FIFO order. The thread holds the queue's state
  // (WorkerState) by shared_ptr and nothing of the group, so the group may
  // end while the thread is still finishing a task (below, StopWorker).
  bool Enqueue(std::function<void()> task) {
    std::lock_guard<std::mutex> l(ws_->mu);
    if (ws_->stop) return false;  // shutting down
    if (!worker_.joinable()) {
      {
        std::lock_guard<std::mutex> g(g_threads_mu);
        g_threads++;
      }
      worker_ = std::thread(WorkerLoop, ws_);
      ws_->id = worker_.get_id();
    }
    ws_->queue.push_back(std::move(task));
    ws_->queued++;
    ws_->cv.notify_all();
    return true;
  }

  static void WorkerLoop(std::shared_ptr<WorkerState> s) {
    std::unique_lock<std::mutex> l(s->mu);
    for (;;) {
      s->cv.wait(l, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) {  // stop, and nothing left to run
        std::lock_guard<std::mutex> g(g_threads_mu);
        g_threads--;
        g_threads_cv.notify_all();
        return;
      }
      RunFront(*s, l);
    }
  }

  // Runs the queue's first task with the lock released (l holds s.mu).
  // The task's tensors are dropped before it counts as done: dropping the
  // last reference of a tensor Python let go of takes the GIL.
  static void RunFront(WorkerState& s, std::unique_lock<std::mutex>& l) {
    std::function<void()> task = std::move(s.queue.front());
    s.queue.pop_front();
    l.unlock();
    task();
    task = nullptr;
    l.lock();
    s.done++;
    s.cv.notify_all();
  }

  // Until every task queued so far ran (its libinc call returned, or its
  // redo was issued to gloo). Not on the worker itself (a Work's future
  // callback calling the group): the task it runs in is what it would wait
  // for.
  void Drain() {
    std::unique_lock<std::mutex> l(ws_->mu);
    if (ws_->id == std::thread::id() || std::this_thread::get_id() == ws_->id) return;
    uint64_t target = ws_->queued;
    WithoutGil nogil;
    ws_->cv.wait(l, [&] { return ws_->done >= target; });
  }

  // No new tasks; the queued ones run (drained, as gloo's destructor does:
  // every rank issued them, so running them keeps the ranks together), and
  // only then may Shutdown destroy libinc's group. From another thread:
  // join the worker, without the GIL (a task or a Future callback on the
  // worker may need it: a Python callback, or the last reference of a
  // tensor whose Python object is gone). On the worker itself (a Work's
  // callback shut the group down or dropped its last reference, so this
  // may be the destructor): it cannot wait for itself, so it runs what is
  // queued behind the current task right here, in order, and lets the
  // thread go (detached); the thread then ends after the current task,
  // touching only its WorkerState.
  void StopWorker() {
    std::thread t;
    {
      std::unique_lock<std::mutex> l(ws_->mu);
      ws_->stop = true;
      ws_->cv.notify_all();
      if (ws_->id != std::thread::id() && std::this_thread::get_id() == ws_->id) {
        WithoutGil nogil;
        while (!ws_->queue.empty()) RunFront(*ws_, l);
        if (worker_.joinable()) worker_.detach();
        return;
      }
      t = std::move(worker_);
    }
    if (!t.joinable()) return;
    WithoutGil nogil;
    t.join();  // runs what is queued first
  }

  void Count(Coll coll, Reason reason, uint64_t bytes) {
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
    if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig || reason == Reason::kSecondGroup) &&
        !group_detail_.empty())
      detail = " detail=" + JsonString(group_detail_);
    Log(Level::kWarn, std::string("fallback reason=") + Name(reason) + " collective=" + Name(coll) +
                          " rank=" + std::to_string(rank_) + " bytes=" + std::to_string(bytes) + detail);
  }

  // A call on gloo: counted under its reason, its Work remembered for
  // barrier(). gloo's own argument errors raise from fn, uncounted.
  template <typename Fn>
  c10::intrusive_ptr<c10d::Work> Gloo(Coll coll, Reason reason, uint64_t bytes, Fn&& fn) {
    if (RequiredOffloadFails(cfg_.require_offload, Name(coll), Name(reason))) {
      std::string detail;
      if (reason == Reason::kNoGroup || reason == Reason::kBadConfig || reason == Reason::kSecondGroup)
        detail = group_detail_;
      const std::string why = RequiredOffloadMessage(Name(coll), Name(reason), detail);
      Log(Level::kError, why);
      C10_THROW_ERROR(Error, why);
    }
    // After the offloaded calls before it (the rule in the header).
    Drain();
    c10::intrusive_ptr<c10d::Work> w = fn();
    Count(coll, reason, bytes);
    if (w) {
      std::lock_guard<std::mutex> l(pending_mu_);
      // Keep only what may still run: the list stays short.
      if (pending_.size() >= 64) {
        std::vector<c10::weak_intrusive_ptr<c10d::Work>> keep;
        for (auto& p : pending_) {
          auto s = p.lock();
          if (s && !s->isCompleted()) keep.emplace_back(s);
        }
        pending_.swap(keep);
      }
      pending_.emplace_back(w);
    }
    return w;
  }

  // Waits for every gloo Work handed out so far. Their errors belong to
  // their own wait(): the barrier goes on so that every rank reaches it.
  void WaitPending() {
    std::vector<c10::weak_intrusive_ptr<c10d::Work>> works;
    {
      std::lock_guard<std::mutex> l(pending_mu_);
      works.swap(pending_);
    }
    for (auto& p : works) {
      auto s = p.lock();
      if (!s) continue;
      try {
        s->wait();
      } catch (const std::exception&) {
      }
    }
  }

  // A 0-element call: nothing to move, complete here.
  c10::intrusive_ptr<c10d::Work> Local(Coll coll, c10d::OpType type, std::vector<at::Tensor> outputs) {
    {
      std::lock_guard<std::mutex> l(mu_);
      local_[static_cast<size_t>(coll)]++;
    }
    // Complete when returned (its Future too).
    auto work = c10::make_intrusive<AsyncWork>(rank_, type, std::move(outputs));
    work->Complete(nullptr);
    return work;
  }

  // libinc's counters (inc_comm_status_json) as JSON, "" without a group.
  // comm_ changes only in Join (before any call) and Shutdown (after the
  // worker stopped), both on the caller's thread.
  std::string LibincStatus() const {
    std::lock_guard<std::mutex> in_libinc(libinc_mu_);
    if (!comm_) return libinc_final_;
    return inc_comm_status_json(comm_);
  }

  // libinc: LibincStatus() (the object "libinc", omitted when "").
  std::string ToJson(const std::string& libinc) const {
    std::ostringstream o;
    o << "{\"rank\": " << rank_ << ", \"world\": " << size_
      << ", \"backend\": \"incin\", \"group\": " << JsonString(StateName())
      << ", \"group_detail\": " << JsonString(failed_ ? failure_ : group_detail_)
      << ", \"job_id\": " << JsonString(job_id_) << ", \"timeout_ms\": " << timeout_.count()
      << ", \"failed_offloads\": " << failed_calls_ << ", \"refused_calls\": " << refused_calls_
      << ", \"collectives\": {";
    std::array<uint64_t, static_cast<size_t>(Reason::kCount)> by_reason{};
    Tally off_total, fb_total;
    uint64_t local_total = 0, arg_total = 0;
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
      local_total += local_[c];
      arg_total += arg_errors_[c];
      if (!off.calls && !fb.calls && !local_[c] && !arg_errors_[c]) continue;
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.6f", off.seconds);
      o << (first_c ? "" : ", ") << JsonString(kCollNames[c]) << ": {\"offloaded\": {\"calls\": " << off.calls
        << ", \"bytes\": " << off.bytes << ", \"seconds\": " << secs
        << "}, \"fallback\": {\"calls\": " << fb.calls << ", \"bytes\": " << fb.bytes
        << "}, \"fallback_reasons\": {" << reasons << "}, \"local\": " << local_[c]
        << ", \"argument_errors\": " << arg_errors_[c] << "}";
      first_c = false;
    }
    o << "}, \"totals\": {\"offloaded\": " << off_total.calls << ", \"offloaded_bytes\": " << off_total.bytes
      << ", \"fallback\": " << fb_total.calls << ", \"fallback_bytes\": " << fb_total.bytes
      << ", \"local\": " << local_total << ", \"argument_errors\": " << arg_total
      << "}, \"fallback_reasons\": {";
    bool first_r = true;
    for (size_t r = 1; r < by_reason.size(); r++) {
      if (!by_reason[r]) continue;
      o << (first_r ? "" : ", ") << JsonString(kReasonNames[r]) << ": " << by_reason[r];
      first_r = false;
    }
    o << "}";
    if (!libinc.empty()) o << ", \"libinc\": " << libinc;
    o << "}";
    return o.str();
  }

  std::string ToText() const {
    std::ostringstream o;
    const std::string& detail = failed_ ? failure_ : group_detail_;
    o << "incin-torch: summary rank " << rank_ << "/" << size_ << ": group " << StateName()
      << (detail.empty() ? "" : " (" + detail + ")") << ", job " << job_id_ << "\n";
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
      if (local_[c]) {
        std::snprintf(line, sizeof(line), "incin-torch:   %-22s %-32s %10llu %14s %12s\n", kCollNames[c],
                      "local (0 elements)", static_cast<unsigned long long>(local_[c]), "0", "-");
        o << line;
      }
      if (arg_errors_[c]) {
        std::snprintf(line, sizeof(line), "incin-torch:   %-22s %-32s %10llu %14s %12s\n", kCollNames[c],
                      "argument error (raised)", static_cast<unsigned long long>(arg_errors_[c]), "-", "-");
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
      f << ToJson(libinc_final_) << "\n";
      if (!f) Log(Level::kError, "cannot write INCIN_TORCH_SUMMARY_JSON file " + path);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  std::string job_id_;
  Config cfg_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  // Held by the worker around each libinc call, so that the summary reads
  // libinc's counters between calls (the group is not re-entrant).
  mutable std::mutex libinc_mu_;
  inc_comm* comm_ = nullptr;
  std::string libinc_final_;             // libinc's counters when the group was left
  Reason group_reason_ = Reason::kNone;  // agreed by every rank at creation
  std::string group_detail_;
  bool failed_ = false;  // an offloaded call failed: every later call raises
  std::string failure_;  // what failed, for those errors
  uint64_t failed_calls_ = 0;
  uint64_t refused_calls_ = 0;
  bool shut_down_ = false;
  std::array<std::array<Tally, static_cast<size_t>(Reason::kCount)>, static_cast<size_t>(Coll::kCount)>
      tally_{};
  std::array<uint64_t, static_cast<size_t>(Coll::kCount)> local_{};       // 0-element calls
  std::array<uint64_t, static_cast<size_t>(Coll::kCount)> arg_errors_{};  // raised by libinc's checks
  std::set<std::pair<Coll, Reason>> logged_;
  std::mutex pending_mu_;
  std::vector<c10::weak_intrusive_ptr<c10d::Work>> pending_;  // gloo Works barrier() waits for
  // The worker thread (joined, or detached when the group ends on it) and
  // its FIFO queue of offloaded calls, shared with the thread.
  std::shared_ptr<WorkerState> ws_ = std::make_shared<WorkerState>();
  std::thread worker_;
};

}  // namespace
}  // namespace incin_torch

namespace py = pybind11;

PYBIND11_MODULE(_incin_torch, m) {
  m.doc() = "incin's torch.distributed backend (docs/pytorch.md); use `import incin`";
  py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
  using PG = incin_torch::ProcessGroupIncin;
  py::class_<PG, c10::intrusive_ptr<PG>>(m, "ProcessGroupIncin", base)
      .def(py::init([](int rank, int size, const c10::intrusive_ptr<c10d::ProcessGroup>& gloo,
                       const std::string& job_id, std::chrono::milliseconds timeout) {
             return c10::make_intrusive<PG>(rank, size, gloo, job_id, timeout);
           }),
           py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("job_id"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("_shutdown", &PG::Shutdown, py::call_guard<py::gil_scoped_release>(),
           "prints the summary and leaves libinc's group (also done when the group is destroyed)")
      // Without the GIL: they wait for an offloaded call that holds the lock.
      .def("summary_json", &PG::SummaryJson, py::call_guard<py::gil_scoped_release>(),
           "per-collective offloaded/fallback counts as JSON")
      .def("summary_text", &PG::SummaryText, py::call_guard<py::gil_scoped_release>())
      .def("group_state", &PG::GroupState, py::call_guard<py::gil_scoped_release>(),
           "\"ok\" when the libinc group formed, \"failed\" after a failed offload, else the fallback reason")
      .def("timeout_ms", &PG::TimeoutMs, "the process group's timeout (libinc's op_timeout_ms)");
  m.def(
      "_wait_for_workers",
      [](double seconds) {
        std::unique_lock<std::mutex> g(incin_torch::g_threads_mu);
        return incin_torch::g_threads_cv.wait_for(g, std::chrono::duration<double>(seconds),
                                                  [] { return incin_torch::g_threads == 0; });
      },
      py::arg("seconds"), py::call_guard<py::gil_scoped_release>(),
      "waits until every group's worker thread ended (at exit); false when some still ran after `seconds`");
  m.def("libinc_version", [] { return std::string(inc_version()); });
  m.def(
      "credential_job",
      [](const std::string& credential) {
        const char* job = nullptr;
        if (credential.empty() || inc_credential_job(credential.c_str(), &job) != INC_OK)
          return std::string();
        return std::string(job);
      },
      py::arg("credential"), "the job a job credential names (libinc's parser); \"\" for text that is none");
  // libinc's settings table, for the Python half (INCIN_JOB_ID, ...).
  m.def(
      "setting",
      [](const std::string& name) {
        const char* v = nullptr;
        if (inc_setting_string(name.c_str(), &v) != INC_OK) throw py::value_error(inc_last_error());
        return std::string(v ? v : "");
      },
      py::arg("name"),
      "the value of an INCIN_ setting (also read under its old name, with a deprecation warning); \"\" when "
      "unset");
}
