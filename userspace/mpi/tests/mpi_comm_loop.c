// SPDX-License-Identifier: Apache-2.0
/* mpi_comm_loop: a plain MPI program (it knows nothing about incin) that
 * walks the communicators MPICH's collective tests loop over
 * (MTestGetIntracommGeneral / MTestGetIntercomm) and runs collectives on
 * each, checking every result against values known from the ranks' inputs:
 *
 *   intracommunicators: MPI_COMM_WORLD, a dup, a split that reverses the
 *   ranks, a split into halves, MPI_Comm_create of the odd ranks and of all
 *   but rank 0, the merges of an intercommunicator of the two halves (both
 *   orders: the world's group in the world's order and permuted), the merge
 *   of "rank 0 against the rest", a dup of a merged one, the communicator
 *   of the even ranks by MPI_Comm_create_group, the node-local ones of
 *   MPI_Comm_split_type;
 *   intercommunicators: the halves, a dup of it and a split of it that
 *   reverses the ranks, and rank 0 against the rest (MPI_Intercomm_create
 *   over MPI_COMM_WORLD as peer).
 *
 * On each intracommunicator: MPI_Allreduce (SUM/MIN/MAX int and double,
 * counts 1, 7, 1000, in place), MPI_Reduce to the first and last rank,
 * MPI_Bcast from every root and MPI_Allgather of predefined and derived
 * datatypes (contiguous, vector, indexed with blocks out of order, a struct
 * of an int and a double, resized, MPI_DOUBLE_INT), MPI_Barrier,
 * MPI_Reduce_scatter_block, and calls an offload passes on: MPI_Alltoall,
 * MPI_Gather, MPI_Allgatherv, MPI_Scan, MPI_Exscan, MPI_Reduce_scatter,
 * MPI_PROD and MPI_MINLOC. On each intercommunicator: MPI_Allreduce,
 * MPI_Bcast (MPI_ROOT / MPI_PROC_NULL), MPI_Allgather, MPI_Allgatherv
 * (Open MPI's coll/inter runs it with an internal datatype on the local
 * communicator), MPI_Reduce, MPI_Barrier.
 *
 * Derived-datatype results are checked byte for byte: the received buffer
 * must equal a buffer of the receiver's initial bytes into which the
 * expected data were unpacked (MPI_Pack/MPI_Unpack), so bytes between
 * elements must stay untouched.
 *
 * Rank 0 prints "mpi_comm_loop: ranks N comms C checks K failures F digest
 * D" (D: a hash of rank 0's results, equal with and without an offload).
 * Exit 1 on any failure on any rank. Needs at least 2 ranks.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank_, wsize_;
static long checks_, failures_, comms_;
static uint64_t digest_ = 1469598103934665603ull;
static const char* where_ = "";

static void mix(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; i++) digest_ = (digest_ ^ b[i]) * 1099511628211ull;
}

static void check(int ok, const char* what, long i, double got, double want) {
  checks_++;
  if (ok) return;
  if (failures_++ < 20)
    fprintf(stderr, "mpi_comm_loop: rank %d %s: %s [%ld] got %.17g want %.17g\n", wrank_, where_, what, i,
            got, want);
}

static void check_rc(int rc, const char* what) {
  checks_++;
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  if (failures_++ < 20)
    fprintf(stderr, "mpi_comm_loop: rank %d %s: %s returned %s\n", wrank_, where_, what, msg);
}

/* The input of world rank w at element i: small integers, so every sum is
 * exact in any order and in any type. */
static int val(int w, int i) {
  return (w + 1) * 3 + (i * 7) % 41 - 20;
}

/* world ranks of a communicator's local (or remote) group */
static int* world_ranks(MPI_Comm c, int remote, int* n) {
  MPI_Group g, wg;
  if (remote) {
    MPI_Comm_remote_group(c, &g);
  } else {
    MPI_Comm_group(c, &g);
  }
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_size(g, n);
  int* in = malloc(sizeof(int) * (size_t)*n);
  int* out = malloc(sizeof(int) * (size_t)*n);
  for (int i = 0; i < *n; i++) in[i] = i;
  MPI_Group_translate_ranks(g, *n, in, wg, out);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  free(in);
  return out;
}

