// SPDX-License-Identifier: Apache-2.0
/* mpi_coverage: a plain MPI program (it knows nothing about incin) that
 * runs MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Barrier,
 * MPI_Reduce_scatter_block and MPI_Allgather over int, unsigned, long,
 * int64_t, float and double with SUM/MIN/MAX, in place and not, on
 * MPI_COMM_WORLD, a dup, a split that reverses the ranks, a split into
 * halves and MPI_COMM_SELF, plus calls no switch computes (MPI_PROD,
 * MPI_LAND, a user op, MPI_SHORT, unsigned MIN, a struct of an int and a
 * double, a vector datatype), and
 * collectives entered while a point-to-point send is still pending. Every
 * element on every rank is compared with the value known analytically
 * (inputs are small integers, so float sums are exact in any order).
 *
 * usage: mpi_coverage [--init-thread] [--quick] [--hello]
 * --hello: only start, meet in one MPI_Barrier and finish (rank 0 prints
 * "mpi_coverage: hello from N ranks"): a launch test.
 * Rank 0 prints "mpi_coverage: ranks N checks C failures F digest D"; D is
 * a hash of rank 0's results, equal with and without an interposer. Exit 1
 * on any failure (on any rank).
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_, size_;
static long checks_, failures_;
static uint64_t digest_ = 1469598103934665603ull;

enum kind { K_INT, K_UNSIGNED, K_LONG, K_INT64, K_FLOAT, K_DOUBLE, K_SHORT };
struct tdesc {
  enum kind k;
  const char* name;
  size_t size;
};
static MPI_Datatype mpi_type(enum kind k) {
  switch (k) {
    case K_INT: return MPI_INT;
    case K_UNSIGNED: return MPI_UNSIGNED;
    case K_LONG: return MPI_LONG;
    case K_INT64: return MPI_INT64_T;
    case K_FLOAT: return MPI_FLOAT;
    case K_DOUBLE: return MPI_DOUBLE;
    case K_SHORT: return MPI_SHORT;
  }
  return MPI_DATATYPE_NULL;
}
static const struct tdesc kTypes[] = {
    {K_INT, "int", sizeof(int)},       {K_UNSIGNED, "unsigned", sizeof(unsigned)},
    {K_LONG, "long", sizeof(long)},    {K_INT64, "int64", sizeof(int64_t)},
    {K_FLOAT, "float", sizeof(float)}, {K_DOUBLE, "double", sizeof(double)},
};
#define NTYPES (sizeof(kTypes) / sizeof(kTypes[0]))

static void put(const struct tdesc* t, void* buf, size_t i, long long v) {
  switch (t->k) {
    case K_INT: ((int*)buf)[i] = (int)v; break;
    case K_UNSIGNED: ((unsigned*)buf)[i] = (unsigned)v; break;
    case K_LONG: ((long*)buf)[i] = (long)v; break;
    case K_INT64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case K_FLOAT: ((float*)buf)[i] = (float)v; break;
    case K_DOUBLE: ((double*)buf)[i] = (double)v; break;
    case K_SHORT: ((short*)buf)[i] = (short)v; break;
  }
}
static long long get(const struct tdesc* t, const void* buf, size_t i) {
  switch (t->k) {
    case K_INT: return ((const int*)buf)[i];
    case K_UNSIGNED: return ((const unsigned*)buf)[i];
    case K_LONG: return ((const long*)buf)[i];
    case K_INT64: return ((const int64_t*)buf)[i];
    case K_FLOAT: return (long long)((const float*)buf)[i];
    case K_DOUBLE: return (long long)((const double*)buf)[i];
    case K_SHORT: return ((const short*)buf)[i];
  }
  return 0;
}

/* Input of rank r at element i: small integers, non-negative for unsigned. */
static long long val(const struct tdesc* t, int r, size_t i, int salt) {
  long long v = (long long)((r * 7 + (long long)i * 13 + salt * 5) % 201);
  return t->k == K_UNSIGNED ? v : v - 100;
}

enum op { OP_SUM, OP_MIN, OP_MAX };
static const char* kOpNames[] = {"sum", "min", "max"};
static MPI_Op mpi_op(enum op o) {
  return o == OP_SUM ? MPI_SUM : o == OP_MIN ? MPI_MIN : MPI_MAX;
}

/* The reduction over the ranks listed in world_ranks (comm order irrelevant). */
static long long expect(const struct tdesc* t, enum op o, size_t i, int salt, const int* world_ranks, int n) {
  long long acc = val(t, world_ranks[0], i, salt);
  for (int k = 1; k < n; k++) {
    long long v = val(t, world_ranks[k], i, salt);
    if (o == OP_SUM) acc += v;
    if (o == OP_MIN && v < acc) acc = v;
    if (o == OP_MAX && v > acc) acc = v;
  }
  return acc;
}

