// SPDX-License-Identifier: Apache-2.0
// libincmpi: an MPI profiling-interface (PMPI) library. Preloaded into (or
// linked with) an unmodified MPI program, it defines MPI_Init/_Init_thread/
// _Finalize and the C bindings of MPI_Allreduce, MPI_Reduce, MPI_Bcast,
// MPI_Barrier, MPI_Reduce_scatter_block and MPI_Allgather. At MPI_Init every
// rank joins MPI_COMM_WORLD's INC group at incamd through libinc; a
// collective then runs in the switches when the decision table (decision.h)
// allows it, otherwise on MPI's own algorithm through PMPI_* with a counted,
// logged reason. See docs/mpi.md.
//
// The runtime (offload or fall back, errors, counters, the group) is
// mpi/runtime.h, shared with coll/incin; this file is the PMPI skin: the
// MPI_* entry points, settings from the environment at MPI_Init,
// communicators classified through MPI attributes, MPI's error handler run
// here (ErrorPolicy::kCallErrhandler) and MPI's progress driven by probing
// a private communicator.
#include <mpi.h>

#include <string>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "mpi/config.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"
#include "mpi/mpi_types.h"
#include "mpi/offload.h"
#include "mpi/runtime.h"

extern char** environ;

namespace inc::mpi {
namespace {

// Structural state of a communicator other than MPI_COMM_WORLD (cached as
// an MPI attribute, so it goes away with MPI_Comm_free).
struct CommState {
  Reason reason = Reason::kNone;  // structural: subcomm, intercomm, ...
  bool permuted = false;          // the world's group, in another order than the INC group's
  std::vector<int> to_world;      // comm rank -> INC group rank (permuted only)
};

// The skin's own state beside the shared runtime.
struct Global {
  Global() : rt(FrontEnd{"MPI", ErrorPolicy::kCallErrhandler}) {}
  Runtime rt;
  int thread_level = MPI_THREAD_SINGLE;
  int keyval = MPI_KEYVAL_INVALID;         // CommState of derived communicators
  int type_keyval = MPI_KEYVAL_INVALID;    // TypeInfo of derived datatypes
  MPI_Comm progress_comm = MPI_COMM_NULL;  // private: probed to drive MPI's progress
  bool finalized = false;
};

Global* g = nullptr;  // set by MPI_Init*, kept until exit

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
  } else if (cmp == MPI_SIMILAR || !g->rt.inc_ranks.empty()) {
    // comm rank -> world rank -> INC group rank.
    st->permuted = true;
    st->to_world = cmp == MPI_SIMILAR ? WorldRanks(comm) : std::vector<int>(g->rt.inc_ranks);
    if (cmp == MPI_SIMILAR && !g->rt.inc_ranks.empty())
      for (int& r : st->to_world) r = g->rt.inc_ranks[static_cast<size_t>(r)];
  }
  return st;
}