/* ---- datatypes -------------------------------------------------------- */

struct dtype {
  const char* name;
  MPI_Datatype t;
  int count;
  int derived;
};
#define NDT 8
static struct dtype dts_[NDT];

static void make_types(void) {
  MPI_Datatype t;
  int i = 0;
  dts_[i++] = (struct dtype){"int", MPI_INT, 5, 0};
  dts_[i++] = (struct dtype){"double", MPI_DOUBLE, 3, 0};
  MPI_Type_contiguous(3, MPI_INT, &t);
  MPI_Type_commit(&t);
  dts_[i++] = (struct dtype){"contiguous3", t, 2, 1};
  MPI_Type_vector(4, 1, 2, MPI_INT, &t);
  MPI_Type_commit(&t);
  dts_[i++] = (struct dtype){"vector", t, 2, 1};
  int bl[2] = {2, 1}, disp[2] = {3, 0};
  MPI_Type_indexed(2, bl, disp, MPI_INT, &t);
  MPI_Type_commit(&t);
  dts_[i++] = (struct dtype){"indexed", t, 2, 1};
  struct {
    int a;
    double b;
  } s;
  int sbl[2] = {1, 1};
  MPI_Aint sd[2] = {(char*)&s.a - (char*)&s, (char*)&s.b - (char*)&s};
  MPI_Datatype st[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, sbl, sd, st, &t);
  MPI_Type_commit(&t);
  dts_[i++] = (struct dtype){"struct_int_double", t, 3, 1};
  MPI_Type_create_resized(MPI_INT, 0, 8, &t);
  MPI_Type_commit(&t);
  dts_[i++] = (struct dtype){"resized", t, 4, 1};
  dts_[i++] = (struct dtype){"double_int", MPI_DOUBLE_INT, 2, 0};
}

static void free_types(void) {
  for (int i = 0; i < NDT; i++)
    if (dts_[i].derived) MPI_Type_free(&dts_[i].t);
}

/* bytes spanned by `count` items (all these types have lower bound 0) */
static size_t span(const struct dtype* d, int count) {
  MPI_Aint lb, ext, tlb, text;
  MPI_Type_get_extent(d->t, &lb, &ext);
  MPI_Type_get_true_extent(d->t, &tlb, &text);
  return count ? (size_t)((count - 1) * ext + tlb + text) : 0;
}

static void fill(unsigned char* b, size_t n, int w, int salt) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((w * 131 + salt * 17 + (int)i * 7) % 251);
}

/* what a receiver's buffer `init` must become when the data `src` (a
 * sender's buffer of `count` items of d) arrive: init with the packed data
 * unpacked into it */
static void expect_into(unsigned char* init, const unsigned char* src, const struct dtype* d, int count,
                        MPI_Comm comm) {
  int psize = 0, pos = 0;
  MPI_Pack_size(count, d->t, comm, &psize);
  unsigned char* packed = malloc((size_t)psize + 1);
  MPI_Pack(src, count, d->t, packed, psize, &pos, comm);
  int upos = 0;
  MPI_Unpack(packed, pos, &upos, init, count, d->t, comm);
  free(packed);
}

static void compare_bytes(const unsigned char* got, const unsigned char* want, size_t n, const char* what) {
  long bad = -1;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      bad = (long)i;
      break;
    }
  check(bad < 0, what, bad, bad < 0 ? 0 : got[bad], bad < 0 ? 0 : want[bad]);
  mix(got, n);
}

/* ---- intracommunicator collectives ------------------------------------ */

