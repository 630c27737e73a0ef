// SPDX-License-Identifier: Apache-2.0
// The Open MPI side of coll/incin: the component Open MPI finds by its
// exported name mca_coll_incin_component, its MCA parameters, and one
// module per intracommunicator that offers the collectives the switch may
// run. At enable time the module keeps the functions (and modules) that the
// lower-priority components put on the communicator, so that whatever the
// switch cannot do runs there (coll.cc decides; glue.h is the boundary).
#include <stdlib.h>

#include "glue.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/group/group.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/runtime/mpiruntime.h"
#include "ompi_config.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "params.h"

// Above tuned (30), hcoll (50) and han so that our functions are the
// communicator's, while theirs are the fallback.
static int incin_priority = 90;
// Off unless asked for, as coll/ucc: installed in Open MPI's own component
// directory, coll/incin is loaded by every MPI job on the host, and only a
// job that was given an AM and a credential can use it.
static bool incin_enable = false;

// The coll_incin_* parameters of params.h: their storage and their index
// in Open MPI's variable system (-1: not registered).
#define INCIN_MAX_PARAMS 32
static char* incin_param_storage[INCIN_MAX_PARAMS];
static int incin_param_var[INCIN_MAX_PARAMS];

typedef struct {
  mca_coll_base_module_t super;
  // The communicator's functions before this module, kept with a reference
  // on their module for as long as this module lives.
  mca_coll_base_module_allreduce_fn_t prev_allreduce;
  mca_coll_base_module_t* prev_allreduce_module;
  mca_coll_base_module_reduce_fn_t prev_reduce;
  mca_coll_base_module_t* prev_reduce_module;
  mca_coll_base_module_bcast_fn_t prev_bcast;
  mca_coll_base_module_t* prev_bcast_module;
  mca_coll_base_module_barrier_fn_t prev_barrier;
  mca_coll_base_module_t* prev_barrier_module;
  mca_coll_base_module_reduce_scatter_block_fn_t prev_reduce_scatter_block;
  mca_coll_base_module_t* prev_reduce_scatter_block_module;
  mca_coll_base_module_allgather_fn_t prev_allgather;
  mca_coll_base_module_t* prev_allgather_module;
  struct incin_comm* state;
  ompi_communicator_t* comm;
} incin_module_t;

static void incin_module_construct(incin_module_t* m) {
  m->prev_allreduce_module = NULL;
  m->prev_reduce_module = NULL;
  m->prev_bcast_module = NULL;
  m->prev_barrier_module = NULL;
  m->prev_reduce_scatter_block_module = NULL;
  m->prev_allgather_module = NULL;
  m->state = NULL;
  m->comm = NULL;
}

static void incin_module_destruct(incin_module_t* m) {
  if (m->state) incin_comm_free(m->state, m->comm);
  if (m->prev_allreduce_module) OBJ_RELEASE(m->prev_allreduce_module);
  if (m->prev_reduce_module) OBJ_RELEASE(m->prev_reduce_module);
  if (m->prev_bcast_module) OBJ_RELEASE(m->prev_bcast_module);
  if (m->prev_barrier_module) OBJ_RELEASE(m->prev_barrier_module);
  if (m->prev_reduce_scatter_block_module) OBJ_RELEASE(m->prev_reduce_scatter_block_module);
  if (m->prev_allgather_module) OBJ_RELEASE(m->prev_allgather_module);
}

static OBJ_CLASS_INSTANCE(incin_module_t, mca_coll_base_module_t, incin_module_construct,
                          incin_module_destruct);

// Until MPI_Init has completed and from MPI_Finalize on, every call goes to
// the saved functions: the INC group is formed with (and ends before) the
// MPI library's own collectives.
static int usable(void) {
  return ompi_mpi_state == OMPI_MPI_STATE_INIT_COMPLETED;
}

#define M(module) ((incin_module_t*)(module))

static int incin_coll_allreduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dt,
                                struct ompi_op_t* op, struct ompi_communicator_t* comm,
                                mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_allreduce(module, sbuf, rbuf, count, dt, op, comm);
  return incin_allreduce(M(module)->state, module, sbuf, rbuf, count, dt, op, comm);
}

static int incin_coll_reduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dt,
                             struct ompi_op_t* op, int root, struct ompi_communicator_t* comm,
                             mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_reduce(module, sbuf, rbuf, count, dt, op, root, comm);
  return incin_reduce(M(module)->state, module, sbuf, rbuf, count, dt, op, root, comm);
}

static int incin_coll_bcast(void* buf, int count, struct ompi_datatype_t* dt, int root,
                            struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_bcast(module, buf, count, dt, root, comm);
  return incin_bcast(M(module)->state, module, buf, count, dt, root, comm);
}

