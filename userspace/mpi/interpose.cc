// libincmpi: an MPI profiling-interface (PMPI) library. Preloaded into (or
// linked with) an unmodified MPI program, it defines MPI_Init/_Init_thread/
// _Finalize and the C bindings of MPI_Allreduce, MPI_Reduce, MPI_Bcast,
// MPI_Barrier, MPI_Reduce_scatter_block and MPI_Allgather. At MPI_Init every
// rank joins MPI_COMM_WORLD's INC group at incamd through libinc; a
// collective then runs in the switches when the decision table (decision.h)
// allows it, otherwise on MPI's own algorithm through PMPI_* with a counted,
// logged reason. See docs/mpi.md.
//
// Invariant: every rank takes the same path for the same call. Decisions use
// only what a correct MPI program passes identically on every rank (op,
// counts, element type), the group is used only if every rank formed it
// (checked with one PMPI_Allreduce at init), and an offloaded collective that
// fails is an MPI error, never a silent local fallback (other ranks may
// already have finished it on the switch).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/communicator.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/stats.h"

extern char** environ;

namespace inc::mpi {
namespace {

using Clock = std::chrono::steady_clock;

// Structural state of a communicator other than MPI_COMM_WORLD (cached as
// an MPI attribute, so it goes away with MPI_Comm_free).
struct CommState {
  Reason reason = Reason::kNone;  // structural: subcomm, intercomm, ...
  bool permuted = false;          // same group as the world, other rank order
  std::vector<int> to_world;      // comm rank -> world rank (permuted only)
};

struct Global {
  Config cfg;
  int rank = 0;
  int world = 1;
  int thread_level = MPI_THREAD_SINGLE;
  std::unique_ptr<client::Communicator> inc;
  Reason group_reason = Reason::kNone;  // kNone = MPI_COMM_WORLD has an INC group
  std::string group_detail;
  std::string job_id;
  int tree_id = -1;
  std::mutex inc_mu;  // one collective at a time on the libinc Communicator
  std::mutex log_mu;
  std::set<std::pair<Call, Reason>> logged;
  Stats stats;
  int keyval = MPI_KEYVAL_INVALID;         // CommState of derived communicators
  int type_keyval = MPI_KEYVAL_INVALID;    // TypeInfo of derived datatypes
  MPI_Comm progress_comm = MPI_COMM_NULL;  // private: probed to drive MPI's progress
  bool finalized = false;
};

Global* g = nullptr;  // set by MPI_Init*, kept until exit

void Log(LogLevel level, const std::string& text) {
  if (!g || level >= g->cfg.log_level) LogLine(level, text);
}

std::string DefaultRouteInterface() {
  std::ifstream f("/proc/net/route");
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    char ifname[64] = {0};
    unsigned long dest = 1;
    if (std::sscanf(line.c_str(), "%63s %lx", ifname, &dest) == 2 && dest == 0) return ifname;
  }
  return "eth0";
}

int DeleteCommState(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommState*>(value);
  return MPI_SUCCESS;
}

CommState* Classify(MPI_Comm comm) {
  auto* st = new CommState;
  int inter = 0, size = 0, cmp = MPI_UNEQUAL;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) {
    st->reason = Reason::kIntercomm;
    return st;
  }
  PMPI_Comm_size(comm, &size);
  if (size == 1) {
    st->reason = Reason::kSingleRank;
    return st;
  }
  PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
  if (cmp == MPI_UNEQUAL) {
    st->reason = Reason::kSubcomm;
  } else if (g->thread_level == MPI_THREAD_MULTIPLE) {
    // Threads may order collectives of different communicators differently
    // on different ranks; they would meet on the one shared INC group.
    st->reason = Reason::kThreadMultiple;
  } else if (cmp == MPI_SIMILAR) {
    st->permuted = true;
    MPI_Group cg, wg;
    PMPI_Comm_group(comm, &cg);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> ranks(size);
    for (int i = 0; i < size; i++) ranks[i] = i;
    st->to_world.resize(size);
    PMPI_Group_translate_ranks(cg, size, ranks.data(), wg, st->to_world.data());
    PMPI_Group_free(&cg);
    PMPI_Group_free(&wg);
  }
  return st;
}

