// SPDX-License-Identifier: Apache-2.0
// The MPI side of the datatype rules in dtype.h, shared by libincmpi
// (interpose.cc) and coll/incin (userspace/ompi/coll.cc): what a datatype
// and an op are as the decision table sees them, packing of non-contiguous
// layouts around an offload, and the communicator facts both need. Calls
// go through PMPI_* so that libincmpi's own MPI_* definitions are not
// re-entered. Kept out of incmpi_core, which must build and be tested
// without MPI.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "mpi/decision.h"
#include "mpi/dtype.h"

namespace inc::mpi {

// A datatype: the element type of its signature (the only part that enters
// a decision) and its local layout (whether this rank packs).
struct TypeInfo {
  bool valid = false;
  bool contiguous = false;  // count items are count x size bytes at the buffer
  Elem elem = Elem::kBytes;
  uint64_t size = 0;   // bytes of data per item
  int64_t extent = 0;  // bytes from one item to the next
  // A null buffer (MPI_BOTTOM) is legal with this datatype: a derived type
  // whose data starts at a nonzero true lower bound (absolute addresses),
  // the rule Open MPI's own argument check applies. Such a type is never
  // contiguous, so an offload packs it from MPI_BOTTOM.
  bool bottom_ok = false;
};

// Whether MPI_Type_get_envelope/_contents may be called on a datatype.
// coll/incin passes one: Open MPI's own algorithms build datatypes without
// a constructor record (coll/inter's indexed type in MPI_Allgatherv on an
// intercommunicator, coll/base's contiguous type in a linear allgather),
// and decoding one raises MPI_ERR_INTERN through MPI_COMM_WORLD's error
// handler, which ends the job. Null: every datatype may be decoded (an
// interposer sees only the program's datatypes, which always have one).
using Decodable = bool (*)(MPI_Datatype t);

// Decodes `t` through MPI_Type_get_envelope/_contents (not cached: callers
// that see the same derived type often cache the result themselves). A
// part that `decodable` refuses counts as opaque bytes (elem kBytes: never
// reduced on the switch, but broadcast and gathered) in a layout that is
// packed, which MPI_Pack does without the constructor record.
TypeInfo DescribeType(MPI_Datatype t, Decodable decodable = nullptr);

// A predefined datatype (MPI_COMBINER_NAMED).
bool IsNamedType(MPI_Datatype t);

// Elements of `bytes` of a signature, as libinc counts them.
uint64_t Elements(const TypeInfo& t, uint64_t bytes);

// Whether every rank can pack its layout around an offload: MPI_Pack counts
// bytes in int, so one item of a non-contiguous layout may hold at most
// kMaxPackItem bytes. This depends on the rank's own datatype, not on the
// signature, so callers agree on it across ranks before offloading a call
// that could exceed it (only calls of more than kMaxPackItem bytes can).
constexpr uint64_t kMaxPackItem = 0x7fffffff;
bool PackableItem(const TypeInfo& t);

// Copies `count` items of datatype `t` at `buf` to (Pack) or from (Unpack)
// `run`, their count x size bytes in signature order. MPI_Pack in a
// homogeneous job writes exactly those bytes (PackIsRaw); its sizes are
// ints, so the items go in chunks of at most 2 GiB.
Status Pack(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti, uint8_t* run);
Status Unpack(const uint8_t* run, void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti);

// Ranks whose layouts differ exchange packed bytes with ranks that pass
// their buffers as they are: that is right only if MPI_Pack writes exactly
// the data bytes in signature order (a homogeneous job).
bool PackIsRaw();

// The contiguous bytes of `count` items at `buf`: the buffer itself when
// the layout is contiguous, else a packed copy.
class Staged {
 public:
  Status Load(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti);
  const uint8_t* data() const { return data_; }
  // Writable only when packed (a copy).
  uint8_t* copy() { return copy_.data(); }

 private:
  const uint8_t* data_ = nullptr;
  std::vector<uint8_t> copy_;
};

OpKind ClassifyOp(MPI_Op op);

int CommRank(MPI_Comm comm);
int CommSize(MPI_Comm comm);

// comm rank -> MPI_COMM_WORLD rank, for a communicator whose group is the
// world's in another order (libinc addresses ranks and blocks by world rank).
std::vector<int> WorldRanks(MPI_Comm comm);

// How the ranks of `comm` sit on hosts (MPI_COMM_TYPE_SHARED): libinc runs
// several ranks per host as one tree member per host and numbers the ranks
// in blocks, host * local_size + local_rank, so the INC group's rank order
// is the world's only when MPI placed the ranks in blocks too (an Open MPI
// job mapped --map-by node is round robin). Collective over `comm`.
struct HostLayout {
  int hosts = 1;
  int local_size = 1;  // ranks on this host
  int local_rank = 0;
  int min_local = 1, max_local = 1;  // over all hosts: libinc needs them equal
  uint32_t inc_rank = 0;             // this rank in the INC group
  std::vector<int> inc_ranks;        // comm rank -> INC group rank; empty when equal
  bool uniform() const { return min_local == max_local; }
  // Why no group can be formed when !uniform(), for the fallback's detail.
  std::string NotUniformReason() const;
  // "4 hosts x 2 ranks, INC rank 2", for the log line of a formed group.
  std::string Summary() const;
};
HostLayout DescribeHosts(MPI_Comm comm);

}  // namespace inc::mpi