static int incin_coll_barrier(struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_barrier(module, comm);
  return incin_barrier(M(module)->state, module, comm);
}

static int incin_coll_reduce_scatter_block(const void* sbuf, void* rbuf, int rcount,
                                           struct ompi_datatype_t* dt, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_reduce_scatter_block(module, sbuf, rbuf, rcount, dt, op, comm);
  return incin_reduce_scatter_block(M(module)->state, module, sbuf, rbuf, rcount, dt, op, comm);
}

static int incin_coll_allgather(const void* sbuf, int scount, struct ompi_datatype_t* sdt, void* rbuf,
                                int rcount, struct ompi_datatype_t* rdt, struct ompi_communicator_t* comm,
                                mca_coll_base_module_t* module) {
  if (!usable()) return incin_prev_allgather(module, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
  return incin_allgather(M(module)->state, module, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
}

int incin_prev_allreduce(void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm) {
  return M(m)->prev_allreduce(sbuf, rbuf, count, dt, op, comm, M(m)->prev_allreduce_module);
}

int incin_prev_reduce(void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                      MPI_Comm comm) {
  return M(m)->prev_reduce(sbuf, rbuf, count, dt, op, root, comm, M(m)->prev_reduce_module);
}

int incin_prev_bcast(void* m, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  return M(m)->prev_bcast(buf, count, dt, root, comm, M(m)->prev_bcast_module);
}

int incin_prev_barrier(void* m, MPI_Comm comm) {
  return M(m)->prev_barrier(comm, M(m)->prev_barrier_module);
}

int incin_prev_reduce_scatter_block(void* m, const void* sbuf, void* rbuf, int rcount, MPI_Datatype dt,
                                    MPI_Op op, MPI_Comm comm) {
  return M(m)->prev_reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm,
                                         M(m)->prev_reduce_scatter_block_module);
}

int incin_prev_allgather(void* m, const void* sbuf, int scount, MPI_Datatype sdt, void* rbuf, int rcount,
                         MPI_Datatype rdt, MPI_Comm comm) {
  return M(m)->prev_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, M(m)->prev_allgather_module);
}

void incin_progress(void) {
  opal_progress();
}

int incin_comm_relation(MPI_Comm comm) {
  if (comm == &ompi_mpi_comm_world.comm) return MPI_IDENT;
  int result = MPI_UNEQUAL;
  if (OMPI_COMM_IS_INTER(comm) ||
      ompi_group_compare(comm->c_local_group, ompi_mpi_comm_world.comm.c_local_group, &result) !=
          OMPI_SUCCESS)
    return MPI_UNEQUAL;
  return result;
}

int incin_comm_rank(MPI_Comm comm) {
  return ompi_comm_rank(comm);
}

int incin_comm_size(MPI_Comm comm) {
  return ompi_comm_size(comm);
}

int incin_comm_world_ranks(MPI_Comm comm, int* out) {
  int n = ompi_comm_size(comm);
  int* ranks = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!ranks) return OMPI_ERR_OUT_OF_RESOURCE;
  for (int i = 0; i < n; i++) ranks[i] = i;
  int rc =
      ompi_group_translate_ranks(comm->c_local_group, n, ranks, ompi_mpi_comm_world.comm.c_local_group, out);
  free(ranks);
  return rc;
}

int incin_thread_multiple(void) {
  return ompi_mpi_thread_multiple ? 1 : 0;
}

const char* incin_mca_value(int i) {
  if (i < 0 || i >= INCIN_MAX_PARAMS || incin_param_var[i] < 0) return NULL;
  mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
  if (mca_base_var_get_value(incin_param_var[i], NULL, &source, NULL) != OPAL_SUCCESS ||
      source == MCA_BASE_VAR_SOURCE_DEFAULT)
    return NULL;
  return incin_param_storage[i] ? incin_param_storage[i] : "";
}

int incin_type_decodable(MPI_Datatype dt) {
  return dt && dt != MPI_DATATYPE_NULL && (ompi_datatype_is_predefined(dt) || dt->args != NULL);
}

uint64_t incin_type_size(MPI_Datatype dt) {
  size_t size = 0;
  if (!dt || dt == MPI_DATATYPE_NULL) return 0;
  ompi_datatype_type_size(dt, &size);
  return size;
}

