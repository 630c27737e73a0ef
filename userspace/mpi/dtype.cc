// SPDX-License-Identifier: Apache-2.0
#include "mpi/dtype.h"

namespace inc::mpi {

uint64_t ElemSize(Elem e) {
  switch (e) {
    case Elem::kInt32:
    case Elem::kUInt32:
    case Elem::kFloat32: return 4;
    case Elem::kInt64:
    case Elem::kUInt64:
    case Elem::kFloat64: return 8;
    case Elem::kBytes:
    case Elem::kMixed: break;
  }
  return 1;
}

std::optional<Elem> CombineElems(std::optional<Elem> a, std::optional<Elem> b) {
  if (!a) return b;
  if (!b || *a == *b) return a;
  return Elem::kMixed;
}

bool IsContiguous(const Layout& l) {
  return l.ordered && l.lb == 0 && l.extent == l.size && l.true_lb == 0 && l.true_extent == l.size;
}

}  // namespace inc::mpi