static void intra_reductions(MPI_Comm c, const int* w, int n, int me) {
  static const int counts[3] = {1, 7, 1000};
  for (int k = 0; k < 3; k++) {
    int cnt = counts[k];
    int* in = malloc(sizeof(int) * (size_t)cnt);
    int* out = malloc(sizeof(int) * (size_t)cnt);
    double* din = malloc(sizeof(double) * (size_t)cnt);
    double* dout = malloc(sizeof(double) * (size_t)cnt);
    for (int i = 0; i < cnt; i++) {
      in[i] = val(w[me], i);
      din[i] = val(w[me], i) * 0.5;
    }
    MPI_Op ops[3] = {MPI_SUM, MPI_MIN, MPI_MAX};
    const char* names[3] = {"allreduce int sum", "allreduce int min", "allreduce int max"};
    for (int o = 0; o < 3; o++) {
      check_rc(MPI_Allreduce(in, out, cnt, MPI_INT, ops[o], c), names[o]);
      for (int i = 0; i < cnt; i++) {
        long want = o == 1 ? 1L << 40 : o == 2 ? -(1L << 40) : 0;
        for (int r = 0; r < n; r++) {
          long v = val(w[r], i);
          want = o == 0 ? want + v : o == 1 ? (v < want ? v : want) : (v > want ? v : want);
        }
        check(out[i] == want, names[o], i, out[i], (double)want);
      }
      mix(out, sizeof(int) * (size_t)cnt);
    }
    /* in place, double SUM */
    memcpy(dout, din, sizeof(double) * (size_t)cnt);
    check_rc(MPI_Allreduce(MPI_IN_PLACE, dout, cnt, MPI_DOUBLE, MPI_SUM, c), "allreduce double sum in place");
    for (int i = 0; i < cnt; i++) {
      double want = 0;
      for (int r = 0; r < n; r++) want += val(w[r], i) * 0.5;
      check(dout[i] == want, "allreduce double sum in place", i, dout[i], want);
    }
    mix(dout, sizeof(double) * (size_t)cnt);
    /* Reduce to the first and the last rank */
    for (int root = 0; root < n; root += (n > 1 ? n - 1 : 1)) {
      for (int i = 0; i < cnt; i++) out[i] = -7;
      check_rc(MPI_Reduce(in, out, cnt, MPI_INT, MPI_SUM, root, c), "reduce int sum");
      if (me == root) {
        for (int i = 0; i < cnt; i++) {
          long want = 0;
          for (int r = 0; r < n; r++) want += val(w[r], i);
          check(out[i] == want, "reduce int sum", i, out[i], (double)want);
        }
        mix(out, sizeof(int) * (size_t)cnt);
      }
      if (n == 1) break;
    }
    free(in);
    free(out);
    free(din);
    free(dout);
  }
  /* Reduce_scatter_block: block b of rank r's input is val(w[r], b*3+j) */
  int blk = 3;
  int* in = malloc(sizeof(int) * (size_t)(blk * n));
  int out[3];
  for (int i = 0; i < blk * n; i++) in[i] = val(w[me], i);
  check_rc(MPI_Reduce_scatter_block(in, out, blk, MPI_INT, MPI_SUM, c), "reduce_scatter_block");
  for (int j = 0; j < blk; j++) {
    long want = 0;
    for (int r = 0; r < n; r++) want += val(w[r], me * blk + j);
    check(out[j] == want, "reduce_scatter_block", j, out[j], (double)want);
  }
  mix(out, sizeof(out));
  free(in);
  check_rc(MPI_Barrier(c), "barrier");
}