// What a communicator allows; *state is null for MPI_COMM_WORLD.
Reason CommReason(MPI_Comm comm, const CommState** state) {
  *state = nullptr;
  if (comm == MPI_COMM_NULL) return Reason::kInvalidArgs;
  // Without a world group nothing is offloaded; say so rather than why a
  // derived communicator could not have used it anyway.
  if (g->group_reason != Reason::kNone) return g->group_reason;
  if (comm != MPI_COMM_WORLD) {
    void* val = nullptr;
    int flag = 0;
    if (g->keyval == MPI_KEYVAL_INVALID) return Reason::kNoGroup;
    if (PMPI_Comm_get_attr(comm, g->keyval, &val, &flag) != MPI_SUCCESS) return Reason::kInvalidArgs;
    if (!flag) {
      val = Classify(comm);
      PMPI_Comm_set_attr(comm, g->keyval, val);
    }
    *state = static_cast<const CommState*>(val);
    return (*state)->reason;
  }
  return Reason::kNone;
}

// A datatype as libincmpi uses it: the element type of its signature (the
// only part that enters a decision) and its local layout (whether this rank
// packs).
struct TypeInfo {
  bool valid = false;
  bool contiguous = false;  // count items are count x size bytes at the buffer
  Elem elem = Elem::kBytes;
  uint64_t size = 0;   // bytes of data per item
  int64_t extent = 0;  // bytes from one item to the next
};

Elem PredefinedElem(MPI_Datatype t) {
  struct Entry {
    MPI_Datatype type;
    Elem elem;
  };
  constexpr Elem kLong = sizeof(long) == 8 ? Elem::kInt64 : Elem::kInt32;
  constexpr Elem kULong = sizeof(long) == 8 ? Elem::kUInt64 : Elem::kUInt32;
  static_assert(sizeof(int) == 4 && sizeof(long long) == 8, "C type sizes");
  static_assert(sizeof(MPI_Aint) == 8 && sizeof(MPI_Count) == 8, "MPI integer sizes");
  const Entry table[] = {
      {MPI_INT, Elem::kInt32},
      {MPI_INT32_T, Elem::kInt32},
      {MPI_UNSIGNED, Elem::kUInt32},
      {MPI_UINT32_T, Elem::kUInt32},
      {MPI_LONG, kLong},
      {MPI_UNSIGNED_LONG, kULong},
      {MPI_LONG_LONG, Elem::kInt64},
      {MPI_LONG_LONG_INT, Elem::kInt64},
      {MPI_INT64_T, Elem::kInt64},
      {MPI_AINT, Elem::kInt64},
      {MPI_COUNT, Elem::kInt64},
      {MPI_UNSIGNED_LONG_LONG, Elem::kUInt64},
      {MPI_UINT64_T, Elem::kUInt64},
      {MPI_FLOAT, Elem::kFloat32},
      {MPI_DOUBLE, Elem::kFloat64},
  };
  for (const Entry& e : table)
    if (e.type == t) return e.elem;
  return Elem::kBytes;  // incl. the pair types: MPI reduces them with MINLOC/MAXLOC only
}

bool IsNamed(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  return PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED;
}

void FreeDerived(MPI_Datatype t) {
  if (!IsNamed(t)) PMPI_Type_free(&t);
}

// One level of a datatype for SignatureElem and Ordered; the inner
// datatypes that MPI_Type_get_contents returns are freed by Release.
struct MpiTypeTree {
  std::vector<MPI_Datatype> unused;  // returned, but contributing no elements

  TypeNode<MPI_Datatype> Decode(MPI_Datatype t) {
    TypeNode<MPI_Datatype> node;
    int ni = 0, na = 0, nd = 0, combiner = 0;
    MPI_Count size = 0;
    PMPI_Type_size_x(t, &size);
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
        combiner == MPI_COMBINER_NAMED || nd == 0) {
      // Fortran parameterised types (MPI_Type_create_f90_*) have no inner type.
      node.named = true;
      node.elem = combiner == MPI_COMBINER_NAMED ? PredefinedElem(t) : Elem::kBytes;
      node.size = static_cast<uint64_t>(std::max<MPI_Count>(size, 0));
      return node;
    }
    std::vector<int> ints(static_cast<size_t>(ni));
    std::vector<MPI_Aint> addrs(static_cast<size_t>(na));
    std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
    PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data());
    for (int i = 0; i < nd; i++) {
      // A struct lists its block lengths after its count; any other
      // constructor has one inner type, with elements iff it has some.
      bool contributes =
          combiner == MPI_COMBINER_STRUCT ? ni > i + 1 && ints[static_cast<size_t>(i) + 1] > 0 : size > 0;
      (contributes ? node.parts : unused).push_back(types[static_cast<size_t>(i)]);
    }
    return node;
  }
  void Release(MPI_Datatype t) { FreeDerived(t); }
  ~MpiTypeTree() {
    for (MPI_Datatype t : unused) FreeDerived(t);
  }
};

