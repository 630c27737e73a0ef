// SPDX-License-Identifier: Apache-2.0
#include "mpi/mpi_types.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

namespace inc::mpi {
namespace {

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

void FreeDerived(MPI_Datatype t) {
  if (!IsNamedType(t)) PMPI_Type_free(&t);
}

// One level of a datatype for SignatureElem; the inner datatypes that
// MPI_Type_get_contents returns are freed by Release.
struct MpiTypeTree {
  Decodable decodable = nullptr;
  std::vector<MPI_Datatype> unused;  // returned, but contributing no elements

  TypeNode<MPI_Datatype> Decode(MPI_Datatype t) {
    TypeNode<MPI_Datatype> node;
    int ni = 0, na = 0, nd = 0, combiner = 0;
    MPI_Count size = 0;
    PMPI_Type_size_x(t, &size);
    if (decodable && !decodable(t)) {
      // No constructor record: opaque bytes (see Decodable).
      node.named = true;
      node.size = static_cast<uint64_t>(std::max<MPI_Count>(size, 0));
      return node;
    }
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
bool Ordered(MPI_Datatype t, Decodable decodable) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (decodable && !decodable(t)) return false;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
  if (combiner == MPI_COMBINER_NAMED) return true;
  if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 || ni > 1 || na > 0)
    return false;
  int ints[1] = {0};
  MPI_Aint addrs[1];
  MPI_Datatype inner;
  if (PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return false;
  bool ordered = Ordered(inner, decodable);
  FreeDerived(inner);
  return ordered;
}

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

}  // namespace

bool IsNamedType(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  return PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED;
}

TypeInfo DescribeType(MPI_Datatype t, Decodable decodable) {
  TypeInfo info;
  if (t == MPI_DATATYPE_NULL) return info;
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (PMPI_Type_size_x(t, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0 ||
      PMPI_Type_get_extent_x(t, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent_x(t, &true_lb, &true_extent) != MPI_SUCCESS)
    return info;
  MpiTypeTree tree;
  tree.decodable = decodable;
  info.elem = SignatureElem(tree, t).value_or(Elem::kBytes);
  info.size = static_cast<uint64_t>(size);
  info.extent = extent;
  Layout l;
  l.ordered = Ordered(t, decodable);
  l.size = size;
  l.lb = lb;
  l.extent = extent;
  l.true_lb = true_lb;
  l.true_extent = true_extent;
  info.contiguous = IsContiguous(l);
  info.bottom_ok = size == 0 || (true_lb != 0 && !info.contiguous);
  info.valid = true;
  return info;
}

bool PackableItem(const TypeInfo& t) {
  return t.contiguous || t.size <= kMaxPackItem;
}

uint64_t Elements(const TypeInfo& t, uint64_t bytes) {
  return bytes / ElemSize(t.elem);
}

Status Pack(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti, uint8_t* run) {
  return CopyPacked(true, buf, count, t, ti, run);
}

Status Unpack(const uint8_t* run, void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
  return CopyPacked(false, buf, count, t, ti, const_cast<uint8_t*>(run));
}

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

Status Staged::Load(const void* buf, int64_t count, MPI_Datatype t, const TypeInfo& ti) {
  if (ti.contiguous) {
    data_ = static_cast<const uint8_t*>(buf);
    return Status::Ok();
  }
  copy_.resize(static_cast<size_t>(count) * ti.size);
  data_ = copy_.data();
  return Pack(buf, count, t, ti, copy_.data());
}

OpKind ClassifyOp(MPI_Op op) {
  if (op == MPI_SUM) return OpKind::kSum;
  if (op == MPI_MIN) return OpKind::kMin;
  if (op == MPI_MAX) return OpKind::kMax;
  if (op == MPI_BAND) return OpKind::kBand;
  if (op == MPI_BOR) return OpKind::kBor;
  if (op == MPI_BXOR) return OpKind::kBxor;
  if (op == MPI_OP_NULL) return OpKind::kNone;
  const MPI_Op others[] = {MPI_PROD,   MPI_LAND,   MPI_LOR,     MPI_LXOR,
                           MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
  for (MPI_Op o : others)
    if (o == op) return OpKind::kOtherPredefined;
  return OpKind::kUser;
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

std::vector<int> WorldRanks(MPI_Comm comm) {
  const int size = CommSize(comm);
  MPI_Group cg, wg;
  PMPI_Comm_group(comm, &cg);
  PMPI_Comm_group(MPI_COMM_WORLD, &wg);
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; i++) ranks[static_cast<size_t>(i)] = i;
  std::vector<int> to_world(static_cast<size_t>(size));
  PMPI_Group_translate_ranks(cg, size, ranks.data(), wg, to_world.data());
  PMPI_Group_free(&cg);
  PMPI_Group_free(&wg);
  return to_world;
}

std::string HostLayout::NotUniformReason() const {
  return "hosts run " + std::to_string(min_local) + " to " + std::to_string(max_local) +
         " ranks each; the INC group needs the same number of ranks on every host";
}

std::string HostLayout::Summary() const {
  return std::to_string(hosts) + " hosts x " + std::to_string(local_size) + " ranks, INC rank " +
         std::to_string(inc_rank);
}

HostLayout DescribeHosts(MPI_Comm comm) {
  HostLayout h;
  const int rank = CommRank(comm), size = CommSize(comm);
  MPI_Comm node = MPI_COMM_NULL;
  PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  PMPI_Comm_size(node, &h.local_size);
  PMPI_Comm_rank(node, &h.local_rank);
  // Hosts are numbered in the order of their lowest rank: a host's index is
  // the number of hosts whose first rank comes before its own.
  int first = h.local_rank == 0 ? 1 : 0, before = 0;
  PMPI_Exscan(&first, &before, 1, MPI_INT, MPI_SUM, comm);
  if (rank == 0) before = 0;  // MPI_Exscan leaves rank 0's output undefined
  int host = before;
  PMPI_Bcast(&host, 1, MPI_INT, 0, node);
  PMPI_Allreduce(&first, &h.hosts, 1, MPI_INT, MPI_SUM, comm);
  PMPI_Allreduce(&h.local_size, &h.min_local, 1, MPI_INT, MPI_MIN, comm);
  PMPI_Allreduce(&h.local_size, &h.max_local, 1, MPI_INT, MPI_MAX, comm);
  PMPI_Comm_free(&node);
  h.inc_rank = static_cast<uint32_t>(host * h.local_size + h.local_rank);
  int mine = static_cast<int>(h.inc_rank);
  h.inc_ranks.resize(static_cast<size_t>(size));
  PMPI_Allgather(&mine, 1, MPI_INT, h.inc_ranks.data(), 1, MPI_INT, comm);
  bool identity = true;
  for (int r = 0; r < size; r++) identity = identity && h.inc_ranks[static_cast<size_t>(r)] == r;
  if (identity) h.inc_ranks.clear();
  return h;
}

}  // namespace inc::mpi
