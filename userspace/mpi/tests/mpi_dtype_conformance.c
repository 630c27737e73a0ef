// SPDX-License-Identifier: Apache-2.0
/* mpi_dtype_conformance: a plain MPI program (it knows nothing about incin)
 * that runs every collective libincmpi intercepts -- MPI_Bcast,
 * MPI_Allgather, MPI_Allreduce, MPI_Reduce, MPI_Reduce_scatter_block,
 * MPI_Barrier -- over every predefined C datatype (pair types included),
 * derived contiguous/vector/indexed/struct/resized types, datatypes that
 * differ between ranks but share one type signature (the root sends
 * 4 x MPI_INT, the others receive a vector; every rank its own layout),
 * MPI_IN_PLACE, counts 0, 1, 2, odd and large, every root, on
 * MPI_COMM_WORLD, a dup, a rank-reversing split and a split into halves.
 *
 * Each case runs twice on identical buffers: once through MPI_<call> (the
 * interposer, when one is loaded) and once through PMPI_<call>, Open MPI's
 * own implementation. The results are compared element by element in
 * signature order (MPI_Pack), and the bytes between a datatype's elements
 * must be left as they were wherever Open MPI leaves them. Where Open MPI
 * rejects a call (a predefined op on a type it does not reduce), the
 * intercepted call must fail too.
 *
 * With --derived-reductions it also reduces derived datatypes made of one
 * basic type, with layouts that differ between ranks. Open MPI rejects
 * predefined ops on derived datatypes (MPI_ERR_OP), so without an
 * interposer that reduces them this option is an error; the reference is
 * then Open MPI's reduction of the packed basic elements.
 *
 * usage: mpi_dtype_conformance [--derived-reductions] [--quick]
 * Every rank prints what an interposer that offloads whatever the switch
 * can do must have done on it:
 *   dtype_conformance: rank R expect {"MPI_Bcast": [OFFLOADED, PACKED], ...}
 * (OFFLOADED: calls with bytes to move on a communicator that is the world
 * in any order, and reductions the switch computes; PACKED: those of them
 * whose datatype is not contiguous on this rank.) Rank 0 prints
 *   dtype_conformance: ranks N checks C failures F rejected J
 * Exit 1 on any failure on any rank.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_, size_, quick_, derived_reductions_;
static long checks_, failures_, rejected_;

enum call { C_ALLREDUCE, C_REDUCE, C_BCAST, C_BARRIER, C_RSB, C_ALLGATHER, C_NCALLS };
static const char* const kCallNames[C_NCALLS] = {
    "MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Barrier", "MPI_Reduce_scatter_block", "MPI_Allgather"};
static long expect_offloaded_[C_NCALLS], expect_packed_[C_NCALLS];

/* ------------------------------------------------------------ datatypes */

/* How a basic element is filled with a small integer for reductions, and
 * whether the switch computes it (SW_SUM: SUM only, unsigned; SW_ALL:
 * SUM/MIN/MAX). */
enum vk { VK_SINT, VK_UINT, VK_FLOAT, VK_DOUBLE, VK_LDOUBLE, VK_BOOL, VK_CFLOAT, VK_CDOUBLE, VK_CLDOUBLE };
enum sw { SW_NONE, SW_SUM, SW_ALL };

/* A datatype under test: `per` basic elements of kind `vk` (`esize` bytes
 * packed) per item; a pair type has a value of kind `vk` and an int. */
struct dtype {
  const char* name;
  MPI_Datatype t;
  enum vk vk;
  size_t esize;
  int pair;
  enum sw sw;
  MPI_Datatype basic; /* derived types: the basic type of their elements */
  int per;            /* basic elements per item */
  int contiguous;     /* count items are count x size bytes in signature order */
};

static int type_size(MPI_Datatype t) {
  int s = 0;
  MPI_Type_size(t, &s);
  return s;
}

/* Predefined: contiguous iff MPI packs them as they are (extent = size). */
static struct dtype predefined(const char* name, MPI_Datatype t, enum vk vk, enum sw sw, int pair) {
  struct dtype d = {name, t, vk, 0, pair, sw, t, 1, 0};
  MPI_Aint lb, extent;
  MPI_Type_get_extent(t, &lb, &extent);
  d.esize = (size_t)type_size(t);
  d.contiguous = lb == 0 && extent == type_size(t);
  return d;
}

#define NPRE 40
static struct dtype pre_[NPRE];
static int npre_;

static void add_pre(const char* name, MPI_Datatype t, enum vk vk, enum sw sw, int pair) {
  if (t == MPI_DATATYPE_NULL) return; /* optional types */
  pre_[npre_++] = predefined(name, t, vk, sw, pair);
}

