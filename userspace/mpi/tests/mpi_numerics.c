// SPDX-License-Identifier: Apache-2.0
/* mpi_numerics: a plain MPI program (it knows nothing about incin) that
 * checks MPI_Allreduce (in place and not) and MPI_Reduce (to the first and
 * the last rank) with MPI_SUM, MPI_MIN and MPI_MAX over MPI_FLOAT and
 * MPI_DOUBLE against what IEEE arithmetic gives, element by element. Every
 * rank knows every rank's inputs (they are made from the rank and the
 * element index) and computes the expected result itself.
 *
 * Inputs (arrays of 7, 1000 and 5000 elements; 7 fits the single packet of
 * a small sum, the others span many packets and blocks):
 *   specials   element classes interleaved, so that every block of
 *              elements holds several: finite small multiples of 1/4
 *              (exact in any order), +inf on one rank, -inf on one rank,
 *              +inf on every rank, +inf on one rank and -inf on another,
 *              NaN on one rank, NaN on one rank and +inf on another,
 *              values of 3/4 of the type's maximum on every rank (the sum
 *              overflows to +inf), -0.0 on every rank;
 *   one_inf    finite small multiples of 1/4 with one +inf on rank 0 in
 *              the middle (its block's other elements must stay exact);
 *   wide       random signs and magnitudes spread over 1e-6..1e6 per
 *              element and rank.
 *
 * Expected, per element (IEEE 754):
 *   SUM  NaN where any input is NaN or +inf meets -inf; +inf (-inf) where
 *        only that infinity occurs or the exact sum exceeds the type's
 *        maximum; otherwise the exact sum (specials, one_inf: bit for bit,
 *        sign of zero included) or, for wide, within gamma(n-1) * sum|x_i|
 *        of the exact sum (gamma(k) = k*u/(1-k*u), u the type's unit
 *        roundoff: the bound of any order of n-1 additions), the exact sum
 *        computed in double-double;
 *   MIN/MAX  exactly the smallest/largest input; where an input is NaN (MPI
 *        leaves it undefined; Open MPI's result depends on the order) NaN or
 *        any of the inputs;
 * and every MPI_Allreduce result bit-identical on every rank.
 *
 * Failures are counted per check category (the "class" of the element);
 * each rank prints its first failure of each category on stderr
 * ("mpi_numerics: rank R ..."), rank 0 one line per category with failures
 * ("mpi_numerics: FAIL ..."), one line per category that passed ("mpi_numerics: ok ..."), and
 * "mpi_numerics: ranks N checks C failures F". Exit 1 on any failure.
 */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cls {
  C_EXACT,                /* finite, exact in any order */
  C_PINF_ONE,             /* +inf on one rank */
  C_NINF_ONE,             /* -inf on one rank */
  C_PINF_ALL,             /* +inf on every rank */
  C_INF_MINUS_INF,        /* +inf on one rank, -inf on another */
  C_NAN_ONE,              /* NaN on one rank */
  C_NAN_INF,              /* NaN on one rank, +inf on another */
  C_OVERFLOW,             /* 3/4 of the maximum on every rank */
  C_NEG_ZERO,             /* -0.0 on every rank */
  C_SPECIALS,             /* number of interleaved classes */
  C_ONE_INF = C_SPECIALS, /* the one +inf of one_inf */
  C_BESIDE_INF,           /* one_inf's finite elements */
  C_WIDE,                 /* wide range */
  C_SAME,                 /* an MPI_Allreduce result bit-identical on every rank */
  C_COUNT
};
static const char* kClassName[C_COUNT] = {"finite elements among specials",
                                          "+inf on one rank",
                                          "-inf on one rank",
                                          "+inf on every rank",
                                          "+inf and -inf (NaN)",
                                          "NaN on one rank",
                                          "NaN and +inf",
                                          "overflow to +inf",
                                          "-0.0 on every rank",
                                          "one +inf in a finite array",
                                          "finite elements beside one +inf",
                                          "wide range 1e-6..1e6",
                                          "MPI_Allreduce result identical on every rank"};

enum { T_FLOAT, T_DOUBLE, T_COUNT };
enum { O_SUM, O_MIN, O_MAX, O_COUNT };
static const char* kTypeName[T_COUNT] = {"float", "double"};
static const char* kOpName[O_COUNT] = {"SUM", "MIN", "MAX"};

static int rank_, size_;
static long checks_;
/* failures and checks per type, op, class */
static long fails_[T_COUNT][O_COUNT][C_COUNT], tries_[T_COUNT][O_COUNT][C_COUNT];
/* failures per call: MPI_Allreduce, in place, MPI_Reduce to the first and
 * to the last rank; and per count (7, 1000, 5000) */