// Called after every lower-priority module has put its functions on the
// communicator. It never fails: a module that fails here is dropped on this
// rank only, while the others might keep theirs and run the same call on
// the switch. A collective with no function below (a component list
// without basic) keeps no function of ours either, so it stays as plain
// Open MPI has it.
static int incin_module_enable(mca_coll_base_module_t* module, struct ompi_communicator_t* comm) {
  incin_module_t* m = M(module);
  mca_coll_base_comm_coll_t* c = comm->c_coll;
  m->comm = comm;
  m->state = incin_comm_new();
#define INCIN_SAVE(name)                                            \
  do {                                                              \
    if (!m->state || !c->coll_##name || !c->coll_##name##_module) { \
      m->super.coll_##name = NULL;                                  \
    } else {                                                        \
      m->prev_##name = c->coll_##name;                              \
      m->prev_##name##_module = c->coll_##name##_module;            \
      OBJ_RETAIN(m->prev_##name##_module);                          \
    }                                                               \
  } while (0)
  INCIN_SAVE(allreduce);
  INCIN_SAVE(reduce);
  INCIN_SAVE(bcast);
  INCIN_SAVE(barrier);
  INCIN_SAVE(reduce_scatter_block);
  INCIN_SAVE(allgather);
#undef INCIN_SAVE
  return OMPI_SUCCESS;
}

static int incin_init_query(bool enable_progress_threads, bool enable_mpi_threads) {
  (void)enable_progress_threads;
  (void)enable_mpi_threads;
  return OMPI_SUCCESS;
}

// Intercommunicators and single-rank communicators never get the module:
// the switch has nothing to do there and coll/inter and coll/self serve
// them unchanged.
static mca_coll_base_module_t* incin_comm_query(struct ompi_communicator_t* comm, int* priority) {
  if (!incin_enable) {
    if (comm == &ompi_mpi_comm_world.comm) incin_note_disabled(ompi_comm_rank(comm));
    return NULL;
  }
  if (incin_priority < 0 || OMPI_COMM_IS_INTER(comm) || ompi_comm_size(comm) < 2) return NULL;
  incin_module_t* m = OBJ_NEW(incin_module_t);
  if (!m) return NULL;
  *priority = incin_priority;
  m->super.coll_module_enable = incin_module_enable;
  m->super.coll_allreduce = incin_coll_allreduce;
  m->super.coll_reduce = incin_coll_reduce;
  m->super.coll_bcast = incin_coll_bcast;
  m->super.coll_barrier = incin_coll_barrier;
  m->super.coll_reduce_scatter_block = incin_coll_reduce_scatter_block;
  m->super.coll_allgather = incin_coll_allgather;
  return &m->super;
}

static int incin_register(void);
static int incin_close(void);

mca_coll_base_component_2_0_0_t mca_coll_incin_component = {
    .collm_version =
        {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "incin",
            MCA_BASE_MAKE_VERSION(component, 1, 0, 0),
            .mca_close_component = incin_close,
            .mca_register_component_params = incin_register,
        },
    .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
    .collm_init_query = incin_init_query,
    .collm_comm_query = incin_comm_query,
};

static int incin_register(void) {
  mca_base_component_var_register(
      &mca_coll_incin_component.collm_version, "priority",
      "Priority of coll/incin (above tuned's 30 to be used; negative: never used)", MCA_BASE_VAR_TYPE_INT,
      NULL, 0, 0, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY, &incin_priority);
  mca_base_component_var_register(&mca_coll_incin_component.collm_version, "enable",
                                  "Whether coll/incin is used: false (the default) leaves every collective "
                                  "to Open MPI's other coll components, as if it were not installed; true "
                                  "runs the collectives it can on the switch (the coll_incin_* parameters "
                                  "and INCIN_* variables configure that; docs/openmpi.md)",
                                  MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_2,
                                  MCA_BASE_VAR_SCOPE_READONLY, &incin_enable);
  // Strings, whatever the setting's type: the value goes through the same
  // parser as the INCIN_* variable (coll.cc).
  const int n = incin_param_count();
  for (int i = 0; i < INCIN_MAX_PARAMS; i++) {
    incin_param_var[i] = -1;
    if (i >= n) continue;
    const char* def = incin_param_default(i);
    incin_param_storage[i] = *def ? (char*)def : NULL;
    incin_param_var[i] =
        mca_base_component_var_register(&mca_coll_incin_component.collm_version, incin_param_name(i),
                                        incin_param_help(i), MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
                                        (mca_base_var_info_lvl_t)(OPAL_INFO_LVL_1 + incin_param_level(i) - 1),
                                        MCA_BASE_VAR_SCOPE_READONLY, &incin_param_storage[i]);
  }
  return n <= INCIN_MAX_PARAMS ? OMPI_SUCCESS : OMPI_ERR_NOT_SUPPORTED;
}

static int incin_close(void) {
  incin_shutdown();
  return OMPI_SUCCESS;
}