static void intra_datatypes(MPI_Comm c, const int* w, int n, int me) {
  for (int k = 0; k < NDT; k++) {
    const struct dtype* d = &dts_[k];
    size_t bytes = span(d, d->count);
    unsigned char* buf = malloc(bytes);
    unsigned char* want = malloc(bytes);
    unsigned char* src = malloc(bytes);
    /* Bcast from every root */
    for (int root = 0; root < n; root++) {
      fill(buf, bytes, w[me], 1);
      memcpy(want, buf, bytes);
      fill(src, bytes, w[root], 2);
      if (me == root) memcpy(buf, src, bytes);
      char what[96];
      snprintf(what, sizeof(what), "bcast %s root %d", d->name, root);
      check_rc(MPI_Bcast(buf, d->count, d->t, root, c), what);
      if (me == root) {
        compare_bytes(buf, src, bytes, what);
      } else {
        expect_into(want, src, d, d->count, c);
        compare_bytes(buf, want, bytes, what);
      }
    }
    /* Allgather: block r of the receive buffer gets rank r's items */
    MPI_Aint lb, ext;
    MPI_Type_get_extent(d->t, &lb, &ext);
    size_t rbytes = span(d, d->count * n);
    unsigned char* rbuf = malloc(rbytes);
    unsigned char* rwant = malloc(rbytes);
    fill(rbuf, rbytes, w[me], 3);
    memcpy(rwant, rbuf, rbytes);
    fill(src, bytes, w[me], 4);
    char what[96];
    snprintf(what, sizeof(what), "allgather %s", d->name);
    check_rc(MPI_Allgather(src, d->count, d->t, rbuf, d->count, d->t, c), what);
    for (int r = 0; r < n; r++) {
      unsigned char* other = malloc(bytes);
      fill(other, bytes, w[r], 4);
      expect_into(rwant + (size_t)r * (size_t)d->count * (size_t)ext, other, d, d->count, c);
      free(other);
    }
    compare_bytes(rbuf, rwant, rbytes, what);
    free(rbuf);
    free(rwant);
    free(buf);
    free(want);
    free(src);
  }
}

static void intra_passed_on(MPI_Comm c, const int* w, int n, int me) {
  int* in = malloc(sizeof(int) * (size_t)(2 * n + 2));
  int* out = malloc(sizeof(int) * (size_t)(4 * n * n + 4));
  /* Alltoall: rank r sends val(w[r], 100 + dest) to dest */
  for (int d = 0; d < n; d++) in[d] = val(w[me], 100 + d);
  check_rc(MPI_Alltoall(in, 1, MPI_INT, out, 1, MPI_INT, c), "alltoall");
  for (int r = 0; r < n; r++)
    check(out[r] == val(w[r], 100 + me), "alltoall", r, out[r], val(w[r], 100 + me));
  mix(out, sizeof(int) * (size_t)n);
  /* Gather to the last rank */
  in[0] = val(w[me], 200);
  check_rc(MPI_Gather(in, 1, MPI_INT, out, 1, MPI_INT, n - 1, c), "gather");
  if (me == n - 1) {
    for (int r = 0; r < n; r++) check(out[r] == val(w[r], 200), "gather", r, out[r], val(w[r], 200));
    mix(out, sizeof(int) * (size_t)n);
  }
  /* Allgatherv: rank r contributes r+1 values */
  int* counts = malloc(sizeof(int) * (size_t)n);
  int* displs = malloc(sizeof(int) * (size_t)n);
  int total = 0;
  for (int r = 0; r < n; r++) {
    counts[r] = r + 1;
    displs[r] = total;
    total += r + 1;
  }
  for (int j = 0; j <= me; j++) in[j] = val(w[me], 300 + j);
  check_rc(MPI_Allgatherv(in, me + 1, MPI_INT, out, counts, displs, MPI_INT, c), "allgatherv");
  for (int r = 0; r < n; r++)
    for (int j = 0; j <= r; j++)
      check(out[displs[r] + j] == val(w[r], 300 + j), "allgatherv", r, out[displs[r] + j],
            val(w[r], 300 + j));
  mix(out, sizeof(int) * (size_t)total);
  /* Scan and Exscan */
  in[0] = val(w[me], 400);
  check_rc(MPI_Scan(in, out, 1, MPI_INT, MPI_SUM, c), "scan");
  long want = 0;
  for (int r = 0; r <= me; r++) want += val(w[r], 400);
  check(out[0] == want, "scan", 0, out[0], (double)want);
  out[0] = 0;
  check_rc(MPI_Exscan(in, out, 1, MPI_INT, MPI_SUM, c), "exscan");
  if (me > 0) check(out[0] == want - val(w[me], 400), "exscan", 0, out[0], (double)(want - val(w[me], 400)));
  /* Reduce_scatter with counts r+1 */
  int* rin = malloc(sizeof(int) * (size_t)total);
  for (int i = 0; i < total; i++) rin[i] = val(w[me], 500 + i);
  check_rc(MPI_Reduce_scatter(rin, out, counts, MPI_INT, MPI_SUM, c), "reduce_scatter");
  for (int j = 0; j <= me; j++) {
    long s = 0;
    for (int r = 0; r < n; r++) s += val(w[r], 500 + displs[me] + j);
    check(out[j] == s, "reduce_scatter", j, out[j], (double)s);
  }
  mix(out, sizeof(int) * (size_t)(me + 1));
  /* MPI_PROD and MPI_MINLOC: ops no switch computes */
  int p = (w[me] % 3) + 1, prod = 0;
  check_rc(MPI_Allreduce(&p, &prod, 1, MPI_INT, MPI_PROD, c), "allreduce prod");
  long wantp = 1;
  for (int r = 0; r < n; r++) wantp *= (w[r] % 3) + 1;
  check(prod == wantp, "allreduce prod", 0, prod, (double)wantp);
  struct {
    double v;
    int i;
  } mine = {(double)val(w[me], 600), me}, loc;
  check_rc(MPI_Allreduce(&mine, &loc, 1, MPI_DOUBLE_INT, MPI_MINLOC, c), "allreduce minloc");
  double best = 1e300;
  int at = -1;
  for (int r = 0; r < n; r++)
    if (val(w[r], 600) < best) {
      best = val(w[r], 600);
      at = r;
    }
  check(loc.v == best && loc.i == at, "allreduce minloc", 0, loc.v, best);
  free(rin);
  free(counts);
  free(displs);
  free(in);
  free(out);
}