// A predefined type, or MPI_Type_dup/MPI_Type_contiguous (nested) of one:
// its elements lie in signature order.
bool Ordered(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
  if (combiner == MPI_COMBINER_NAMED) return true;
  if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 || ni > 1 || na > 0)
    return false;
  int ints[1] = {0};
  MPI_Aint addrs[1];
  MPI_Datatype inner;
  if (PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return false;
  bool ordered = Ordered(inner);
  FreeDerived(inner);
  return ordered;
}

TypeInfo ComputeTypeInfo(MPI_Datatype t) {
  TypeInfo info;
  Layout l;
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0 ||
      PMPI_Type_get_extent_x(t, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(t, &true_lb, &true_extent) != MPI_SUCCESS)
    return info;
  MpiTypeTree tree;
  info.elem = SignatureElem(tree, t).value_or(Elem::kBytes);
  info.size = static_cast<uint64_t>(size);
  info.extent = extent;
  l.ordered = Ordered(t);
  l.size = size;
  l.lb = lb;
  l.extent = extent;
  l.true_lb = true_lb;
  l.true_extent = true_extent;
  info.contiguous = IsContiguous(l);
  info.valid = true;
  return info;
}

int DeleteTypeInfo(MPI_Datatype, int, void* value, void*) {
  delete static_cast<TypeInfo*>(value);
  return MPI_SUCCESS;
}

// Derived datatypes are decoded once and cached as an attribute (freed
// with the type, so a recycled handle is decoded afresh).
TypeInfo ClassifyType(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return TypeInfo();
  if (IsNamed(t) || g->type_keyval == MPI_KEYVAL_INVALID) return ComputeTypeInfo(t);
  void* val = nullptr;
  int flag = 0;
  if (PMPI_Type_get_attr(t, g->type_keyval, &val, &flag) == MPI_SUCCESS && flag)
    return *static_cast<TypeInfo*>(val);
  TypeInfo info = ComputeTypeInfo(t);
  if (info.valid) PMPI_Type_set_attr(t, g->type_keyval, new TypeInfo(info));
  return info;
}

// Elements of `bytes` of a signature, as libinc counts them.
uint64_t Elements(const TypeInfo& t, uint64_t bytes) {
  return bytes / ElemSize(t.elem);
}

// Copies `count` items of datatype `t` at `buf` to (pack) or from (unpack)
// `run`, their count x size bytes in signature order. MPI_Pack in a
// homogeneous job writes exactly those bytes (checked at MPI_Init); its
// sizes are ints, so at most 2 GiB of whole items per call.
Status CopyPacked(bool pack, const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti,
                  uint8_t* run) {
  const uint64_t per = std::max<uint64_t>(1, static_cast<uint64_t>(INT_MAX) / std::max<uint64_t>(ti.size, 1));
  for (uint64_t done = 0; done < static_cast<uint64_t>(count);) {
    const uint64_t n = std::min<uint64_t>(per, static_cast<uint64_t>(count) - done);
    const uint64_t bytes = n * ti.size;
    if (bytes > static_cast<uint64_t>(INT_MAX))
      return Internal("a datatype item of " + std::to_string(ti.size) + " bytes is too large for MPI_Pack");
    auto* item =
        const_cast<uint8_t*>(static_cast<const uint8_t*>(buf)) + static_cast<int64_t>(done) * ti.extent;
    uint8_t* at = run + done * ti.size;
    int pos = 0;
    int rc =
        pack ? PMPI_Pack(item, static_cast<int>(n), t, at, static_cast<int>(bytes), &pos, MPI_COMM_WORLD)
             : PMPI_Unpack(at, static_cast<int>(bytes), &pos, item, static_cast<int>(n), t, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS || static_cast<uint64_t>(pos) != bytes)
      return Internal(std::string(pack ? "MPI_Pack" : "MPI_Unpack") + " of " + std::to_string(n) +
                      " items gave " + std::to_string(pos) + " of " + std::to_string(bytes) + " bytes");
    done += n;
  }
  return Status::Ok();
}