static long by_call_[T_COUNT][O_COUNT][C_COUNT][4], by_count_[T_COUNT][O_COUNT][C_COUNT][3];
static int count_index_;

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The input of rank r at element i of array `arr` (0 specials, 1 one_inf,
 * 2 wide) with `count` elements, as a double (exactly representable in
 * type t), and its class. */
static double input_raw(int t, int arr, int count, int r, int i, enum cls* c);
static double input(int t, int arr, int count, int r, int i, enum cls* c) {
  /* the value as the rank holds it in its type */
  double v = input_raw(t, arr, count, r, i, c);
  return t == T_FLOAT ? (double)(float)v : v;
}
static double input_raw(int t, int arr, int count, int r, int i, enum cls* c) {
  const double big = t == T_FLOAT ? (double)FLT_MAX : DBL_MAX;
  const double small = ((r + 1) * ((i % 13) - 6)) * 0.25;
  if (arr == 1) {
    if (i == count / 2) {
      *c = C_ONE_INF;
      return r == 0 ? INFINITY : small;
    }
    *c = C_BESIDE_INF;
    return small;
  }
  if (arr == 2) {
    uint64_t h = splitmix(((uint64_t)(unsigned)i << 20) ^ ((uint64_t)(unsigned)r << 8) ^ (uint64_t)t);
    double e = -6.0 + 12.0 * (double)(h >> 11) / 9007199254740992.0; /* uniform exponent in [-6, 6) */
    double v = pow(10.0, e) * ((h & 1) ? -1.0 : 1.0);
    *c = C_WIDE;
    return t == T_FLOAT ? (double)(float)v : v;
  }
  *c = (enum cls)(i % C_SPECIALS);
  const int a = i % size_, b = (i + 1) % size_;
  switch (*c) {
    case C_EXACT: return small;
    case C_PINF_ONE: return r == a ? INFINITY : small;
    case C_NINF_ONE: return r == a ? -INFINITY : small;
    case C_PINF_ALL: return INFINITY;
    case C_INF_MINUS_INF: return r == a ? INFINITY : r == b ? -INFINITY : small;
    case C_NAN_ONE: return r == a ? NAN : small;
    case C_NAN_INF: return r == a ? NAN : r == b ? INFINITY : small;
    case C_OVERFLOW: return big * 0.75;
    case C_NEG_ZERO: return -0.0;
    default: break;
  }
  return small;
}

/* double-double accumulation (Knuth's TwoSum): exact for these sums */
static void dd_add(double* hi, double* lo, double x) {
  double s = *hi + x;
  double bb = s - *hi;
  double err = (*hi - (s - bb)) + (x - bb);
  *hi = s;
  *lo += err;
}

struct expect {
  double value; /* the exact result where finite (SUM: hi of the exact sum) */
  double lo;    /* SUM: low part of the exact sum */
  double abs;   /* SUM: sum of |x_i| */
  int nan_in;   /* an input is NaN */
  int pinf, ninf;
  double minmax_no_nan; /* MIN/MAX of the non-NaN inputs */
};

static struct expect expected(int t, int op, int arr, int count, int i, enum cls* c) {
  struct expect e;
  memset(&e, 0, sizeof(e));
  double hi = 0, lo = 0;
  int first = 1, all_neg_zero = 1;
  for (int r = 0; r < size_; r++) {
    double x = input(t, arr, count, r, i, c);
    if (isnan(x)) {
      e.nan_in = 1;
      continue;
    }
    if (isinf(x)) {
      if (x > 0)
        e.pinf = 1;
      else
        e.ninf = 1;
    } else {
      dd_add(&hi, &lo, x);
      e.abs += fabs(x);
    }
    if (!(x == 0 && signbit(x))) all_neg_zero = 0;
    if (first || (op == O_MIN ? x < e.minmax_no_nan : x > e.minmax_no_nan)) e.minmax_no_nan = x;
    first = 0;
  }
  if (op == O_SUM) {
    e.value = all_neg_zero ? -0.0 : hi;
    e.lo = lo;
  } else {
    e.value = e.minmax_no_nan;
  }
  return e;
}

static double get(int t, const void* buf, int i) {
  return t == T_FLOAT ? (double)((const float*)buf)[i] : ((const double*)buf)[i];
}

static int same_bits(double got, double want) {
  if (isnan(want)) return isnan(got);
  if (got != want) return 0;
  return signbit(got) == signbit(want);
}

