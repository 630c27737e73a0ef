// SPDX-License-Identifier: Apache-2.0
/* incmpi_allreduce_bench: an OSU-style MPI_Allreduce latency/bandwidth loop,
 * plain MPI (run it with and without libincmpi to compare).
 *
 * usage: incmpi_allreduce_bench [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR]
 *                               [-i ITERS] [-w WARMUP] [-t float|int|double]
 * Sizes go MIN, MIN*FACTOR, ... and MAX itself. Each size: WARMUP untimed calls, then
 * ITERS timed calls (fewer for big sizes: at least 3, at most ITERS, about
 * 64 MiB moved per rank); time per call = the slowest rank's average. The
 * inputs are small integers, so every element of the result is checked
 * exactly. Rank 0 prints one line per size:
 *   bytes  iters  avg_us  busbw_MBps  wrong
 * busbw = 2 (n-1)/n * bytes / time (the ring allreduce's wire bytes).
 * Exit 1 if any element was wrong.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_size(const char* s) {
  char* end;
  long v = strtol(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  return v;
}

int main(int argc, char** argv) {
  long min = 8, max = 16 << 20, factor = 4, iters = 100, warmup = 5;
  const char* type = "float";
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      min = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      max = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-i"))
      iters = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-w"))
      warmup = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-t"))
      type = argv[i + 1];
    else {
      if (rank == 0) fprintf(stderr, "unknown option %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Datatype dt = !strcmp(type, "int") ? MPI_INT : !strcmp(type, "double") ? MPI_DOUBLE : MPI_FLOAT;
  int esize = dt == MPI_DOUBLE ? 8 : 4;
  if (min < esize) min = esize;
  if (factor < 2) factor = 2;
  char* in = malloc(max + 8);
  char* out = malloc(max + 8);
  long total_wrong = 0;
  if (rank == 0)
    printf("# incmpi_allreduce_bench: %d ranks, %s sum\n#%11s %8s %12s %12s %8s\n", n, type, "bytes", "iters",
           "avg_us", "busbw_MBps", "wrong");
  for (long bytes = min; bytes <= max; bytes = bytes < max && bytes * factor > max ? max : bytes * factor) {
    long count = bytes / esize;
    for (long i = 0; i < count; i++) {
      long v = (rank + i) % 50;
      if (dt == MPI_INT)
        ((int*)in)[i] = (int)v;
      else if (dt == MPI_DOUBLE)
        ((double*)in)[i] = (double)v;
      else
        ((float*)in)[i] = (float)v;
    }
    long it = (64l << 20) / bytes;
    if (it > iters) it = iters;
    if (it < 3) it = 3;
    for (long w = 0; w < warmup; w++) MPI_Allreduce(in, out, (int)count, dt, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long k = 0; k < it; k++) MPI_Allreduce(in, out, (int)count, dt, MPI_SUM, MPI_COMM_WORLD);
    double per = (MPI_Wtime() - t0) / it, slowest = 0;
    long wrong = 0;
    for (long i = 0; i < count; i++) {
      long want = 0;
      for (int r = 0; r < n; r++) want += (r + i) % 50;
      double got = dt == MPI_INT ? ((int*)out)[i] : dt == MPI_DOUBLE ? ((double*)out)[i] : ((float*)out)[i];
      if (got != (double)want) wrong++;
    }
    /* Point-to-point, so the statistics do not go through the interposer. */
    if (rank == 0) {
      slowest = per;
      for (int r = 1; r < n; r++) {
        double theirs[2];
        MPI_Recv(theirs, 2, MPI_DOUBLE, r, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (theirs[0] > slowest) slowest = theirs[0];
        wrong += (long)theirs[1];
      }
      double busbw = 2.0 * (n - 1) / n * bytes / slowest / 1e6;
      printf("%12ld %8ld %12.1f %12.2f %8ld\n", bytes, it, slowest * 1e6, busbw, wrong);
      fflush(stdout);
      total_wrong += wrong;
    } else {
      double mine[2] = {per, (double)wrong};
      MPI_Send(mine, 2, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
      total_wrong += wrong;
    }
  }
  free(in);
  free(out);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