Status Pack(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti, uint8_t* run) {
  return CopyPacked(true, buf, count, t, ti, run);
}

Status Unpack(const uint8_t* run, void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
  return CopyPacked(false, buf, count, t, ti, const_cast<uint8_t*>(run));
}

// The contiguous bytes of `count` items at `buf`: the buffer itself when
// the layout is contiguous, else a packed copy.
class Staged {
 public:
  Status Load(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
    if (ti.contiguous) {
      data_ = static_cast<const uint8_t*>(buf);
      return Status::Ok();
    }
    copy_.resize(static_cast<size_t>(count) * ti.size);
    data_ = copy_.data();
    return Pack(buf, count, t, ti, copy_.data());
  }
  const uint8_t* data() const { return data_; }
  // Writable only when packed (a copy).
  uint8_t* copy() { return copy_.data(); }

 private:
  const uint8_t* data_ = nullptr;
  std::vector<uint8_t> copy_;
};

OpKind ClassifyOp(MPI_Op op) {
  if (op == MPI_SUM) return OpKind::kSum;
  if (op == MPI_MIN) return OpKind::kMin;
  if (op == MPI_MAX) return OpKind::kMax;
  if (op == MPI_OP_NULL) return OpKind::kNone;
  const MPI_Op others[] = {MPI_PROD, MPI_LAND,   MPI_BAND,   MPI_LOR,     MPI_BOR,  MPI_LXOR,
                           MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
  for (MPI_Op o : others)
    if (o == op) return OpKind::kOtherPredefined;
  return OpKind::kUser;
}

void LogFallback(Call call, Reason reason, MPI_Comm comm, uint64_t bytes) {
  LogLevel level = g->cfg.fallback_log_level;
  {
    std::lock_guard<std::mutex> l(g->log_mu);
    bool first = g->logged.insert({call, reason}).second;
    if (!first && !g->cfg.fallback_log_all) level = LogLevel::kDebug;
  }
  if (level < g->cfg.log_level) return;
  std::string where = comm == MPI_COMM_WORLD ? "world" : "derived";
  std::string detail;
  if ((reason == Reason::kNoGroup || reason == Reason::kBadConfig) && !g->group_detail.empty())
    detail = " detail=\"" + g->group_detail + "\"";
  LogLine(level, std::string("fallback reason=") + ReasonName(reason) + " call=" + CallName(call) + " rank=" +
                     std::to_string(g->rank) + " comm=" + where + " bytes=" + std::to_string(bytes) + detail);
}

bool IsSwitchUnsupported(const Status& s) {
  // libinc checks the tree's offer before sending anything (FAILED_PRECONDITION
  // "tree N does not offer/compute ..."), identically on every rank.
  return s.code() == Code::kFailedPrecondition && s.message().find(" does not ") != std::string::npos;
}

// Runs one intercepted call: offload (a libinc call) or fallback (PMPI_*).
// `packed`: this rank's layout goes through MPI_Pack/MPI_Unpack when offloaded.
template <typename Offload, typename Fallback>
int Dispatch(MPI_Comm comm, const Request& q, bool packed, Offload&& offload, Fallback&& fallback) {
  auto t0 = Clock::now();
  Decision d = Decide(g->cfg, q);
  if (d.offload) {
    Status s;
    bool have_group;
    {
      std::lock_guard<std::mutex> l(g->inc_mu);
      have_group = g->inc && g->group_reason == Reason::kNone;  // else: another thread saw a failure
      if (have_group) s = offload(d);
    }
    if (!have_group) {
      d.reason = Reason::kGroupFailed;
    } else if (s.ok()) {
      g->stats.Record(q.call, Reason::kNone, q.bytes,
                      std::chrono::duration<double>(Clock::now() - t0).count(), packed);
      return MPI_SUCCESS;
    } else if (IsSwitchUnsupported(s)) {
      d.reason = Reason::kSwitchUnsupported;
    } else {
      {
        std::lock_guard<std::mutex> l(g->inc_mu);
        g->group_reason = Reason::kGroupFailed;
        g->group_detail = s.ToString();
      }
      LogLine(LogLevel::kError, std::string("offloaded ") + CallName(q.call) + " failed on rank " +
                                    std::to_string(g->rank) + ": " + s.ToString() +
                                    " (INC is off for the rest of the job; raising MPI_ERR_OTHER)");
      PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
      return MPI_ERR_OTHER;
    }
  }
  LogFallback(q.call, d.reason, comm, q.bytes);
  int rc = fallback();
  g->stats.Record(q.call, d.reason, q.bytes, std::chrono::duration<double>(Clock::now() - t0).count());
  return rc;
}

int CommRank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

int CommSize(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}

uint32_t IncRoot(const CommState* st, int root) {
  return st && st->permuted ? static_cast<uint32_t>(st->to_world[root]) : static_cast<uint32_t>(root);
}

// Broadcast of any byte count: libinc's types are at least two bytes wide,
// so an odd count goes through a padded copy.
Status BroadcastBytes(void* buf, uint64_t bytes, uint32_t root, bool is_root) {
  if (bytes % 2 == 0) return g->inc->Broadcast(buf, bytes / 2, client::DataType::kFloat16, root);
  std::vector<uint8_t> tmp(bytes + 1, 0);
  if (is_root) std::memcpy(tmp.data(), buf, bytes);
  INC_RETURN_IF_ERROR(g->inc->Broadcast(tmp.data(), tmp.size() / 2, client::DataType::kFloat16, root));
  std::memcpy(buf, tmp.data(), bytes);
  return Status::Ok();
}

// MPI_Allgather of equal blocks of `block` bytes from `send` into `out`,
// block w from world rank w.
Status AllGatherBytes(const void* send, uint8_t* out, uint64_t block) {
  if (block % 2 == 0) return g->inc->AllGather(send, out, block / 2, client::DataType::kFloat16);
  const uint32_t n = g->inc->world_size();
  const uint32_t mine = static_cast<uint32_t>(g->rank);
  for (uint32_t w = 0; w < n; w++) {
    uint8_t* dst = out + w * block;
    if (w == mine) std::memcpy(dst, send, block);
    INC_RETURN_IF_ERROR(BroadcastBytes(dst, block, w, w == mine));
  }
  return Status::Ok();
}

std::string MakeJobId() {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* ns = std::getenv("PMIX_NAMESPACE");
  std::string id = std::string("mpi-") + (ns && *ns ? ns : host) + "-" + std::to_string(getpid()) + "-" +
                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count() %
                                  100000000);
  return id.substr(0, 100);
}