static void mix(const void* buf, size_t bytes) {
  const unsigned char* p = buf;
  for (size_t i = 0; i < bytes; i++) digest_ = (digest_ ^ p[i]) * 1099511628211ull;
}

static void fail(const char* what, size_t i, long long got, long long want) {
  failures_++;
  if (failures_ <= 20)
    fprintf(stderr, "mpi_coverage: rank %d: %s: element %zu is %lld, expected %lld\n", rank_, what, i, got,
            want);
}

/* A communicator under test and its members' world ranks in comm order. */
struct comm {
  MPI_Comm c;
  const char* name;
  int rank, size;
  int* world;
};

static struct comm make_comm(MPI_Comm c, const char* name) {
  struct comm x = {c, name, 0, 0, NULL};
  MPI_Comm_rank(c, &x.rank);
  MPI_Comm_size(c, &x.size);
  MPI_Group g, wg;
  MPI_Comm_group(c, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int* ranks = malloc(sizeof(int) * x.size);
  x.world = malloc(sizeof(int) * x.size);
  for (int i = 0; i < x.size; i++) ranks[i] = i;
  MPI_Group_translate_ranks(g, x.size, ranks, wg, x.world);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  free(ranks);
  return x;
}

static void reductions(const struct comm* cm, const struct tdesc* t, enum op o, size_t n, int salt) {
  char what[160];
  size_t bytes = n * t->size;
  void* in = malloc(bytes * cm->size);
  void* out = malloc(bytes * cm->size);
  int me = rank_;
  /* MPI_Allreduce, out of place and in place. */
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < n; i++) put(t, in, i, val(t, me, i, salt));
    memset(out, 0x5a, bytes);
    if (inplace) {
      memcpy(out, in, bytes);
      MPI_Allreduce(MPI_IN_PLACE, out, (int)n, mpi_type(t->k), mpi_op(o), cm->c);
    } else {
      MPI_Allreduce(in, out, (int)n, mpi_type(t->k), mpi_op(o), cm->c);
    }
    snprintf(what, sizeof(what), "%s Allreduce%s %s %s n=%zu", cm->name, inplace ? "(in place)" : "", t->name,
             kOpNames[o], n);
    checks_++;
    for (size_t i = 0; i < n; i++) {
      long long want = expect(t, o, i, salt, cm->world, cm->size), got = get(t, out, i);
      if (got != want) fail(what, i, got, want);
    }
    mix(out, bytes);
  }
  /* MPI_Reduce to a root that moves with salt, out of place and in place. */
  int root = salt % cm->size;
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < n; i++) put(t, in, i, val(t, me, i, salt + 1));
    memset(out, 0x5a, bytes);
    if (inplace && cm->rank == root) {
      memcpy(out, in, bytes);
      MPI_Reduce(MPI_IN_PLACE, out, (int)n, mpi_type(t->k), mpi_op(o), root, cm->c);
    } else {
      MPI_Reduce(in, out, (int)n, mpi_type(t->k), mpi_op(o), root, cm->c);
    }
    if (cm->rank == root) {
      snprintf(what, sizeof(what), "%s Reduce%s root %d %s %s n=%zu", cm->name, inplace ? "(in place)" : "",
               root, t->name, kOpNames[o], n);
      checks_++;
      for (size_t i = 0; i < n; i++) {
        long long want = expect(t, o, i, salt + 1, cm->world, cm->size), got = get(t, out, i);
        if (got != want) fail(what, i, got, want);
      }
      mix(out, bytes);
    }
  }
  /* MPI_Reduce_scatter_block: block b of the input is element b*n+i. */
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < n * cm->size; i++) put(t, in, i, val(t, me, i, salt + 2));
    memset(out, 0x5a, bytes * cm->size);
    if (inplace) {
      memcpy(out, in, bytes * cm->size);
      MPI_Reduce_scatter_block(MPI_IN_PLACE, out, (int)n, mpi_type(t->k), mpi_op(o), cm->c);
    } else {
      MPI_Reduce_scatter_block(in, out, (int)n, mpi_type(t->k), mpi_op(o), cm->c);
    }
    snprintf(what, sizeof(what), "%s Reduce_scatter_block%s %s %s n=%zu", cm->name,
             inplace ? "(in place)" : "", t->name, kOpNames[o], n);
    checks_++;
    for (size_t i = 0; i < n; i++) {
      long long want = expect(t, o, cm->rank * n + i, salt + 2, cm->world, cm->size), got = get(t, out, i);
      if (got != want) fail(what, i, got, want);
    }
    mix(out, bytes);
  }
  free(in);
  free(out);
}

