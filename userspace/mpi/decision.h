// SPDX-License-Identifier: Apache-2.0
// The fallback decision table of libincmpi, free of MPI so it can be tested
// without a running MPI: given what a call asks for (collective, the element
// type of its type signature, operation, sizes) and the communicator's
// state, either the libinc data type/op to offload with, or the reason it
// runs on MPI's own algorithm (PMPI_*). Every input is the same on every
// rank of a correct MPI program, so every rank takes the same path. A
// datatype's local layout is deliberately not an input: ranks may pass
// different datatypes with one type signature (dtype.h).
#pragma once

#include <array>
#include <cstdint>

#include "client/communicator.h"
#include "mpi/config.h"

namespace inc::mpi {

enum class Call { kAllreduce, kReduce, kBcast, kBarrier, kReduceScatterBlock, kAllgather, kCount };

// The element type of a type signature as the switch sees it. kBytes: a
// type it only copies (Bcast/Allgather), never computes on (MPI_CHAR,
// MPI_SHORT, pair types, ...); kMixed: a derived datatype whose elements
// are of more than one basic type (a struct of an int and a double).
enum class Elem { kInt32, kUInt32, kInt64, kUInt64, kFloat32, kFloat64, kBytes, kMixed };

// The MPI op as incin sees it: one of libinc's (a row of the wire's op
// table, bpf/include/inc_ops.h: kSum, kMin, ..., kBxor), another predefined
// op it does not compute, or a user op.
enum class OpKind {
  kNone,
#define INC_MPI_OP_KIND(name, camel, value, text, int_only) k##camel,
  INC_OP_TABLE(INC_MPI_OP_KIND)
#undef INC_MPI_OP_KIND
      kOtherPredefined,
  kUser
};

// Why a call ran on MPI's algorithm. Names (ReasonName) appear in logs,
// the summary and its JSON; docs/mpi.md explains each.
enum class Reason {
  kNone,
  kDisabled,               // INCIN_MPI_ENABLE=0
  kBadConfig,              // an INCIN_* setting did not parse
  kNoGroup,                // the INC group for MPI_COMM_WORLD could not be formed
  kGroupFailed,            // an offloaded collective failed: that call and every later one that
                           // would be offloaded is an MPI error (never a fallback; docs/mpi.md "Errors")
  kIntercomm,              // intercommunicator
  kSingleRank,             // communicator of one rank
  kSubcomm,                // not the group of MPI_COMM_WORLD (split into subsets)
  kThreadMultiple,         // a derived communicator under MPI_THREAD_MULTIPLE
  kInvalidArgs,            // null handles, mismatched sizes: MPI reports the error
  kEmpty,                  // nothing to move (count 0)
  kNoncontiguousDtype,     // reduction on a derived datatype that is no run of one basic type even packed
  kUnsupportedDtype,       // reduction on a type the switch does not compute (char, short, pairs...)
  kUserOp,                 // MPI_Op_create
  kUnsupportedOp,          // predefined op other than SUM/MIN/MAX/BAND/BOR/BXOR (PROD, LAND, MINLOC...)
  kUnsupportedOpForDtype,  // MIN/MAX on unsigned types; BAND/BOR/BXOR on floating types (MPI's error)
  kFloatSumDisabled,       // INCIN_MPI_FLOAT_SUM=fallback
  kBelowMinBytes,          // smaller than INCIN_MPI_MIN_BYTES
  kAboveMaxBytes,          // larger than INCIN_MPI_MAX_BYTES
  kSwitchUnsupported,      // the tree's switches do not offer this collective/type/op
  kItemTooLarge,           // a rank's layout has an item MPI_Pack cannot take (> 2 GiB), agreed by all
  kCount
};

const char* ReasonName(Reason r);
const char* CallName(Call c);  // "MPI_Allreduce", ...

struct Request {
  Call call = Call::kAllreduce;
  Reason comm_reason = Reason::kNone;  // the communicator's state (kNone = has an INC group)
  bool valid = true;                   // handles not null, sizes consistent
  Elem elem = Elem::kBytes;            // of the type signature
  OpKind op = OpKind::kNone;           // reductions only
  uint64_t bytes = 0;                  // what one rank contributes (0: nothing to do)
};

struct Decision {
  bool offload = false;
  Reason reason = Reason::kNone;
  // Not offloaded, and INCIN_REQUIRE_OFFLOAD makes that an error (with
  // `reason`) instead of a fallback (RequiredOffloadFails).
  bool fail = false;
  client::DataType dtype = client::DataType::kInt32;  // for libinc (reductions)
  client::ReduceOp op = client::ReduceOp::kSum;
};

Decision Decide(const Config& config, const Request& request);

// Under INCIN_REQUIRE_OFFLOAD (config.require_offload), whether a call that
// would run on MPI's algorithm for `reason` is an MPI error instead: every
// reason but those with nothing to offload (count 0, a communicator of one
// rank) and invalid arguments, whose error MPI itself reports. Every input
// is the same on every rank, so every rank fails alike.
bool RequiredOffloadFails(const Config& config, Reason reason);

}  // namespace inc::mpi