// Ranks whose layouts differ exchange packed bytes with ranks that pass
// their buffers as they are: that is right only if MPI_Pack writes exactly
// the data bytes in signature order.
bool PackIsRaw() {
  struct {
    double d;
    int i;
  } pair[2] = {{1.5, 7}, {-2.25, 9}};
  uint8_t want[24], got[24] = {0};
  for (int k = 0; k < 2; k++) {
    std::memcpy(want + 12 * k, &pair[k].d, 8);
    std::memcpy(want + 12 * k + 8, &pair[k].i, 4);
  }
  int size = 0, pos = 0;
  return PMPI_Pack_size(2, MPI_DOUBLE_INT, MPI_COMM_WORLD, &size) == MPI_SUCCESS && size == 24 &&
         PMPI_Pack(pair, 2, MPI_DOUBLE_INT, got, sizeof(got), &pos, MPI_COMM_WORLD) == MPI_SUCCESS &&
         pos == 24 && std::memcmp(want, got, sizeof(want)) == 0;
}

void FormGroup() {
  const Config& c = g->cfg;
  // Job id: INCMPI_JOB_ID, else the one the job credential names (the
  // launcher got it for that id), else rank 0's, broadcast.
  const char* credential = std::getenv(kJobCredentialEnv);
  auto credential_job = credential && *credential ? JobOfCredential(credential) : Expected<std::string>("");
  if (c.job_id.empty() && credential_job.ok() && !credential_job->empty()) {
    g->job_id = *credential_job;
  } else if (c.job_id.empty()) {
    char buf[128] = {0};
    if (g->rank == 0) std::snprintf(buf, sizeof(buf), "%s", MakeJobId().c_str());
    PMPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
    g->job_id = buf;
  } else {
    g->job_id = c.job_id;
  }
  int ok = 1;
  std::string why;
  if (!PackIsRaw()) {
    ok = 0;
    why =
        "MPI_Pack does not write the bare data bytes (a heterogeneous job?), so non-contiguous datatypes "
        "could not be packed around an offloaded collective";
  } else if (c.am.empty()) {
    ok = 0;
    why = "INCMPI_AM is not set";
  } else {
    client::CommunicatorOptions o;
    o.am_address = c.am;
    o.job_id = g->job_id;
    o.rank = static_cast<uint32_t>(g->rank);
    o.world_size = static_cast<uint32_t>(g->world);
    o.iface = c.iface.empty() ? DefaultRouteInterface() : c.iface;
    o.transport = c.transport;
    o.join_timeout_ms = c.join_timeout_ms;
    // MPI_Finalize runs a PMPI_Barrier before leaving: every rank then holds
    // every result, so nothing needs the tree for retransmissions.
    o.leave_linger_ms = 0;
    // While this rank waits on the switch, another may still wait inside
    // MPI for data this rank's MPI has only queued (an eager send of an
    // earlier fallback or of the program's own point-to-point): with no
    // progress thread, it moves only while this rank is inside MPI. Probe
    // a private communicator, which runs MPI's progress engine.
    PMPI_Comm_dup(MPI_COMM_SELF, &g->progress_comm);
    o.on_wait = [] {
      int flag = 0;
      PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g->progress_comm, &flag, MPI_STATUS_IGNORE);
    };
    if (!c.reduce_mode.empty()) o.reduce_mode = c.reduce_mode;
    if (!c.broadcast_mode.empty()) o.broadcast_mode = c.broadcast_mode;
    auto made = client::Communicator::Create(o);
    if (made.ok()) {
      g->inc = std::move(*made);
    } else {
      ok = 0;
      why = made.status().ToString();
    }
  }
  // Every rank or none: a rank without the group would take PMPI paths
  // while the others wait on the switch.
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) {
    g->tree_id = static_cast<int>(g->inc->GetStatus().assignment.tree_id);
    Log(LogLevel::kInfo, "rank " + std::to_string(g->rank) + ": MPI_COMM_WORLD on INC tree " +
                             std::to_string(g->tree_id) + " (job " + g->job_id + ")");
    return;
  }
  g->inc.reset();
  g->group_reason = Reason::kNoGroup;
  g->group_detail = ok ? "another rank could not join the group" : why;
  LogLine(LogLevel::kWarn, "no INC group for MPI_COMM_WORLD on rank " + std::to_string(g->rank) + ": " +
                               g->group_detail + "; every collective falls back to MPI (reason=no_group)");
}