static unsigned char byte_of(int r, size_t i) {
  return (unsigned char)(r * 31 + i * 7 + 1);
}

static void bcast_bytes(const struct comm* cm, size_t bytes, int root, MPI_Datatype type, size_t count) {
  char what[160];
  unsigned char* buf = malloc(bytes + 1);
  int wroot = cm->world[root];
  for (size_t i = 0; i < bytes; i++) buf[i] = cm->rank == root ? byte_of(wroot, i) : 0xee;
  MPI_Bcast(buf, (int)count, type, root, cm->c);
  snprintf(what, sizeof(what), "%s Bcast %zu bytes root %d", cm->name, bytes, root);
  checks_++;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != byte_of(wroot, i)) fail(what, i, buf[i], byte_of(wroot, i));
  mix(buf, bytes);
  free(buf);
}

static void allgather_bytes(const struct comm* cm, size_t block, int inplace) {
  char what[160];
  unsigned char* send = malloc(block + 1);
  unsigned char* recv = malloc(block * cm->size + 1);
  for (size_t i = 0; i < block; i++) send[i] = byte_of(rank_, i);
  memset(recv, 0xee, block * cm->size);
  if (inplace) {
    memcpy(recv + cm->rank * block, send, block);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)block, MPI_BYTE, cm->c);
  } else if (block % sizeof(int) == 0) {
    MPI_Allgather(send, (int)(block / sizeof(int)), MPI_INT, recv, (int)(block / sizeof(int)), MPI_INT,
                  cm->c);
  } else {
    MPI_Allgather(send, (int)block, MPI_CHAR, recv, (int)block, MPI_CHAR, cm->c);
  }
  snprintf(what, sizeof(what), "%s Allgather%s block %zu bytes", cm->name, inplace ? "(in place)" : "",
           block);
  checks_++;
  for (int b = 0; b < cm->size; b++)
    for (size_t i = 0; i < block; i++)
      if (recv[b * block + i] != byte_of(cm->world[b], i))
        fail(what, b * block + i, recv[b * block + i], byte_of(cm->world[b], i));
  mix(recv, block * cm->size);
  free(send);
  free(recv);
}

static void user_sum_abs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; i++) {
    int a = ((int*)in)[i], b = ((int*)inout)[i];
    ((int*)inout)[i] = (a < 0 ? -a : a) + (b < 0 ? -b : b);
  }
}