// What a communicator allows; *state is null for MPI_COMM_WORLD.
Reason CommReason(MPI_Comm comm, const CommState** state) {
  *state = nullptr;
  if (comm == MPI_COMM_NULL) return Reason::kInvalidArgs;
  // Without a world group nothing is offloaded; say so rather than why a
  // derived communicator could not have used it anyway. A failed group is
  // Dispatch's business: such a call is an error if it would have run on
  // the switch, and runs on MPI otherwise, as on every other rank.
  const Reason group = g->rt.group_reason;
  if (group != Reason::kNone && group != Reason::kGroupFailed) return group;
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

// The INC group ranks of a communicator's ranks (null: they are the
// world's ranks); st is null for MPI_COMM_WORLD.
RankMap ToWorld(const CommState* st) {
  if (st) return st->permuted ? &st->to_world : nullptr;
  return g->rt.inc_ranks.empty() ? nullptr : &g->rt.inc_ranks;
}

int DeleteTypeInfo(MPI_Datatype, int, void* value, void*) {
  delete static_cast<TypeInfo*>(value);
  return MPI_SUCCESS;
}

// Derived datatypes are decoded once and cached as an attribute (freed
// with the type, so a recycled handle is decoded afresh).
TypeInfo ClassifyType(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return TypeInfo();
  if (IsNamedType(t) || g->type_keyval == MPI_KEYVAL_INVALID) return DescribeType(t);
  void* val = nullptr;
  int flag = 0;
  if (PMPI_Type_get_attr(t, g->type_keyval, &val, &flag) == MPI_SUCCESS && flag)
    return *static_cast<TypeInfo*>(val);
  TypeInfo info = DescribeType(t);
  if (info.valid) PMPI_Type_set_attr(t, g->type_keyval, new TypeInfo(info));
  return info;
}

uint64_t Bytes(int count, MPI_Datatype t) {
  MPI_Count size = 0;
  if (count <= 0 || t == MPI_DATATYPE_NULL || PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

// MPI_Allreduce (MPI_MIN) of an int over `comm` on MPI's own algorithm.
bool AllAgree(MPI_Comm comm, int mine) {
  int all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all != 0;
}

void Setup(int thread_level) {
  if (g) return;
  g = new Global;
  Runtime& rt = g->rt;
  g->thread_level = thread_level;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rt.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &rt.world);
  SetLogComponent("incmpi");
  auto cfg = ParseConfig(settings::Env());
  if (cfg.ok()) {
    rt.cfg = *cfg;
  } else {
    rt.cfg_parsed = false;
    rt.group_reason = Reason::kBadConfig;
    rt.group_detail = cfg.status().message();
    rt.cfg.require_offload = settings::RequireOffload();
  }
  SetLogLevel(rt.cfg.log_level);
  if (!cfg.ok()) rt.LogBadConfig();
  for (const std::string& n : UnknownEnvNames(environ))
    rt.Log(LogLevel::kWarn, "unknown variable " + n + " ignored (see docs/mpi.md for the INCIN_* names)");
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteCommState, &g->keyval, nullptr);
  PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, DeleteTypeInfo, &g->type_keyval, nullptr);
  if (rt.world == 1) {
    if (rt.group_reason == Reason::kNone)
      rt.group_reason = rt.cfg.enable ? Reason::kSingleRank : Reason::kDisabled;
    return;
  }
  if (!rt.SettingsAgree(thread_level == MPI_THREAD_MULTIPLE)) return;
  if (rt.group_reason != Reason::kNone) return;
  if (!rt.cfg.enable) {
    rt.group_reason = Reason::kDisabled;
    return;
  }
  JoinHooks hooks;
  // Open MPI's TCP transport has no progress thread; probing a private
  // communicator runs MPI's progress engine (docs/mpi.md "Progress").
  PMPI_Comm_dup(MPI_COMM_SELF, &g->progress_comm);
  hooks.progress = [] {
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g->progress_comm, &flag, MPI_STATUS_IGNORE);
  };
  rt.FormGroup(hooks);
}