void Setup(int thread_level) {
  if (g) return;
  g = new Global;
  g->thread_level = thread_level;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g->world);
  SetLogComponent("incmpi");
  auto cfg = ParseConfig([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
  if (cfg.ok()) {
    g->cfg = *cfg;
  } else {
    g->group_reason = Reason::kBadConfig;
    g->group_detail = cfg.status().message();
  }
  SetLogLevel(g->cfg.log_level);
  if (!cfg.ok())
    LogLine(LogLevel::kError,
            "bad configuration: " + g->group_detail + "; every collective falls back to MPI");
  for (const std::string& n : UnknownEnvNames(environ))
    Log(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCMPI_* names)");
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteCommState, &g->keyval, nullptr);
  PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, DeleteTypeInfo, &g->type_keyval, nullptr);
  if (g->group_reason != Reason::kNone) return;
  if (!g->cfg.enable) {
    g->group_reason = Reason::kDisabled;
    return;
  }
  if (g->world == 1) {
    g->group_reason = Reason::kSingleRank;
    return;
  }
  FormGroup();
}

void Teardown() {
  if (!g || g->finalized) return;
  g->finalized = true;
  std::string libinc_json;
  if (g->inc) {
    PMPI_Barrier(MPI_COMM_WORLD);
    libinc_json = g->inc->GetStatus().ToJson();
    g->inc.reset();  // LeaveGroup: the AM dismantles the tree
  }
  if (g->progress_comm != MPI_COMM_NULL) PMPI_Comm_free(&g->progress_comm);
  Stats::Header h;
  h.rank = g->rank;
  h.world = g->world;
  h.enabled = g->cfg.enable;
  h.group = g->group_reason == Reason::kNone ? "ok" : ReasonName(g->group_reason);
  h.group_detail = g->group_detail;
  h.job_id = g->job_id;
  h.tree_id = g->tree_id;
  h.libinc_status_json = libinc_json;
  if (g->cfg.summary == SummaryMode::kAll || (g->cfg.summary == SummaryMode::kRank0 && g->rank == 0)) {
    std::string text = g->stats.ToText(h);
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  std::string path = SummaryPathForRank(g->cfg.summary_json, g->rank);
  if (!path.empty()) {
    std::ofstream f(path, std::ios::trunc);
    f << g->stats.ToJson(h) << "\n";
    if (!f) LogLine(LogLevel::kError, "cannot write INCMPI_SUMMARY_JSON file " + path);
  }
}

}  // namespace
}  // namespace inc::mpi