/* Judges element i of a result; 1 if right. */
static int judge(int t, int op, int arr, int count, int i, double got, enum cls* c) {
  struct expect e = expected(t, op, arr, count, i, c);
  const double big = t == T_FLOAT ? (double)FLT_MAX : DBL_MAX;
  if (op == O_SUM) {
    if (e.nan_in || (e.pinf && e.ninf)) return isnan(got);
    if (e.pinf) return same_bits(got, INFINITY);
    if (e.ninf) return same_bits(got, -INFINITY);
    /* The exact sum beyond the type's range rounds to an infinity (its
     * double-double high part may already be one for double). */
    if (isinf(e.value) || fabs(e.value) > big) return same_bits(got, e.value > 0 ? INFINITY : -INFINITY);
    if (*c == C_WIDE) {
      const double u = t == T_FLOAT ? 0x1p-24 : 0x1p-53;
      const double k = (double)(size_ - 1);
      const double gamma = k * u / (1 - k * u);
      if (isnan(got) || isinf(got)) return 0;
      double diff = fabs((got - e.value) - e.lo);
      return diff <= gamma * e.abs;
    }
    /* exact in any order (and representable in the type) */
    return same_bits(got, e.value);
  }
  if (e.nan_in) {
    /* MPI leaves MIN/MAX with a NaN undefined; Open MPI's comparisons give
     * NaN or the MIN/MAX of some of the other inputs, depending on the
     * order: accept NaN or any input. */
    if (isnan(got)) return 1;
    for (int r = 0; r < size_; r++) {
      enum cls cc;
      if (same_bits(got, input(t, arr, count, r, i, &cc))) return 1;
    }
    return 0;
  }
  return same_bits(got, e.value);
}

/* The first failure of each category on this rank. */
static void note_failure(int t, int op, const char* call, int arr, int count, int i, double got, enum cls c) {
  if (fails_[t][op][c] != 1) return;
  enum cls cc;
  struct expect e = expected(t, op, arr, count, i, &cc);
  const double big = t == T_FLOAT ? (double)FLT_MAX : DBL_MAX;
  double want = e.value; /* as judge() wants it */
  if (op == O_SUM) {
    if (e.nan_in || (e.pinf && e.ninf))
      want = NAN;
    else if (e.pinf)
      want = INFINITY;
    else if (e.ninf)
      want = -INFINITY;
    else if (isinf(e.value) || fabs(e.value) > big)
      want = e.value > 0 ? INFINITY : -INFINITY;
  }
  fprintf(stderr, "mpi_numerics: rank %d %s %s %s count %d element %d (%s): got %.17g want %.17g%s\n", rank_,
          kTypeName[t], kOpName[op], call, count, i, kClassName[c], got, want,
          c == C_WIDE               ? " (within gamma*sum|x|)"
          : op != O_SUM && e.nan_in ? " (or NaN or any input)"
                                    : "");
}

static void fill(int t, void* buf, int arr, int count) {
  for (int i = 0; i < count; i++) {
    enum cls c;
    double x = input(t, arr, count, rank_, i, &c);
    if (t == T_FLOAT)
      ((float*)buf)[i] = (float)x;
    else
      ((double*)buf)[i] = x;
  }
}

/* Every rank's MPI_Allreduce result must have the same bits as rank 0's
 * (MPI_Bcast of rank 0's is compared locally; the broadcast moves bytes). */
static void same_everywhere(int t, int op, const void* buf, int count, size_t esize, int call) {
  char* r0 = malloc(esize * (size_t)count);
  memcpy(r0, buf, esize * (size_t)count);
  MPI_Bcast(r0, (int)(esize * (size_t)count), MPI_BYTE, 0, MPI_COMM_WORLD);
  int diff = memcmp(r0, buf, esize * (size_t)count) != 0;
  checks_++;
  tries_[t][op][C_SAME]++;
  if (diff) {
    fails_[t][op][C_SAME]++;
    by_call_[t][op][C_SAME][call]++;
    by_count_[t][op][C_SAME][count_index_]++;
    if (fails_[t][op][C_SAME] == 1)
      fprintf(stderr, "mpi_numerics: rank %d %s %s MPI_Allreduce count %d: result differs from rank 0's\n",
              rank_, kTypeName[t], kOpName[op], count);
  }
  free(r0);
}