static void predefined_types(void) {
  add_pre("MPI_CHAR", MPI_CHAR, VK_SINT, SW_NONE, 0);
  add_pre("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, VK_SINT, SW_NONE, 0);
  add_pre("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, VK_UINT, SW_NONE, 0);
  add_pre("MPI_BYTE", MPI_BYTE, VK_UINT, SW_NONE, 0);
  add_pre("MPI_WCHAR", MPI_WCHAR, VK_UINT, SW_NONE, 0);
  add_pre("MPI_SHORT", MPI_SHORT, VK_SINT, SW_NONE, 0);
  add_pre("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, VK_UINT, SW_NONE, 0);
  add_pre("MPI_INT", MPI_INT, VK_SINT, SW_ALL, 0);
  add_pre("MPI_UNSIGNED", MPI_UNSIGNED, VK_UINT, SW_SUM, 0);
  add_pre("MPI_LONG", MPI_LONG, VK_SINT, SW_ALL, 0);
  add_pre("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, VK_UINT, SW_SUM, 0);
  add_pre("MPI_LONG_LONG_INT", MPI_LONG_LONG_INT, VK_SINT, SW_ALL, 0);
  add_pre("MPI_LONG_LONG", MPI_LONG_LONG, VK_SINT, SW_ALL, 0);
  add_pre("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, VK_UINT, SW_SUM, 0);
  add_pre("MPI_FLOAT", MPI_FLOAT, VK_FLOAT, SW_ALL, 0);
  add_pre("MPI_DOUBLE", MPI_DOUBLE, VK_DOUBLE, SW_ALL, 0);
  add_pre("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, VK_LDOUBLE, SW_NONE, 0);
  add_pre("MPI_INT8_T", MPI_INT8_T, VK_SINT, SW_NONE, 0);
  add_pre("MPI_INT16_T", MPI_INT16_T, VK_SINT, SW_NONE, 0);
  add_pre("MPI_INT32_T", MPI_INT32_T, VK_SINT, SW_ALL, 0);
  add_pre("MPI_INT64_T", MPI_INT64_T, VK_SINT, SW_ALL, 0);
  add_pre("MPI_UINT8_T", MPI_UINT8_T, VK_UINT, SW_NONE, 0);
  add_pre("MPI_UINT16_T", MPI_UINT16_T, VK_UINT, SW_NONE, 0);
  add_pre("MPI_UINT32_T", MPI_UINT32_T, VK_UINT, SW_SUM, 0);
  add_pre("MPI_UINT64_T", MPI_UINT64_T, VK_UINT, SW_SUM, 0);
  add_pre("MPI_AINT", MPI_AINT, VK_SINT, SW_ALL, 0);
  add_pre("MPI_OFFSET", MPI_OFFSET, VK_SINT, SW_NONE, 0); /* Open MPI orders it unsigned */
  add_pre("MPI_COUNT", MPI_COUNT, VK_SINT, SW_ALL, 0);
  add_pre("MPI_C_BOOL", MPI_C_BOOL, VK_BOOL, SW_NONE, 0);
  add_pre("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, VK_CFLOAT, SW_NONE, 0);
  add_pre("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, VK_CDOUBLE, SW_NONE, 0);
  add_pre("MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, VK_CLDOUBLE, SW_NONE, 0);
  add_pre("MPI_PACKED", MPI_PACKED, VK_UINT, SW_NONE, 0);
  add_pre("MPI_FLOAT_INT", MPI_FLOAT_INT, VK_FLOAT, SW_NONE, 1);
  add_pre("MPI_DOUBLE_INT", MPI_DOUBLE_INT, VK_DOUBLE, SW_NONE, 1);
  add_pre("MPI_LONG_INT", MPI_LONG_INT, VK_SINT, SW_NONE, 1);
  add_pre("MPI_2INT", MPI_2INT, VK_SINT, SW_NONE, 1);
  add_pre("MPI_SHORT_INT", MPI_SHORT_INT, VK_SINT, SW_NONE, 1);
  add_pre("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, VK_LDOUBLE, SW_NONE, 1);
}

/* Derived layouts of a base type; each holds `per` base elements per item. */
enum layout { L_PLAIN, L_DUP, L_CONTIG, L_VECTOR, L_INDEXED, L_STRUCT, L_RESIZED, L_NLAYOUTS };
static const char* const kLayoutNames[L_NLAYOUTS] = {"plain",   "dup",    "contiguous", "vector",
                                                     "indexed", "struct", "resized"};

static struct dtype make_layout(enum layout l, const struct dtype* base) {
  struct dtype d = *base;
  MPI_Datatype t = base->t;
  MPI_Aint lb, ext;
  MPI_Type_get_extent(base->t, &lb, &ext);
  switch (l) {
    case L_PLAIN: return d;
    case L_DUP: MPI_Type_dup(base->t, &t); break;
    case L_CONTIG: MPI_Type_contiguous(4, base->t, &t), d.per = 4; break;
    case L_VECTOR: MPI_Type_vector(4, 1, 2, base->t, &t), d.per = 4; break;
    case L_INDEXED: { /* elements 3, 0, 1-2: no gap, but not in order */
      int lens[3] = {1, 1, 2}, displs[3] = {3, 0, 1};
      MPI_Type_indexed(3, lens, displs, base->t, &t);
      d.per = 4;
      break;
    }
    case L_STRUCT: { /* two elements, a gap of one, two elements */
      int lens[2] = {2, 2};
      MPI_Aint displs[2] = {0, 3 * ext};
      MPI_Datatype types[2] = {base->t, base->t};
      MPI_Type_create_struct(2, lens, displs, types, &t);
      d.per = 4;
      break;
    }
    case L_RESIZED: MPI_Type_create_resized(base->t, 0, 2 * ext, &t); break;
    case L_NLAYOUTS: break;
  }
  MPI_Type_commit(&t);
  d.t = t;
  d.name = kLayoutNames[l];
  d.contiguous = base->contiguous && (l == L_PLAIN || l == L_DUP || l == L_CONTIG);
  return d;
}

static void free_layout(struct dtype* d) {
  if (d->t != d->basic) MPI_Type_free(&d->t);
}

/* ------------------------------------------------------------ buffers */

/* `count` items of a datatype: the bytes they span, with the data of item
 * 0 at `p` (a lower bound below 0 is inside the allocation). */
struct tbuf {
  unsigned char* base;
  unsigned char* p;
  size_t span;
};

static struct tbuf tbuf_new(MPI_Datatype t, long count, int fill) {
  MPI_Aint lb, ext, tlb, text;
  MPI_Type_get_extent(t, &lb, &ext);
  MPI_Type_get_true_extent(t, &tlb, &text);
  MPI_Aint lo = tlb < 0 ? tlb : 0, hi = count > 0 ? (count - 1) * ext + tlb + text : 0;
  struct tbuf b;
  b.span = (size_t)(hi - lo) + 16;
  b.base = malloc(b.span);
  memset(b.base, fill, b.span);
  b.p = b.base - lo;
  return b;
}

static struct tbuf tbuf_copy(const struct tbuf* from) {
  struct tbuf b = *from;
  b.base = malloc(b.span);
  memcpy(b.base, from->base, b.span);
  b.p = b.base + (from->p - from->base);
  return b;
}

static void tbuf_free(struct tbuf* b) {
  free(b->base);
}

static size_t packed_size(MPI_Datatype t, long count) {
  return (size_t)type_size(t) * (size_t)count;
}

static unsigned char* pack(const unsigned char* p, MPI_Datatype t, long count) {
  size_t n = packed_size(t, count);
  unsigned char* out = malloc(n + 1);
  int pos = 0;
  MPI_Pack(p, (int)count, t, out, (int)n + 1, &pos, MPI_COMM_SELF);
  return out;
}

static void unpack(const unsigned char* in, unsigned char* p, MPI_Datatype t, long count) {
  int pos = 0;
  MPI_Unpack(in, (int)packed_size(t, count) + 1, &pos, p, (int)count, t, MPI_COMM_SELF);
}

/* Small integers as element values: exact in every type and every order. */
static long long value(int r, size_t i, int salt) {
  return (long long)((r * 7 + (long long)i * 13 + salt * 5) % 41) - 20;
}

static void put_scalar(enum vk k, size_t size, unsigned char* at, long long v) {
  if (k == VK_UINT || k == VK_BOOL) v = k == VK_BOOL ? v & 1 : v + 20;
  switch (k) {
    case VK_SINT:
    case VK_UINT:
    case VK_BOOL: {
      int8_t i8 = (int8_t)v;
      int16_t i16 = (int16_t)v;
      int32_t i32 = (int32_t)v;
      int64_t i64 = (int64_t)v;
      memcpy(at,
             size == 1   ? (void*)&i8
             : size == 2 ? (void*)&i16
             : size == 4 ? (void*)&i32
                         : (void*)&i64,
             size);
      return;
    }
    case VK_FLOAT: {
      float f = (float)v;
      memcpy(at, &f, sizeof(f));
      return;
    }
    case VK_DOUBLE: {
      double f = (double)v;
      memcpy(at, &f, sizeof(f));
      return;
    }
    case VK_LDOUBLE: {
      long double f = (long double)v;
      memset(at, 0, size);
      memcpy(at, &f, sizeof(f) < size ? sizeof(f) : size);
      return;
    }
    case VK_CFLOAT:
    case VK_CDOUBLE:
    case VK_CLDOUBLE: {
      enum vk part = k == VK_CFLOAT ? VK_FLOAT : k == VK_CDOUBLE ? VK_DOUBLE : VK_LDOUBLE;
      put_scalar(part, size / 2, at, v);
      put_scalar(part, size / 2, at + size / 2, v / 2);
      return;
    }
  }
}

/* The packed values of `n` basic elements of d on rank r. */
static unsigned char* values(const struct dtype* d, long n, int r, int salt) {
  size_t es = d->esize;
  unsigned char* out = calloc((size_t)n * es + 1, 1);
  for (long i = 0; i < n; i++) {
    unsigned char* at = out + (size_t)i * es;
    long long v = value(r, (size_t)i, salt);
    if (d->pair) {
      put_scalar(d->vk, es - sizeof(int), at, v);
      int idx = (r * 3 + (int)i) % 5;
      memcpy(at + es - sizeof(int), &idx, sizeof(int));
    } else {
      put_scalar(d->vk, es, at, v);
    }
  }
  return out;
}

/* Byte patterns for the calls that only move data. */
static unsigned char* pattern(size_t n, int r, int salt) {
  unsigned char* out = malloc(n + 1);
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(r * 31 + i * 7 + salt * 3 + 1);
  return out;
}

/* ------------------------------------------------------------ checks */

static void failed(const char* what, const char* detail) {
  failures_++;
  if (failures_ <= 30) fprintf(stderr, "dtype_conformance: rank %d: %s: %s\n", rank_, what, detail);
}

/* `got` and `want` hold `count` items of t, both started from `init`:
 * equal data in signature order, and gap bytes left alone wherever the
 * reference left them. */
static void compare(const char* what, const struct tbuf* got, const struct tbuf* want,
                    const struct tbuf* init, MPI_Datatype t, long count, size_t esize) {
  checks_++;
  size_t n = packed_size(t, count);
  unsigned char* g = pack(got->p, t, count);
  unsigned char* w = pack(want->p, t, count);
  char detail[200];
  for (size_t i = 0; i < n; i++) {
    if (g[i] != w[i]) {
      snprintf(detail, sizeof(detail),
               "element %zu (byte %zu of %zu) differs from Open MPI's: %02x, want %02x", i / esize, i, n,
               g[i], w[i]);
      failed(what, detail);
      break;
    }
  }
  free(g);
  free(w);
  /* Data bytes: 0xff in `mask`. */
  struct tbuf mask = tbuf_new(t, count, 0);
  unsigned char* ones = malloc(n + 1);
  memset(ones, 0xff, n + 1);
  unpack(ones, mask.p, t, count);
  /* Bytes past the compared items (the rest of an in-place input) count as gaps. */
  for (size_t j = 0; j < got->span; j++) {
    unsigned char data = j < mask.span ? mask.base[j] : 0;
    if (data == 0 && want->base[j] == init->base[j] && got->base[j] != init->base[j]) {
      snprintf(detail, sizeof(detail), "wrote byte %zd between the datatype's elements (Open MPI does not)",
               (ptrdiff_t)j - (got->p - got->base));
      failed(what, detail);
      break;
    }
  }
  free(ones);
  tbuf_free(&mask);
}

/* Both calls returned; where Open MPI rejects a call, the intercepted one must fail too. */
static int same_outcome(const char* what, int rc_got, int rc_want) {
  if (rc_want != MPI_SUCCESS) {
    checks_++;
    rejected_++;
    if (rc_got == MPI_SUCCESS) failed(what, "succeeded where Open MPI rejects the call");
    return 0;
  }
  if (rc_got != MPI_SUCCESS) {
    checks_++;
    failed(what, "failed where Open MPI succeeds");
    return 0;
  }
  return 1;
}

/* A communicator under test; `offloadable`: the world's group in any order. */
struct comm {
  MPI_Comm c;
  const char* name;
  int rank, size, offloadable;
};

static void expect(const struct comm* cm, enum call c, int offloaded, int packed) {
  if (!cm->offloadable || !offloaded) return;
  expect_offloaded_[c]++;
  if (packed) expect_packed_[c]++;
}

static int bitwise(MPI_Op op) {
  return op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
}

/* Bitwise ops: on every integer type the switch sums (signed or not). */
static int computes(const struct dtype* d, MPI_Op op) {
  return (op == MPI_SUM && d->sw != SW_NONE) || ((op == MPI_MIN || op == MPI_MAX) && d->sw == SW_ALL) ||
         (bitwise(op) && d->sw != SW_NONE && (d->vk == VK_SINT || d->vk == VK_UINT));
}

static const char* op_name(MPI_Op op) {
  return op == MPI_SUM      ? "sum"
         : op == MPI_MIN    ? "min"
         : op == MPI_MAX    ? "max"
         : op == MPI_MINLOC ? "minloc"
         : op == MPI_MAXLOC ? "maxloc"
         : op == MPI_PROD   ? "prod"
         : op == MPI_BAND   ? "band"
         : op == MPI_BOR    ? "bor"
         : op == MPI_BXOR   ? "bxor"
                            : "op";
}

/* ------------------------------------------------------------ collectives */

/* MPI_Bcast of `count` items of d (this rank's datatype) from `root`. */
static void check_bcast(const struct comm* cm, const struct dtype* d, long count, int root, int salt) {
  char what[200];
  snprintf(what, sizeof(what), "%s Bcast %s x %ld root %d", cm->name, d->name, count, root);
  struct tbuf init = tbuf_new(d->t, count, 0xee);
  if (cm->rank == root) {
    unsigned char* src = pattern(packed_size(d->t, count), root, salt);
    unpack(src, init.p, d->t, count);
    free(src);
  }
  struct tbuf got = tbuf_copy(&init), want = tbuf_copy(&init);
  int rc_got = MPI_Bcast(got.p, (int)count, d->t, root, cm->c);
  int rc_want = PMPI_Bcast(want.p, (int)count, d->t, root, cm->c);
  if (same_outcome(what, rc_got, rc_want)) compare(what, &got, &want, &init, d->t, count, 1);
  expect(cm, C_BCAST, count > 0 && type_size(d->t) > 0, !d->contiguous);
  tbuf_free(&init);
  tbuf_free(&got);
  tbuf_free(&want);
}

/* MPI_Allgather: this rank sends scount x sd, receives rcount x rd per rank. */
static void check_allgather(const struct comm* cm, const struct dtype* sd, long scount,
                            const struct dtype* rd, long rcount, int inplace, int salt) {
  char what[200];
  snprintf(what, sizeof(what), "%s Allgather%s %s x %ld -> %s x %ld", cm->name, inplace ? "(in place)" : "",
           sd->name, scount, rd->name, rcount);
  size_t block = packed_size(rd->t, rcount);
  unsigned char* mine = pattern(block, cm->rank, salt);
  struct tbuf send = tbuf_new(sd->t, scount, 0xdd);
  unpack(mine, send.p, sd->t, scount);
  struct tbuf init = tbuf_new(rd->t, rcount * cm->size, 0xee);
  MPI_Aint lb, ext;
  MPI_Type_get_extent(rd->t, &lb, &ext);
  if (inplace) unpack(mine, init.p + (MPI_Aint)cm->rank * rcount * ext, rd->t, rcount);
  struct tbuf got = tbuf_copy(&init), want = tbuf_copy(&init);
  const void* sbuf = inplace ? MPI_IN_PLACE : send.p;
  MPI_Datatype st = inplace ? MPI_DATATYPE_NULL : sd->t;
  int sc = inplace ? 0 : (int)scount;
  int rc_got = MPI_Allgather(sbuf, sc, st, got.p, (int)rcount, rd->t, cm->c);
  int rc_want = PMPI_Allgather(sbuf, sc, st, want.p, (int)rcount, rd->t, cm->c);
  if (same_outcome(what, rc_got, rc_want)) compare(what, &got, &want, &init, rd->t, rcount * cm->size, 1);
  expect(cm, C_ALLGATHER, block > 0, !rd->contiguous || (!inplace && !sd->contiguous));
  free(mine);
  tbuf_free(&send);
  tbuf_free(&init);
  tbuf_free(&got);
  tbuf_free(&want);
}

/* The reference reduction: Open MPI's own call, or, where the switch
 * reduces a derived datatype (which Open MPI rejects), Open MPI's reduction
 * of the packed basic elements. */
static int reference_reduce(enum call c, const void* in, struct tbuf* out, const struct dtype* d, long count,
                            MPI_Op op, int root, const struct comm* cm, long out_count, int offloaded) {
  const void* sbuf = in;
  if (d->t == d->basic || !offloaded) {
    if (c == C_ALLREDUCE) return PMPI_Allreduce(sbuf, out->p, (int)count, d->t, op, cm->c);
    if (c == C_REDUCE) return PMPI_Reduce(sbuf, out->p, (int)count, d->t, op, root, cm->c);
    return PMPI_Reduce_scatter_block(sbuf, out->p, (int)count, d->t, op, cm->c);
  }
  long in_count = c == C_RSB ? count * cm->size : count;
  long n = in_count * d->per;
  unsigned char* pin = pack(sbuf == MPI_IN_PLACE ? out->p : (const unsigned char*)in, d->t, in_count);
  unsigned char* pout = malloc(packed_size(d->t, in_count) + 1);
  int rc;
  if (c == C_ALLREDUCE)
    rc = PMPI_Allreduce(pin, pout, (int)n, d->basic, op, cm->c);
  else if (c == C_REDUCE)
    rc = PMPI_Reduce(pin, pout, (int)n, d->basic, op, root, cm->c);
  else
    rc = PMPI_Reduce_scatter_block(pin, pout, (int)(count * d->per), d->basic, op, cm->c);
  if (rc == MPI_SUCCESS && (c != C_REDUCE || cm->rank == root)) unpack(pout, out->p, d->t, out_count);
  free(pin);
  free(pout);
  return rc;
}

/* One reduction call `c` of `count` items of d (this rank's datatype). */
static void check_reduction(const struct comm* cm, enum call c, const struct dtype* d, long count, MPI_Op op,
                            int root, int inplace, int salt) {
  char what[200];
  snprintf(what, sizeof(what), "%s %s%s %s x %ld %s root %d", cm->name, kCallNames[c],
           inplace ? "(in place)" : "", d->name, count, op_name(op), root);
  long in_count = c == C_RSB ? count * cm->size : count;
  unsigned char* v = values(d, in_count * d->per, rank_, salt);
  struct tbuf in = tbuf_new(d->t, in_count, 0xa5);
  unpack(v, in.p, d->t, in_count);
  int at_root = c != C_REDUCE || cm->rank == root;
  inplace = inplace && at_root;
  /* The output: in place it starts as the input. */
  struct tbuf init = inplace ? tbuf_copy(&in) : tbuf_new(d->t, in_count, 0x5a);
  struct tbuf got = tbuf_copy(&init), want = tbuf_copy(&init);
  const void* sbuf = inplace ? MPI_IN_PLACE : in.p;
  int rc_got = c == C_ALLREDUCE ? MPI_Allreduce(sbuf, got.p, (int)count, d->t, op, cm->c)
               : c == C_REDUCE  ? MPI_Reduce(sbuf, got.p, (int)count, d->t, op, root, cm->c)
                                : MPI_Reduce_scatter_block(sbuf, got.p, (int)count, d->t, op, cm->c);
  int offloaded = cm->offloadable && count > 0 && computes(d, op);
  int rc_want = reference_reduce(c, sbuf, &want, d, count, op, root, cm, count, offloaded);
  if (same_outcome(what, rc_got, rc_want) && at_root)
    compare(what, &got, &want, &init, d->t, count, d->esize);
  expect(cm, c, offloaded, !d->contiguous);
  free(v);
  tbuf_free(&in);
  tbuf_free(&init);
  tbuf_free(&got);
  tbuf_free(&want);
}

static void check_barrier(const struct comm* cm) {
  checks_++;
  if (MPI_Barrier(cm->c) != MPI_SUCCESS) failed(cm->name, "MPI_Barrier failed");
  expect(cm, C_BARRIER, 1, 0);
}

/* ------------------------------------------------------------ suites */

static const long kCounts[] = {0, 1, 2, 7, 3001};
#define NCOUNTS (sizeof(kCounts) / sizeof(kCounts[0]))

static const struct dtype* find_pre(const char* name) {
  for (int i = 0; i < npre_; i++)
    if (!strcmp(pre_[i].name, name)) return &pre_[i];
  return NULL;
}

/* Every predefined datatype through every call; reductions with the ops
 * Open MPI defines for it (and SUM everywhere: it must reject the rest). */
static void predefined_suite(const struct comm* cm, int all_roots) {
  int salt = 0;
  size_t ncounts = quick_ ? 3 : NCOUNTS;
  for (int i = 0; i < npre_; i++) {
    const struct dtype* d = &pre_[i];
    for (size_t k = 0; k < ncounts; k++) {
      long n = kCounts[k];
      for (int root = 0; root < cm->size; root += all_roots ? 1 : cm->size - 1) {
        check_bcast(cm, d, n, root, salt++);
        if (cm->size == 1) break;
      }
      check_allgather(cm, d, n, d, n, 0, salt++);
      check_allgather(cm, d, n, d, n, 1, salt++);
      const MPI_Op pair_ops[] = {MPI_MINLOC, MPI_MAXLOC, MPI_SUM};
      const MPI_Op ops[] = {MPI_SUM, MPI_MIN, MPI_MAX};
      for (int o = 0; o < 3; o++) {
        MPI_Op op = d->pair ? pair_ops[o] : ops[o];
        check_reduction(cm, C_ALLREDUCE, d, n, op, 0, 0, salt++);
        check_reduction(cm, C_ALLREDUCE, d, n, op, 0, 1, salt++);
        check_reduction(cm, C_REDUCE, d, n, op, (int)((k + (size_t)o) % (size_t)cm->size), 0, salt++);
        check_reduction(cm, C_REDUCE, d, n, op, cm->size - 1, 1, salt++);
        check_reduction(cm, C_RSB, d, n, op, 0, o == 1, salt++);
      }
      /* Bitwise ops: offloaded on the integer types above, MPI's own
       * outcome (an error or its algorithm) on the rest. */
      if (!d->pair && n != 0 && n != 2) {
        const MPI_Op bit_ops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};
        for (int o = 0; o < 3; o++) {
          check_reduction(cm, C_ALLREDUCE, d, n, bit_ops[o], 0, o == 1, salt++);
          check_reduction(cm, C_REDUCE, d, n, bit_ops[o], (int)((k + (size_t)o) % (size_t)cm->size), o == 2,
                          salt++);
        }
        check_reduction(cm, C_RSB, d, n, MPI_BXOR, 0, 0, salt++);
      }
    }
  }
  /* Every root of a Reduce, in and out of place. */
  const struct dtype* di = find_pre("MPI_INT");
  for (int root = 0; root < cm->size; root++) {
    check_reduction(cm, C_REDUCE, di, 7, MPI_SUM, root, 0, salt++);
    check_reduction(cm, C_REDUCE, di, 7, MPI_MAX, root, 1, salt++);
  }
}

/* Derived layouts of int, double and MPI_DOUBLE_INT: the same datatype on
 * every rank, then a different one per rank with one signature. */
static void derived_suite(const struct comm* cm) {
  const char* bases[] = {"MPI_INT", "MPI_DOUBLE", "MPI_DOUBLE_INT"};
  int salt = 1000;
  for (size_t b = 0; b < 3; b++) {
    const struct dtype* base = find_pre(bases[b]);
    struct dtype lay[L_NLAYOUTS];
    for (int l = 0; l < L_NLAYOUTS; l++) lay[l] = make_layout((enum layout)l, base);
    /* Signatures of N base elements, N a multiple of every layout's `per`. */
    const long sigs[] = {0, 4, 8, 28, 4 * 1001};
    for (size_t s = 0; s < (quick_ ? 3 : sizeof(sigs) / sizeof(sigs[0])); s++) {
      long N = sigs[s];
      for (int l = 0; l < L_NLAYOUTS; l++) {
        const struct dtype* d = &lay[l];
        for (int root = 0; root < cm->size; root++) check_bcast(cm, d, N / d->per, root, salt++);
        check_allgather(cm, d, N / d->per, d, N / d->per, l % 2, salt++);
        if (derived_reductions_ && !base->pair) {
          check_reduction(cm, C_ALLREDUCE, d, N / d->per, MPI_SUM, 0, l % 2, salt++);
          check_reduction(cm, C_REDUCE, d, N / d->per, MPI_MAX, l % cm->size, l % 2, salt++);
          check_reduction(cm, C_RSB, d, N / d->per, MPI_MIN, 0, l % 2, salt++);
        }
      }
      /* Per rank: layout (rank + v) mod L; the sender's differs from the receivers'. */
      for (int v = 0; v < L_NLAYOUTS; v++) {
        const struct dtype* mine = &lay[(cm->rank + v) % L_NLAYOUTS];
        const struct dtype* recv = &lay[(cm->rank + v + 3) % L_NLAYOUTS];
        check_bcast(cm, mine, N / mine->per, v % cm->size, salt++);
        check_allgather(cm, mine, N / mine->per, recv, N / recv->per, 0, salt++);
        check_allgather(cm, mine, N / mine->per, recv, N / recv->per, 1, salt++);
        /* Only where every rank reduces on the switch: Open MPI itself
         * rejects the derived layouts, so on its algorithm some ranks would
         * fail at once and the others wait for them. */
        if (derived_reductions_ && !base->pair && cm->offloadable && N > 0) {
          check_reduction(cm, C_ALLREDUCE, mine, N / mine->per, MPI_SUM, 0, v % 2, salt++);
          check_reduction(cm, C_REDUCE, mine, N / mine->per, MPI_MIN, v % cm->size, v % 2, salt++);
          check_reduction(cm, C_RSB, mine, N / mine->per, MPI_MAX, 0, v % 2, salt++);
        }
      }
    }
    for (int l = 0; l < L_NLAYOUTS; l++) free_layout(&lay[l]);
  }
  /* Same signature from different predefined names (Open MPI accepts). */
  const char* ints[] = {"MPI_INT", "MPI_INT32_T"};
  const char* longs[] = {"MPI_LONG", "MPI_INT64_T", "MPI_LONG_LONG"};
  for (long n = 1; n <= 1001; n += 500) {
    const struct dtype* i32 = find_pre(ints[cm->rank % 2]);
    const struct dtype* i64 = find_pre(longs[cm->rank % 3]);
    check_bcast(cm, i32, n, 0, salt++);
    check_allgather(cm, i64, n, i64, n, 0, salt++);
    check_reduction(cm, C_ALLREDUCE, i32, n, MPI_SUM, 0, 0, salt++);
    check_reduction(cm, C_REDUCE, i64, n, MPI_MAX, cm->size - 1, 1, salt++);
    check_reduction(cm, C_RSB, i64, n, MPI_SUM, 0, 0, salt++);
  }
  /* A struct of an int and a double: moved as bytes; no switch reduces it,
   * and Open MPI rejects predefined ops on it. */
  int lens[2] = {1, 1};
  MPI_Aint displs[2] = {0, 8};
  MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, mixed_t;
  MPI_Type_create_struct(2, lens, displs, types, &mixed_t);
  MPI_Type_commit(&mixed_t);
  struct dtype mixed = {"struct{int,double}", mixed_t, VK_SINT, 1, 0, SW_NONE, mixed_t, 12, 0};
  for (int root = 0; root < cm->size; root++) check_bcast(cm, &mixed, 5, root, salt++);
  check_allgather(cm, &mixed, 3, &mixed, 3, 0, salt++);
  check_reduction(cm, C_ALLREDUCE, &mixed, 10, MPI_SUM, 0, 0, salt++);
  MPI_Type_free(&mixed_t);
}

static struct comm make_comm(MPI_Comm c, const char* name, int offloadable) {
  struct comm x = {c, name, 0, 0, offloadable};
  MPI_Comm_rank(c, &x.rank);
  MPI_Comm_size(c, &x.size);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return x;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--derived-reductions")) {
      derived_reductions_ = 1;
    } else if (!strcmp(argv[i], "--quick")) {
      quick_ = 1;
    } else {
      fprintf(stderr, "usage: mpi_dtype_conformance [--derived-reductions] [--quick]\n");
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  predefined_types();

  MPI_Comm dup, reversed, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size_ - rank_, &reversed);
  MPI_Comm_split(MPI_COMM_WORLD, rank_ % 2, rank_, &half);
  struct comm comms[] = {
      make_comm(MPI_COMM_WORLD, "world", 1),
      make_comm(reversed, "reversed", 1),
      make_comm(dup, "dup", 1),
      make_comm(half, "half", 0),
  };
  for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
    const struct comm* cm = &comms[i];
    check_barrier(cm);
    if (i < 2 || !quick_) predefined_suite(cm, i < 2);
    derived_suite(cm);
    check_barrier(cm);
  }
  MPI_Comm_free(&half);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&dup);

  printf("dtype_conformance: rank %d expect {", rank_);
  for (int c = 0; c < C_NCALLS; c++)
    printf("%s\"%s\": [%ld, %ld]", c ? ", " : "", kCallNames[c], expect_offloaded_[c], expect_packed_[c]);
  printf("}\n");
  fflush(stdout);
  /* Totals over the ranks by point-to-point (not intercepted). */
  long mine[3] = {checks_, failures_, rejected_}, all[3] = {checks_, failures_, rejected_};
  if (rank_ == 0) {
    for (int r = 1; r < size_; r++) {
      long theirs[3];
      MPI_Recv(theirs, 3, MPI_LONG, r, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int k = 0; k < 3; k++) all[k] += theirs[k];
    }
    printf("dtype_conformance: ranks %d checks %ld failures %ld rejected %ld\n", size_, all[0], all[1],
           all[2]);
    fflush(stdout);
  } else {
    MPI_Send(mine, 3, MPI_LONG, 0, 78, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failures_ ? 1 : 0;
}
