// SPDX-License-Identifier: Apache-2.0
/* mpi_late_rank: a plain MPI program (it knows nothing about incin) in which
 * one rank is late for a collective, to check that every rank handles the
 * outcome alike. With MPI_ERRORS_RETURN on MPI_COMM_WORLD it makes these
 * calls and records on each rank whether each succeeded:
 *
 *   0  MPI_Allreduce of 64 ints                 (everyone on time)
 *   1  MPI_Allreduce of 64 ints                 (rank LATE sleeps SLEEP_MS first)
 *   2  MPI_Allreduce of 64 ints
 *   3  MPI_Bcast of 64 ints from rank 0
 *   4  MPI_Allreduce of one int                 (4 bytes: below INCIN_MPI_MIN_BYTES=8)
 *   5  MPI_Allreduce of 64 ints on a split into halves
 *   6  MPI_Allreduce of one int with MPI_PROD   (an op no switch computes)
 *
 * then checks every successful result, sends its record to rank 0 with
 * point-to-point messages (no collective is involved in the verdict), and
 * rank 0 requires every rank's record to be the same and to match the
 * expected one: all calls succeed (plain MPI, or an offload that waits for
 * a late rank as MPI does), or with --expect-failure calls 1-3 fail on every
 * rank (an offload whose collective timeout is shorter than the lateness:
 * the late call fails everywhere, and so does every later call that would
 * have run on the switch) while calls 4-6, which run on MPI's own
 * algorithms, succeed everywhere.
 *
 * usage: mpi_late_rank SLEEP_MS [LATE] [--expect-failure]
 * Rank 0 prints "mpi_late_rank: ranks N record R agreed yes|no expected
 * yes|no"; exit 0 iff both are yes and every result was right.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCALLS 7
#define COUNT 64

static int rank_, size_, wrong_;

static void expect_sum(const int* got, int count, int base, MPI_Comm comm, int rc) {
  if (rc != MPI_SUCCESS) return;
  int n;
  MPI_Comm_size(comm, &n);
  MPI_Group g, wg;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  for (int i = 0; i < count; i++) {
    long want = 0;
    for (int r = 0; r < n; r++) {
      int w;
      MPI_Group_translate_ranks(g, 1, &r, wg, &w);
      want += (long)(w + 1) * (base + i);
    }
    if (got[i] != want && wrong_++ < 5)
      fprintf(stderr, "mpi_late_rank: rank %d: element %d is %d, want %ld\n", rank_, i, got[i], want);
  }
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (argc < 2 || size_ < 2) {
    if (rank_ == 0) fprintf(stderr, "usage: mpi_late_rank SLEEP_MS [LATE] [--expect-failure] (2+ ranks)\n");
    MPI_Finalize();
    return 2;
  }
  const long sleep_ms = atol(argv[1]);
  int late = size_ - 1, expect_failure = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--expect-failure") == 0) {
      expect_failure = 1;
    } else {
      late = atoi(argv[i]) % size_;
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank_ < size_ / 2, rank_, &half);
  MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);

  int in[COUNT], out[COUNT], ok[NCALLS];
  for (int c = 0; c < NCALLS; c++) {
    int rc;
    for (int i = 0; i < COUNT; i++) in[i] = (rank_ + 1) * (c * 100 + i);
    memset(out, 0, sizeof(out));
    switch (c) {
      case 1:
        if (rank_ == late) {
          struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
          nanosleep(&ts, NULL);
        }
        /* fall through */
      case 0:
      case 2:
        rc = MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        expect_sum(out, COUNT, c * 100, MPI_COMM_WORLD, rc);
        break;
      case 3:
        for (int i = 0; i < COUNT; i++) out[i] = rank_ == 0 ? 300 + i : -1;
        rc = MPI_Bcast(out, COUNT, MPI_INT, 0, MPI_COMM_WORLD);
        for (int i = 0; rc == MPI_SUCCESS && i < COUNT; i++)
          if (out[i] != 300 + i && wrong_++ < 5)
            fprintf(stderr, "mpi_late_rank: rank %d: bcast[%d] %d\n", rank_, i, out[i]);
        break;
      case 4:
        rc = MPI_Allreduce(in, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        expect_sum(out, 1, c * 100, MPI_COMM_WORLD, rc);
        break;
      case 5:
        rc = MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, half);
        expect_sum(out, COUNT, c * 100, half, rc);
        break;
      default: {
        int p = rank_ + 2, prod = 0;
        long want = 1;
        rc = MPI_Allreduce(&p, &prod, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD);
        for (int r = 0; r < size_; r++) want *= r + 2;
        if (rc == MPI_SUCCESS && prod != want && wrong_++ < 5)
          fprintf(stderr, "mpi_late_rank: rank %d: prod %d want %ld\n", rank_, prod, want);
        break;
      }
    }
    ok[c] = rc == MPI_SUCCESS;
  }

  /* The verdict by point-to-point messages only. */
  int agreed = 1, matches = 1, any_wrong = wrong_ != 0;
  char record[NCALLS + 1];
  for (int c = 0; c < NCALLS; c++) record[c] = ok[c] ? 'S' : 'F';
  record[NCALLS] = 0;
  if (rank_ == 0) {
    for (int r = 1; r < size_; r++) {
      int theirs[NCALLS + 1];
      MPI_Recv(theirs, NCALLS + 1, MPI_INT, r, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (memcmp(theirs, ok, sizeof(ok)) != 0) {
        agreed = 0;
        char other[NCALLS + 1];
        for (int c = 0; c < NCALLS; c++) other[c] = theirs[c] ? 'S' : 'F';
        other[NCALLS] = 0;
        fprintf(stderr, "mpi_late_rank: rank %d's record %s differs from rank 0's %s\n", r, other, record);
      }
      any_wrong |= theirs[NCALLS];
    }
    const char* want = expect_failure ? "SFFFSSS" : "SSSSSSS";
    matches = strcmp(record, want) == 0;
    printf("mpi_late_rank: ranks %d record %s agreed %s expected %s (want %s) results %s\n", size_, record,
           agreed ? "yes" : "no", matches ? "yes" : "no", want, any_wrong ? "wrong" : "right");
  } else {
    int mine[NCALLS + 1];
    memcpy(mine, ok, sizeof(ok));
    mine[NCALLS] = any_wrong;
    MPI_Send(mine, NCALLS + 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
  }
  int verdict = agreed && matches && !any_wrong;
  if (rank_ == 0) {
    for (int r = 1; r < size_; r++) MPI_Send(&verdict, 1, MPI_INT, r, 79, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&verdict, 1, MPI_INT, 0, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&half);
  MPI_Finalize();
  return verdict ? 0 : 1;
}