/* Calls that the switches cannot do: the interposer must hand them to MPI. */
static void unsupported(const struct comm* cm) {
  const size_t n = 100;
  const struct tdesc ti = {K_INT, "int", sizeof(int)}, tu = {K_UNSIGNED, "unsigned", sizeof(unsigned)},
                     ts = {K_SHORT, "short", sizeof(short)};
  int in[100], out[100];
  /* MPI_PROD and MPI_LAND */
  for (size_t i = 0; i < n; i++) in[i] = (int)((rank_ + i) % 3 + 1);
  MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_PROD, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = 1;
    for (int k = 0; k < cm->size; k++) want *= (long long)((cm->world[k] + i) % 3 + 1);
    if (out[i] != want) fail("Allreduce int prod", i, out[i], want);
  }
  mix(out, sizeof(out));
  for (size_t i = 0; i < n; i++) in[i] = (int)((rank_ + i) % 5);
  MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_LAND, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = 1;
    for (int k = 0; k < cm->size; k++) want = want && (cm->world[k] + i) % 5 != 0;
    if (out[i] != want) fail("Allreduce int land", i, out[i], want);
  }
  /* A user-defined op */
  MPI_Op user;
  MPI_Op_create(user_sum_abs, 1, &user);
  for (size_t i = 0; i < n; i++) in[i] = (int)val(&ti, rank_, i, 9);
  MPI_Allreduce(in, out, (int)n, MPI_INT, user, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = 0;
    for (int k = 0; k < cm->size; k++) want += llabs(val(&ti, cm->world[k], i, 9));
    if (out[i] != want) fail("Allreduce user op", i, out[i], want);
  }
  mix(out, sizeof(out));
  MPI_Op_free(&user);
  /* MPI_SHORT: no switch type */
  short sin[100], sout[100];
  for (size_t i = 0; i < n; i++) sin[i] = (short)val(&ts, rank_, i, 4);
  MPI_Allreduce(sin, sout, (int)n, MPI_SHORT, MPI_SUM, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = expect(&ts, OP_SUM, i, 4, cm->world, cm->size);
    if (sout[i] != want) fail("Allreduce short sum", i, sout[i], want);
  }
  /* unsigned MIN: the order is not two's complement's */
  unsigned uin[100], uout[100];
  for (size_t i = 0; i < n; i++) uin[i] = (unsigned)val(&tu, rank_, i, 6) + (i % 2 ? 3000000000u : 0);
  MPI_Allreduce(uin, uout, (int)n, MPI_UNSIGNED, MPI_MIN, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = expect(&tu, OP_MIN, i, 6, cm->world, cm->size) + (i % 2 ? 3000000000ll : 0);
    if (uout[i] != want) fail("Allreduce unsigned min", i, uout[i], want);
  }
  /* A struct of an int and a double with MPI_SUM: no switch reduces mixed
   * elements, and Open MPI rejects predefined ops on derived datatypes, with
   * or without an interposer. */
  struct int_double {
    int i;
    double d;
  } sin2[10], sout2[10];
  int lens[2] = {1, 1};
  MPI_Aint displs[2] = {offsetof(struct int_double, i), offsetof(struct int_double, d)};
  MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, int_double;
  MPI_Type_create_struct(2, lens, displs, types, &int_double);
  MPI_Type_commit(&int_double);
  memset(sin2, 0, sizeof(sin2));
  MPI_Comm_set_errhandler(cm->c, MPI_ERRORS_RETURN);
  int rc = MPI_Allreduce(sin2, sout2, 10, int_double, MPI_SUM, cm->c);
  MPI_Comm_set_errhandler(cm->c, MPI_ERRORS_ARE_FATAL);
  checks_++;
  if (rc == MPI_SUCCESS) fail("Allreduce struct{int,double} sum is rejected", 0, rc, MPI_ERR_OP);
  MPI_Type_free(&int_double);
  /* A vector datatype: every other int */
  MPI_Datatype every_other;
  MPI_Type_vector((int)(n / 2), 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  /* ...in a broadcast (Open MPI rejects predefined ops on derived types) */
  for (size_t i = 0; i < n; i++) out[i] = cm->rank == 0 ? (int)i * 3 : -7;
  MPI_Bcast(out, 1, every_other, 0, cm->c);
  checks_++;
  for (size_t i = 0; i < n; i++) {
    long long want = cm->rank == 0 || i % 2 == 0 ? (long long)i * 3 : -7;
    if (out[i] != want) fail("Bcast vector datatype", i, out[i], want);
  }
  MPI_Type_free(&every_other);
}

/* A legal program that needs MPI's progress inside the collectives: world
 * rank 1 starts a send of 4 MiB (MPI's rendezvous protocol) to rank 2 and
 * enters the collective; rank 2 receives first. Rank 1's MPI moves the data
 * only while rank 1 is inside MPI, so an interposer that waits on the
 * switch without driving MPI's progress deadlocks here. */