using namespace inc::mpi;  // NOLINT: the C entry points below
using inc::Status;
using inc::client::DataType;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return rc;
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  Setup(level);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  Setup(*provided);
  return rc;
}

int MPI_Finalize(void) {
  Teardown();
  return PMPI_Finalize();
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const CommState* st;
  Request q;
  q.call = Call::kAllreduce;
  q.comm_reason = CommReason(comm, &st);
  TypeInfo t = ClassifyType(datatype);
  q.valid = t.valid && count >= 0 && (count == 0 || recvbuf);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
        if (t.contiguous) return g->inc->AllReduce(send, recvbuf, Elements(t, q.bytes), d.dtype, d.op);
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(send, count, datatype, t));
        INC_RETURN_IF_ERROR(g->inc->AllReduce(in.copy(), in.copy(), Elements(t, q.bytes), d.dtype, d.op));
        return Unpack(in.copy(), recvbuf, count, datatype, t);
      },
      [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  const CommState* st;
  Request q;
  q.call = Call::kReduce;
  q.comm_reason = CommReason(comm, &st);
  TypeInfo t = ClassifyType(datatype);
  bool valid_comm = q.comm_reason != Reason::kInvalidArgs;
  int me = valid_comm ? CommRank(comm) : -1;
  int size = valid_comm ? CommSize(comm) : 0;
  bool is_root = me == root;
  q.valid = t.valid && count >= 0 && root >= 0 && root < size && (count == 0 || !is_root || recvbuf) &&
            (is_root || sendbuf != MPI_IN_PLACE);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
        const uint64_t n = Elements(t, q.bytes);
        if (t.contiguous)
          return g->inc->Reduce(send, is_root ? recvbuf : nullptr, n, d.dtype, d.op, IncRoot(st, root));
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(send, count, datatype, t));
        INC_RETURN_IF_ERROR(
            g->inc->Reduce(in.copy(), is_root ? in.copy() : nullptr, n, d.dtype, d.op, IncRoot(st, root)));
        return is_root ? Unpack(in.copy(), recvbuf, count, datatype, t) : Status::Ok();
      },
      [&] { return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm); });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Bcast(buffer, count, datatype, root, comm);
  const CommState* st;
  Request q;
  q.call = Call::kBcast;
  q.comm_reason = CommReason(comm, &st);
  TypeInfo t = ClassifyType(datatype);
  bool valid_comm = q.comm_reason != Reason::kInvalidArgs;
  int me = valid_comm ? CommRank(comm) : -1;
  int size = valid_comm ? CommSize(comm) : 0;
  q.valid = t.valid && count >= 0 && root >= 0 && root < size;
  q.elem = Elem::kBytes;
  q.bytes = count > 0 ? static_cast<uint64_t>(count) * t.size : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision&) -> Status {
        const uint32_t inc_root = IncRoot(st, root);
        if (t.contiguous) return BroadcastBytes(buffer, q.bytes, inc_root, me == root);
        std::vector<uint8_t> run(q.bytes);
        if (me == root) INC_RETURN_IF_ERROR(Pack(buffer, count, datatype, t, run.data()));
        INC_RETURN_IF_ERROR(BroadcastBytes(run.data(), q.bytes, inc_root, me == root));
        return me == root ? Status::Ok() : Unpack(run.data(), buffer, count, datatype, t);
      },
      [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); });
}