static void run(int t, int op, int arr, int count) {
  const MPI_Datatype dt = t == T_FLOAT ? MPI_FLOAT : MPI_DOUBLE;
  const MPI_Op mop = op == O_SUM ? MPI_SUM : op == O_MIN ? MPI_MIN : MPI_MAX;
  const size_t esize = t == T_FLOAT ? sizeof(float) : sizeof(double);
  void* in = malloc(esize * (size_t)count);
  void* out = malloc(esize * (size_t)count);
  fill(t, in, arr, count);
  for (int call = 0; call < 4; call++) {
    const char* name = call == 0   ? "MPI_Allreduce"
                       : call == 1 ? "MPI_Allreduce in place"
                       : call == 2 ? "MPI_Reduce root 0"
                                   : "MPI_Reduce root n-1";
    const int root = call == 2 ? 0 : size_ - 1;
    memset(out, 0x55, esize * (size_t)count);
    if (call == 0) {
      MPI_Allreduce(in, out, count, dt, mop, MPI_COMM_WORLD);
    } else if (call == 1) {
      memcpy(out, in, esize * (size_t)count);
      MPI_Allreduce(MPI_IN_PLACE, out, count, dt, mop, MPI_COMM_WORLD);
    } else {
      MPI_Reduce(in, out, count, dt, mop, root, MPI_COMM_WORLD);
      if (rank_ != root) continue;
    }
    for (int i = 0; i < count; i++) {
      enum cls c;
      double got = get(t, out, i);
      int ok = judge(t, op, arr, count, i, got, &c);
      checks_++;
      tries_[t][op][c]++;
      if (!ok) {
        fails_[t][op][c]++;
        by_call_[t][op][c][call]++;
        by_count_[t][op][c][count_index_]++;
        note_failure(t, op, name, arr, count, i, got, c);
      }
    }
    if (call < 2) same_everywhere(t, op, out, count, esize, call);
  }
  free(in);
  free(out);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (size_ < 2) {
    if (rank_ == 0) fprintf(stderr, "mpi_numerics: needs at least 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  static const int counts[3] = {7, 1000, 5000};
  for (int t = 0; t < T_COUNT; t++)
    for (int op = 0; op < O_COUNT; op++)
      for (int arr = 0; arr < 3; arr++)
        for (int k = 0; k < 3; k++) {
          count_index_ = k;
          run(t, op, arr, counts[k]);
        }

  /* Totals per category on rank 0 (MPI_Gather: a call no offload takes). */
  const int n = T_COUNT * O_COUNT * C_COUNT;
  long* all_f = rank_ == 0 ? malloc(sizeof(long) * (size_t)n * (size_t)size_) : NULL;
  long* all_t = rank_ == 0 ? malloc(sizeof(long) * (size_t)n * (size_t)size_) : NULL;
  MPI_Gather(fails_, n, MPI_LONG, all_f, n, MPI_LONG, 0, MPI_COMM_WORLD);
  MPI_Gather(tries_, n, MPI_LONG, all_t, n, MPI_LONG, 0, MPI_COMM_WORLD);
  long* all_c = rank_ == 0 ? malloc(sizeof(long) * (size_t)n * 7 * (size_t)size_) : NULL;
  long mine[T_COUNT * O_COUNT * C_COUNT * 7];
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 4; k++) mine[i * 7 + k] = (&by_call_[0][0][0][0])[i * 4 + k];
    for (int k = 0; k < 3; k++) mine[i * 7 + 4 + k] = (&by_count_[0][0][0][0])[i * 3 + k];
  }
  MPI_Gather(mine, n * 7, MPI_LONG, all_c, n * 7, MPI_LONG, 0, MPI_COMM_WORLD);
  long total_checks = 0, total_fail = 0;
  MPI_Reduce(&checks_, &total_checks, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank_ == 0) {
    for (int t = 0; t < T_COUNT; t++)
      for (int op = 0; op < O_COUNT; op++)
        for (int c = 0; c < C_COUNT; c++) {
          long f = 0, tr = 0;
          int idx = (t * O_COUNT + op) * C_COUNT + c;
          for (int r = 0; r < size_; r++) {
            f += all_f[(size_t)r * (size_t)n + (size_t)idx];
            tr += all_t[(size_t)r * (size_t)n + (size_t)idx];
          }
          if (!tr) continue;
          total_fail += f;
          const char* what = kClassName[c];
          if (f) {
            long k7[7] = {0};
            for (int r = 0; r < size_; r++)
              for (int k = 0; k < 7; k++)
                k7[k] += all_c[((size_t)r * (size_t)n + (size_t)idx) * 7 + (size_t)k];
            printf(
                "mpi_numerics: FAIL %s %s %s: %ld of %ld checks wrong (by call: MPI_Allreduce %ld, in place "
                "%ld, "
                "MPI_Reduce root 0 %ld, root n-1 %ld; by count: 7 %ld, 1000 %ld, 5000 %ld)\n",
                kTypeName[t], kOpName[op], what, f, tr, k7[0], k7[1], k7[2], k7[3], k7[4], k7[5], k7[6]);
          } else {
            printf("mpi_numerics: ok %s %s %s: %ld checks\n", kTypeName[t], kOpName[op], what, tr);
          }
        }
    printf("mpi_numerics: ranks %d checks %ld failures %ld\n", size_, total_checks, total_fail);
    free(all_f);
    free(all_t);
    free(all_c);
  }
  MPI_Bcast(&total_fail, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return total_fail ? 1 : 0;
}
