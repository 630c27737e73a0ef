// SPDX-License-Identifier: Apache-2.0
// What libincmpi needs to know about an MPI datatype, free of MPI so it can
// be tested without one:
//  - the element type of its type signature (SignatureElem): the one thing
//    about a datatype that every rank of a collective agrees on. Ranks may
//    pass different datatypes with one signature (4 x MPI_INT on the root,
//    one vector of 4 ints elsewhere), so a decision must never depend on
//    anything else about the datatype;
//  - whether its local layout is one contiguous run of its bytes in
//    signature order (IsContiguous), which decides only whether this rank
//    packs and unpacks around an offloaded collective.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mpi/decision.h"

namespace inc::mpi {

// Bytes of one element as the switch computes it (kBytes, kMixed: 1).
uint64_t ElemSize(Elem e);

// The element type of a signature made of part `a` followed by part `b`;
// nullopt is a part without elements.
std::optional<Elem> CombineElems(std::optional<Elem> a, std::optional<Elem> b);

// One level of a datatype's constructor tree, as MPI_Type_get_envelope and
// MPI_Type_get_contents describe it.
template <typename Handle>
struct TypeNode {
  bool named = false;         // a predefined type (a leaf)
  Elem elem = Elem::kBytes;   // named: as the switch sees it (kBytes: not computable)
  uint64_t size = 0;          // named: bytes of data
  std::vector<Handle> parts;  // derived: the inner datatypes that contribute elements
};

// The element type of the signature of datatype `t`: the basic elements of
// every part that contributes any (struct blocks of length 0 and parts of
// size 0 contribute none, so such a type has the signature of the rest).
// Api::Decode(Handle) gives a TypeNode; Api::Release(Handle) is called for
// every part after use. nullopt: the datatype has no elements.
template <typename Api, typename Handle>
std::optional<Elem> SignatureElem(Api& api, Handle t) {
  TypeNode<Handle> node = api.Decode(t);
  if (node.named) return node.size ? std::optional<Elem>(node.elem) : std::nullopt;
  std::optional<Elem> acc;
  for (Handle part : node.parts) acc = CombineElems(acc, SignatureElem(api, part));
  for (Handle part : node.parts) api.Release(part);
  return acc;
}

// A datatype's bounds and whether its constructors keep its elements in
// signature order (a predefined type, or MPI_Type_dup/MPI_Type_contiguous
// of one; vector, indexed, struct, resized, ... may reorder or leave gaps).
struct Layout {
  bool ordered = false;
  int64_t size = 0;
  int64_t lb = 0;
  int64_t extent = 0;
  int64_t true_lb = 0;
  int64_t true_extent = 0;
};

// `count` items of the datatype are its count x size bytes back to back in
// signature order, so the buffer itself is the packed data. Pair types
// (MPI_DOUBLE_INT: 12 bytes of data, extent 16) are not.
bool IsContiguous(const Layout& l);

}  // namespace inc::mpi