int MPI_Barrier(MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Barrier(comm);
  const CommState* st;
  Request q;
  q.call = Call::kBarrier;
  q.comm_reason = CommReason(comm, &st);
  return Dispatch(
      comm, q, false, [&](const Decision&) { return g->inc->Barrier(); }, [&] { return PMPI_Barrier(comm); });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  const CommState* st;
  Request q;
  q.call = Call::kReduceScatterBlock;
  q.comm_reason = CommReason(comm, &st);
  TypeInfo t = ClassifyType(datatype);
  int size = q.comm_reason != Reason::kInvalidArgs ? CommSize(comm) : 0;
  q.valid = t.valid && recvcount >= 0 && (recvcount == 0 || recvbuf);
  q.elem = t.elem;
  q.op = ClassifyOp(op);
  q.bytes = recvcount > 0 ? static_cast<uint64_t>(recvcount) * t.size * static_cast<uint64_t>(size) : 0;
  return Dispatch(
      comm, q, !t.contiguous,
      [&](const Decision& d) -> Status {
        const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
        const uint64_t blk = q.bytes / static_cast<uint64_t>(size);
        const uint64_t n = Elements(t, blk);
        // libinc reads blocks in world rank order and writes block `rank`
        // while reading: the input must be a copy when it is in recvbuf or
        // its blocks are in another order.
        Staged in;
        INC_RETURN_IF_ERROR(in.Load(src, static_cast<int64_t>(recvcount) * size, datatype, t));
        std::vector<uint8_t> copy;
        const uint8_t* input = in.data();
        if (st && st->permuted) {
          // comm block c goes where its owner's world rank is.
          copy.resize(q.bytes);
          for (int c = 0; c < size; c++)
            std::memcpy(copy.data() + st->to_world[c] * blk, input + c * blk, blk);
          input = copy.data();
        } else if (t.contiguous && sendbuf == MPI_IN_PLACE) {
          copy.assign(input, input + q.bytes);
          input = copy.data();
        }
        if (t.contiguous) return g->inc->ReduceScatter(input, recvbuf, n, d.dtype, d.op);
        std::vector<uint8_t> out(blk);
        INC_RETURN_IF_ERROR(g->inc->ReduceScatter(input, out.data(), n, d.dtype, d.op));
        return Unpack(out.data(), recvbuf, recvcount, datatype, t);
      },
      [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm); });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!g || g->finalized)
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  const CommState* st;
  Request q;
  q.call = Call::kAllgather;
  q.comm_reason = CommReason(comm, &st);
  TypeInfo rt = ClassifyType(recvtype);
  bool in_place = sendbuf == MPI_IN_PLACE;
  TypeInfo stt = in_place ? rt : ClassifyType(sendtype);
  bool valid_comm = q.comm_reason != Reason::kInvalidArgs;
  int me = valid_comm ? CommRank(comm) : 0;
  int size = valid_comm ? CommSize(comm) : 0;
  uint64_t block = recvcount > 0 ? static_cast<uint64_t>(recvcount) * rt.size : 0;
  uint64_t sblock = in_place ? block : (sendcount > 0 ? static_cast<uint64_t>(sendcount) * stt.size : 0);
  q.valid = rt.valid && stt.valid && recvcount >= 0 && (in_place || sendcount >= 0) && block == sblock &&
            (block == 0 || recvbuf);
  q.elem = Elem::kBytes;
  q.bytes = block;
  return Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous,
      [&](const Decision&) -> Status {
        auto* recv = static_cast<uint8_t*>(recvbuf);
        // In place, this rank's block is already in recvbuf; it is read
        // before anything is written there.
        Staged send;
        std::vector<uint8_t> own;
        if (!in_place) {
          INC_RETURN_IF_ERROR(send.Load(sendbuf, sendcount, sendtype, stt));
        } else if (rt.contiguous) {
          own.assign(recv + me * block, recv + (me + 1) * block);
        } else {
          own.resize(block);
          INC_RETURN_IF_ERROR(Pack(recv + static_cast<int64_t>(me) * recvcount * rt.extent, recvcount,
                                   recvtype, rt, own.data()));
        }
        const void* mine = in_place ? own.data() : send.data();
        // libinc's blocks are in world rank order: a permuted communicator
        // gathers into a copy and reorders; a non-contiguous receive type
        // gathers into a copy and unpacks.
        const bool permuted = st && st->permuted;
        const uint64_t total = block * static_cast<uint64_t>(size);
        std::vector<uint8_t> gathered(permuted || !rt.contiguous ? total : 0);
        INC_RETURN_IF_ERROR(AllGatherBytes(mine, gathered.empty() ? recv : gathered.data(), block));
        std::vector<uint8_t> ordered(permuted && !rt.contiguous ? total : 0);
        const uint8_t* run = gathered.data();
        if (permuted) {
          uint8_t* to = rt.contiguous ? recv : ordered.data();
          for (int c = 0; c < size; c++)
            std::memcpy(to + c * block, gathered.data() + st->to_world[c] * block, block);
          run = to;
        }
        if (rt.contiguous) return Status::Ok();
        return Unpack(run, recvbuf, static_cast<int64_t>(recvcount) * size, recvtype, rt);
      },
      [&] { return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); });
}

}  // extern "C"