static void run_intra(MPI_Comm c, const char* name) {
  if (c == MPI_COMM_NULL) return;
  comms_++;
  where_ = name;
  int n, me;
  MPI_Comm_size(c, &n);
  MPI_Comm_rank(c, &me);
  int nw;
  int* w = world_ranks(c, 0, &nw);
  intra_reductions(c, w, n, me);
  intra_datatypes(c, w, n, me);
  intra_passed_on(c, w, n, me);
  free(w);
}

/* ---- intercommunicator collectives ------------------------------------ */

static void run_inter(MPI_Comm ic, const char* name) {
  if (ic == MPI_COMM_NULL) return;
  comms_++;
  where_ = name;
  int me, nl, nr;
  MPI_Comm_rank(ic, &me);
  int* lw = world_ranks(ic, 0, &nl);
  int* rw = world_ranks(ic, 1, &nr);
  /* a group's "side": the one that holds world rank 0 goes first */
  int first = 0;
  for (int i = 0; i < nl; i++) first |= lw[i] == 0;
  /* Allreduce: each side gets the other side's sum */
  int cnt = 64, *in = malloc(sizeof(int) * 64), *out = malloc(sizeof(int) * 64 * (size_t)(nl + nr + 2));
  for (int i = 0; i < cnt; i++) in[i] = val(lw[me], i);
  check_rc(MPI_Allreduce(in, out, cnt, MPI_INT, MPI_SUM, ic), "inter allreduce");
  for (int i = 0; i < cnt; i++) {
    long want = 0;
    for (int r = 0; r < nr; r++) want += val(rw[r], i);
    check(out[i] == want, "inter allreduce", i, out[i], (double)want);
  }
  mix(out, sizeof(int) * (size_t)cnt);
  /* Bcast from rank 0 of the first side */
  for (int i = 0; i < cnt; i++) out[i] = first && me == 0 ? val(lw[0], 700 + i) : -1;
  int root = first ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
  check_rc(MPI_Bcast(out, cnt, MPI_INT, root, ic), "inter bcast");
  if (!first)
    for (int i = 0; i < cnt; i++)
      check(out[i] == val(rw[0], 700 + i), "inter bcast", i, out[i], val(rw[0], 700 + i));
  mix(out, sizeof(int) * (size_t)cnt);
  /* Allgather: the other side's values */
  in[0] = val(lw[me], 800);
  in[1] = val(lw[me], 801);
  check_rc(MPI_Allgather(in, 2, MPI_INT, out, 2, MPI_INT, ic), "inter allgather");
  for (int r = 0; r < nr; r++)
    for (int j = 0; j < 2; j++)
      check(out[2 * r + j] == val(rw[r], 800 + j), "inter allgather", 2 * r + j, out[2 * r + j],
            val(rw[r], 800 + j));
  mix(out, sizeof(int) * 2 * (size_t)nr);
  /* Allgatherv: remote rank r contributes r+1 values */
  int* counts = malloc(sizeof(int) * (size_t)nr);
  int* displs = malloc(sizeof(int) * (size_t)nr);
  int total = 0;
  for (int r = 0; r < nr; r++) {
    counts[r] = r + 1;
    displs[r] = total;
    total += r + 1;
  }
  for (int j = 0; j <= me; j++) in[j] = val(lw[me], 900 + j);
  check_rc(MPI_Allgatherv(in, me + 1, MPI_INT, out, counts, displs, MPI_INT, ic), "inter allgatherv");
  for (int r = 0; r < nr; r++)
    for (int j = 0; j <= r; j++)
      check(out[displs[r] + j] == val(rw[r], 900 + j), "inter allgatherv", r, out[displs[r] + j],
            val(rw[r], 900 + j));
  mix(out, sizeof(int) * (size_t)total);
  /* Reduce to rank 0 of the first side */
  for (int i = 0; i < cnt; i++) in[i] = val(lw[me], 1000 + i);
  check_rc(MPI_Reduce(in, out, cnt, MPI_INT, MPI_SUM, root, ic), "inter reduce");
  if (first && me == 0) {
    for (int i = 0; i < cnt; i++) {
      long want = 0;
      for (int r = 0; r < nr; r++) want += val(rw[r], 1000 + i);
      check(out[i] == want, "inter reduce", i, out[i], (double)want);
    }
    mix(out, sizeof(int) * (size_t)cnt);
  }
  check_rc(MPI_Barrier(ic), "inter barrier");
  free(counts);
  free(displs);
  free(in);
  free(out);
  free(lw);
  free(rw);
}

