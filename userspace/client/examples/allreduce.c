// SPDX-License-Identifier: Apache-2.0
/* A whole program on libinc's C API: joins a job, allreduces int32 and
 * float32 vectors and a broadcast, and checks every element against what
 * the sums must be. Exits 0 when every result is exact.
 *
 *   cc allreduce.c $(pkg-config --cflags --libs inc) -o inc-c-example
 *   inc-c-example --am HOST:PORT --job JOB --rank R --world N --iface IF
 *
 * mTLS to the AM: INCIN_TLS_CERT/KEY/CA (or INCIN_INSECURE=1); a job on an AM
 * with mTLS also needs INCIN_JOB_CREDENTIAL from the launcher. */
#include <inc/inc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COUNT = 100003 }; /* several hundred packets, an odd tail */

static int check(inc_status st, const char* what) {
  if (st == INC_OK) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, inc_status_name(st), inc_last_error());
  return 1;
}

int main(int argc, char** argv) {
  inc_comm_config config;
  inc_comm* comm = NULL;
  int32_t* ints = malloc(COUNT * sizeof(int32_t));
  float* floats = malloc(COUNT * sizeof(float));
  int32_t root_value[4] = {0, 0, 0, 0};
  long wrong = 0;
  uint32_t r, n;
  size_t i;
  int a;

  inc_comm_config_init(&config);
  config.iface = "eth0";
  for (a = 1; a + 1 < argc; a += 2) {
    if (!strcmp(argv[a], "--am"))
      config.am_address = argv[a + 1];
    else if (!strcmp(argv[a], "--job"))
      config.job_id = argv[a + 1];
    else if (!strcmp(argv[a], "--rank"))
      config.rank = (uint32_t)strtoul(argv[a + 1], NULL, 10);
    else if (!strcmp(argv[a], "--world"))
      config.world_size = (uint32_t)strtoul(argv[a + 1], NULL, 10);
    else if (!strcmp(argv[a], "--iface"))
      config.iface = argv[a + 1];
    else
      break;
  }
  if (a != argc || !ints || !floats) {
    fprintf(stderr,
            "usage: %s --am HOST:PORT --job JOB --rank R --world N [--iface IF]\n"
            "libinc %s\n",
            argv[0], inc_version());
    return 2;
  }
  if (check(inc_comm_create(&config, &comm), "inc_comm_create")) return 1;
  r = inc_comm_rank(comm);
  n = inc_comm_size(comm);

  /* Element i of rank r is (r + 1) * (i % 1000 - 500): the sum over the
   * ranks is n(n+1)/2 * (i % 1000 - 500), exact in int32 and float32. */
  for (i = 0; i < COUNT; i++) {
    ints[i] = (int32_t)(r + 1) * ((int32_t)(i % 1000) - 500);
    floats[i] = (float)ints[i] * 0.25f;
  }
  if (check(inc_allreduce(comm, ints, ints, COUNT, INC_INT32, INC_SUM), "inc_allreduce int32") ||
      check(inc_allreduce(comm, floats, floats, COUNT, INC_FLOAT32, INC_SUM), "inc_allreduce float32"))
    goto fail;
  for (i = 0; i < COUNT; i++) {
    int32_t want = (int32_t)(n * (n + 1) / 2) * ((int32_t)(i % 1000) - 500);
    wrong += ints[i] != want;
    wrong += floats[i] != (float)want * 0.25f;
  }
  if (r == n - 1) memcpy(root_value, (int32_t[4]){7, -7, 1 << 30, -(1 << 30)}, sizeof(root_value));
  if (check(inc_broadcast(comm, root_value, 4, INC_INT32, n - 1), "inc_broadcast") ||
      check(inc_barrier(comm), "inc_barrier"))
    goto fail;
  wrong +=
      root_value[0] != 7 || root_value[1] != -7 || root_value[2] != 1 << 30 || root_value[3] != -(1 << 30);
  printf("rank %u of %u: libinc %s, %d int32 + %d float32 allreduced, a broadcast from rank %u: %ld wrong\n",
         r, n, inc_version(), COUNT, COUNT, n - 1, wrong);
  inc_comm_destroy(comm);
  free(ints);
  free(floats);
  return wrong ? 1 : 0;
fail:
  inc_comm_destroy(comm);
  free(ints);
  free(floats);
  return 1;
}