void Teardown() {
  if (!g || g->finalized) return;
  g->finalized = true;
  // Every rank then holds every result, so nothing needs the tree for
  // retransmissions when this rank leaves.
  if (g->rt.inc) PMPI_Barrier(MPI_COMM_WORLD);
  const std::string libinc_json = g->rt.Leave();
  if (g->progress_comm != MPI_COMM_NULL) PMPI_Comm_free(&g->progress_comm);
  g->rt.WriteSummary(libinc_json);
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
  auto fallback = [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return g->rt.PassOn(Call::kAllreduce, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  Request q = AllreduceRequest(comm_reason, recvbuf, count, t, op);
  return g->rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), [&](int mine) { return AllAgree(comm, mine); },
      [&](const Decision& d) {
        return OffloadAllreduce(*g->rt.inc, d, sendbuf, recvbuf, count, datatype, t, q.bytes);
      },
      fallback);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  auto fallback = [&] { return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return g->rt.PassOn(Call::kReduce, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  int me = CommRank(comm);
  bool is_root = me == root;
  Request q = ReduceRequest(comm_reason, sendbuf, recvbuf, count, t, op, root, me, CommSize(comm));
  return g->rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), [&](int mine) { return AllAgree(comm, mine); },
      [&](const Decision& d) {
        return OffloadReduce(*g->rt.inc, d, sendbuf, recvbuf, count, datatype, t, q.bytes, is_root,
                             WorldRank(ToWorld(st), root));
      },
      fallback);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Bcast(buffer, count, datatype, root, comm);
  auto fallback = [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return g->rt.PassOn(Call::kBcast, comm_reason, comm, Bytes(count, datatype), fallback);
  TypeInfo t = ClassifyType(datatype);
  int me = CommRank(comm);
  Request q = BcastRequest(comm_reason, count, t, root, CommSize(comm));
  return g->rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), [&](int mine) { return AllAgree(comm, mine); },
      [&](const Decision&) {
        return OffloadBcast(*g->rt.inc, buffer, count, datatype, t, q.bytes, me == root,
                            WorldRank(ToWorld(st), root));
      },
      fallback);
}

int MPI_Barrier(MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Barrier(comm);
  auto fallback = [&] { return PMPI_Barrier(comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone) return g->rt.PassOn(Call::kBarrier, comm_reason, comm, 0, fallback);
  Request q;
  q.call = Call::kBarrier;
  return g->rt.Dispatch(
      comm, q, false, true, [](int) { return true; }, [&](const Decision&) { return g->rt.inc->Barrier(); },
      fallback);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm) {
  if (!g || g->finalized) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  auto fallback = [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm); };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone) {
    const int size = comm_reason != Reason::kInvalidArgs ? CommSize(comm) : 0;
    return g->rt.PassOn(Call::kReduceScatterBlock, comm_reason, comm,
                        Bytes(recvcount, datatype) * static_cast<uint64_t>(size), fallback);
  }
  TypeInfo t = ClassifyType(datatype);
  int size = CommSize(comm);
  Request q = ReduceScatterBlockRequest(comm_reason, recvbuf, recvcount, t, op, size);
  return g->rt.Dispatch(
      comm, q, !t.contiguous, PackableItem(t), [&](int mine) { return AllAgree(comm, mine); },
      [&](const Decision& d) {
        return OffloadReduceScatterBlock(*g->rt.inc, d, sendbuf, recvbuf, recvcount, datatype, t, q.bytes,
                                         size, ToWorld(st));
      },
      fallback);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!g || g->finalized)
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  auto fallback = [&] {
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  };
  const CommState* st;
  Reason comm_reason = CommReason(comm, &st);
  if (comm_reason != Reason::kNone)
    return g->rt.PassOn(Call::kAllgather, comm_reason, comm, Bytes(recvcount, recvtype), fallback);
  TypeInfo rt = ClassifyType(recvtype);
  TypeInfo stt = sendbuf == MPI_IN_PLACE ? rt : ClassifyType(sendtype);
  int me = CommRank(comm);
  int size = CommSize(comm);
  Request q = AllgatherRequest(comm_reason, sendbuf, sendcount, stt, recvbuf, recvcount, rt);
  return g->rt.Dispatch(
      comm, q, !rt.contiguous || !stt.contiguous, PackableItem(rt) && PackableItem(stt),
      [&](int mine) { return AllAgree(comm, mine); },
      [&](const Decision&) {
        return OffloadAllgather(*g->rt.inc, sendbuf, sendcount, sendtype, stt, recvbuf, recvcount, recvtype,
                                rt, q.bytes, me, size, g->rt.inc_rank, ToWorld(st));
      },
      fallback);
}

}  // extern "C"