/* MPI_Intercomm_create of the two sides of `color` (0 or 1) over
 * MPI_COMM_WORLD, each side's leader its lowest world rank */
static MPI_Comm intercomm(MPI_Comm side, int color, int other_leader, int tag) {
  MPI_Comm ic;
  (void)color;
  MPI_Intercomm_create(side, 0, MPI_COMM_WORLD, other_leader, tag, &ic);
  return ic;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank_);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize_);
  if (wsize_ < 2) {
    if (wrank_ == 0) fprintf(stderr, "mpi_comm_loop: needs at least 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  make_types();

  run_intra(MPI_COMM_WORLD, "world");
  MPI_Comm dup, rev, half, odd, butfirst;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run_intra(dup, "dup");
  MPI_Comm_split(MPI_COMM_WORLD, 0, wsize_ - wrank_, &rev);
  run_intra(rev, "reversed split");
  int color = wrank_ < wsize_ / 2 ? 0 : 1;
  MPI_Comm_split(MPI_COMM_WORLD, color, wrank_, &half);
  run_intra(half, "half");
  MPI_Group wg, og, bg;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int nodd = wsize_ / 2, *odds = malloc(sizeof(int) * (size_t)(nodd + 1));
  for (int i = 0; i < nodd; i++) odds[i] = 2 * i + 1;
  MPI_Group_incl(wg, nodd, odds, &og);
  MPI_Comm_create(MPI_COMM_WORLD, og, &odd);
  run_intra(odd, "create odd ranks");
  int zero = 0;
  MPI_Group_excl(wg, 1, &zero, &bg);
  MPI_Comm_create(MPI_COMM_WORLD, bg, &butfirst);
  run_intra(butfirst, "create all but rank 0");

  /* Intercommunicator of the halves; merged both ways */
  MPI_Comm ic = intercomm(half, color, color == 0 ? wsize_ / 2 : 0, 11);
  run_inter(ic, "intercomm halves");
  MPI_Comm merged_lo, merged_hi, merged_dup;
  MPI_Intercomm_merge(ic, color, &merged_lo); /* lower half first: the world's order */
  run_intra(merged_lo, "merged halves");
  MPI_Intercomm_merge(ic, !color, &merged_hi); /* upper half first: permuted */
  run_intra(merged_hi, "merged halves, upper first");
  MPI_Comm_dup(merged_hi, &merged_dup);
  run_intra(merged_dup, "dup of merged");

  /* Rank 0 against the rest */
  MPI_Comm alone;
  int c0 = wrank_ == 0 ? 0 : 1;
  MPI_Comm_split(MPI_COMM_WORLD, c0, wrank_, &alone);
  MPI_Comm ic0 = intercomm(alone, c0, c0 == 0 ? 1 : 0, 12);
  run_inter(ic0, "intercomm rank 0 vs rest");
  MPI_Comm merged0;
  MPI_Intercomm_merge(ic0, c0, &merged0);
  run_intra(merged0, "merged rank 0 vs rest");

  /* More of MPICH's loop: an intercommunicator dup'd and split (Open MPI
   * runs both through coll/inter on the local communicators), a group of
   * the even ranks made with MPI_Comm_create_group (only they call it), and
   * the node-local communicators of MPI_Comm_split_type. */
  MPI_Comm icdup, icsplit, even = MPI_COMM_NULL, node;
  MPI_Comm_dup(ic, &icdup);
  run_inter(icdup, "dup of intercomm halves");
  int irank;
  MPI_Comm_rank(ic, &irank);
  MPI_Comm_split(ic, 0, -irank, &icsplit);
  run_inter(icsplit, "split of intercomm halves, reversed");
  MPI_Group eg;
  int neven = (wsize_ + 1) / 2, *evens = malloc(sizeof(int) * (size_t)neven);
  for (int i = 0; i < neven; i++) evens[i] = 2 * i;
  MPI_Group_incl(wg, neven, evens, &eg);
  if (wrank_ % 2 == 0) MPI_Comm_create_group(MPI_COMM_WORLD, eg, 13, &even);
  run_intra(even, "create_group even ranks");
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank_, MPI_INFO_NULL, &node);
  run_intra(node, "split_type shared");
  MPI_Group_free(&eg);
  free(evens);

  MPI_Comm* all[] = {&dup,        &rev,   &half, &odd,     &butfirst, &ic,      &merged_lo, &merged_hi,
                     &merged_dup, &alone, &ic0,  &merged0, &icdup,    &icsplit, &even,      &node};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    if (*all[i] != MPI_COMM_NULL) MPI_Comm_free(all[i]);
  MPI_Group_free(&wg);
  MPI_Group_free(&og);
  MPI_Group_free(&bg);
  free(odds);
  free_types();

  long mine[3] = {checks_, failures_, comms_}, sum[3];
  MPI_Reduce(mine, sum, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  long anyfail = failures_ ? 1 : 0, fails = 0;
  MPI_Allreduce(&anyfail, &fails, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (wrank_ == 0)
    printf("mpi_comm_loop: ranks %d comms %ld checks %ld failures %ld digest %016llx\n", wsize_, comms_,
           sum[0], sum[1], (unsigned long long)digest_);
  MPI_Finalize();
  return fails ? 1 : 0;
}