static void pending_send_across(const struct comm* cm, int which) {
  if (size_ < 3) return;
  const int n = 1 << 20;
  int* big = malloc(sizeof(int) * n);
  int vals[8], out[8];
  for (int i = 0; i < 8; i++) vals[i] = rank_ + i;
  MPI_Request req = MPI_REQUEST_NULL;
  if (rank_ == 1) {
    for (int i = 0; i < n; i++) big[i] = i ^ 0x5a5a;
    MPI_Isend(big, n, MPI_INT, 2, 90 + which, MPI_COMM_WORLD, &req);
  } else if (rank_ == 2) {
    MPI_Recv(big, n, MPI_INT, 1, 90 + which, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  const char* what[] = {"Allreduce", "Bcast", "Barrier", "Allgather"};
  char label[80];
  snprintf(label, sizeof(label), "%s after a pending 4 MiB send", what[which]);
  if (which == 0) MPI_Allreduce(vals, out, 8, MPI_INT, MPI_SUM, cm->c);
  if (which == 1) MPI_Bcast(vals, 8, MPI_INT, 0, cm->c);
  if (which == 2) MPI_Barrier(cm->c);
  if (which == 3) {
    int* all = malloc(sizeof(int) * cm->size);
    MPI_Allgather(&rank_, 1, MPI_INT, all, 1, MPI_INT, cm->c);
    for (int r = 0; r < cm->size; r++)
      if (all[r] != cm->world[r]) fail(label, (size_t)r, all[r], cm->world[r]);
    free(all);
  }
  if (which == 0)
    for (int i = 0; i < 8; i++) {
      long long want = 0;
      for (int r = 0; r < cm->size; r++) want += cm->world[r] + i;
      if (out[i] != want) fail(label, (size_t)i, out[i], want);
    }
  if (rank_ == 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
  if (rank_ == 2)
    for (int i = 0; i < n; i++)
      if (big[i] != (i ^ 0x5a5a)) {
        fail(label, (size_t)i, big[i], i ^ 0x5a5a);
        break;
      }
  checks_++;
  free(big);
}

static void run_suite(const struct comm* cm, int full) {
  static const size_t kCounts[] = {1, 3, 241, 1000, 70001};
  size_t ncounts = full ? sizeof(kCounts) / sizeof(kCounts[0]) : 3;
  int salt = 0;
  for (size_t ti = 0; ti < NTYPES; ti++)
    for (int o = OP_SUM; o <= OP_MAX; o++)
      for (size_t c = 0; c < ncounts; c++) reductions(cm, &kTypes[ti], (enum op)o, kCounts[c], salt++);
  /* Broadcast: odd and even byte counts, basic and contiguous derived types. */
  MPI_Datatype five_ints;
  MPI_Type_contiguous(5, MPI_INT, &five_ints);
  MPI_Type_commit(&five_ints);
  for (int root = 0; root<cm->size; root += cm->size - 1> 0 ? cm->size - 1 : 1) {
    bcast_bytes(cm, 1, root, MPI_CHAR, 1);
    bcast_bytes(cm, 3, root, MPI_CHAR, 3);
    bcast_bytes(cm, 12, root, MPI_INT, 3);
    bcast_bytes(cm, 1001, root, MPI_BYTE, 1001);
    bcast_bytes(cm, 20 * 7, root, five_ints, 7);
    if (full) bcast_bytes(cm, 1 << 20, root, MPI_DOUBLE, (1 << 20) / sizeof(double));
  }
  MPI_Type_free(&five_ints);
  /* Allgather: odd and even blocks, in place. */
  allgather_bytes(cm, 3, 0);
  allgather_bytes(cm, 4, 0);
  allgather_bytes(cm, 1200, 0);
  allgather_bytes(cm, 1001, 0);
  allgather_bytes(cm, 13, 1);
  allgather_bytes(cm, 5, 1);
  allgather_bytes(cm, 400, 1);
  for (int i = 0; i < 10; i++) MPI_Barrier(cm->c);
  checks_++;
}

int main(int argc, char** argv) {
  int init_thread = 0, full = 1, hello = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--init-thread"))
      init_thread = 1;
    else if (!strcmp(argv[i], "--quick"))
      full = 0;
    else if (!strcmp(argv[i], "--hello"))
      hello = 1;
    else {
      fprintf(stderr, "usage: mpi_coverage [--init-thread] [--quick] [--hello]\n");
      return 2;
    }
  }
  if (init_thread) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (hello) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) printf("mpi_coverage: hello from %d ranks\n", size_);
    MPI_Finalize();
    return 0;
  }

  struct comm world = make_comm(MPI_COMM_WORLD, "world");
  for (int which = 0; which < 4; which++) pending_send_across(&world, which);
  run_suite(&world, full);
  unsupported(&world);

  MPI_Comm dup, reversed, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  struct comm d = make_comm(dup, "dup");
  run_suite(&d, 0);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size_ - rank_, &reversed);
  struct comm rv = make_comm(reversed, "reversed");
  run_suite(&rv, 0);
  MPI_Comm_split(MPI_COMM_WORLD, rank_ % 2, rank_, &half);
  struct comm h = make_comm(half, "half");
  run_suite(&h, 0);
  struct comm self = make_comm(MPI_COMM_SELF, "self");
  reductions(&self, &kTypes[0], OP_SUM, 10, 3);
  MPI_Comm_free(&half);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&dup);

  /* Totals over the ranks by point-to-point (not intercepted). */
  long mine[2] = {checks_, failures_}, all[2] = {checks_, failures_};
  if (rank_ == 0) {
    for (int r = 1; r < size_; r++) {
      long theirs[2];
      MPI_Recv(theirs, 2, MPI_LONG, r, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      all[0] += theirs[0];
      all[1] += theirs[1];
    }
    printf("mpi_coverage: ranks %d checks %ld failures %ld digest %016llx\n", size_, all[0], all[1],
           (unsigned long long)digest_);
    fflush(stdout);
  } else {
    MPI_Send(mine, 2, MPI_LONG, 0, 77, MPI_COMM_WORLD);
  }
  free(world.world);
  free(d.world);
  free(rv.world);
  free(h.world);
  free(self.world);
  MPI_Finalize();
  return failures_ ? 1 : 0;
}
