// SPDX-License-Identifier: Apache-2.0
// The boundary between the Open MPI component (component.c, which needs
// Open MPI's internal C headers) and the offload logic (coll.cc, which needs
// libinc's C++ API and only the public MPI C API). Handles cross as the
// public MPI types: an Open MPI communicator/datatype/op pointer is the
// MPI_Comm/MPI_Datatype/MPI_Op handle.
#pragma once

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Per-communicator offload state, owned by the communicator's module.
struct incin_comm;
struct incin_comm* incin_comm_new(void);
// Freeing MPI_COMM_WORLD's state ends the INC group (MPI_Finalize).
void incin_comm_free(struct incin_comm* state, MPI_Comm comm);
// Ends the INC group and writes the summary, once (component close).
void incin_shutdown(void);

// The collectives the switch may run; `m` is the module, handed back to
// the incin_prev_* functions on fallback.
int incin_allreduce(struct incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm);
int incin_reduce(struct incin_comm* st, void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt,
                 MPI_Op op, int root, MPI_Comm comm);
int incin_bcast(struct incin_comm* st, void* m, void* buf, int count, MPI_Datatype dt, int root,
                MPI_Comm comm);
int incin_barrier(struct incin_comm* st, void* m, MPI_Comm comm);
int incin_reduce_scatter_block(struct incin_comm* st, void* m, const void* sbuf, void* rbuf, int rcount,
                               MPI_Datatype dt, MPI_Op op, MPI_Comm comm);
int incin_allgather(struct incin_comm* st, void* m, const void* sbuf, int scount, MPI_Datatype sdt,
                    void* rbuf, int rcount, MPI_Datatype rdt, MPI_Comm comm);

// Implemented by component.c from Open MPI's own structures, so that no
// MPI call (and so no error handler) runs while coll/incin looks at a call
// it may pass on; every communicator handed to a coll module is an
// intracommunicator. How `comm`'s group relates to MPI_COMM_WORLD's:
// MPI_IDENT (same ranks in the same order), MPI_SIMILAR (same ranks, other
// order) or MPI_UNEQUAL.
int incin_comm_relation(MPI_Comm comm);
int incin_comm_rank(MPI_Comm comm);
int incin_comm_size(MPI_Comm comm);
// comm rank -> MPI_COMM_WORLD rank of every rank of `comm` into `out`
// (incin_comm_size entries); 0 on success.
int incin_comm_world_ranks(MPI_Comm comm, int* out);
// Whether the program asked for MPI_THREAD_MULTIPLE (and got it).
int incin_thread_multiple(void);
// The value of params.h's i-th parameter (coll_incin_<name>) if the user
// set it (command line, OMPI_MCA_* environment, a parameter file), else
// NULL: a parameter left at its default leaves its INCIN_* variable in
// charge. "" for one set to the empty string.
const char* incin_mca_value(int i);
// coll_incin_enable is false: at most an info line per rank saying so (from
// MPI_COMM_WORLD's comm_query, inside MPI_Init: no MPI call).
void incin_note_disabled(int rank);
// Whether MPI_Type_get_envelope may be called on `dt` (mpi_types.h
// Decodable): predefined, or derived with a constructor record; Open MPI's
// internal datatypes have none.
int incin_type_decodable(MPI_Datatype dt);
// Bytes of data of one item of `dt`; 0 for a null datatype.
uint64_t incin_type_size(MPI_Datatype dt);

// Implemented by component.c: the next component's functions saved for the
// communicator, and one turn of Open MPI's progress engine.
int incin_prev_allreduce(void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm);
int incin_prev_reduce(void* m, const void* sbuf, void* rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                      MPI_Comm comm);
int incin_prev_bcast(void* m, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm);
int incin_prev_barrier(void* m, MPI_Comm comm);
int incin_prev_reduce_scatter_block(void* m, const void* sbuf, void* rbuf, int rcount, MPI_Datatype dt,
                                    MPI_Op op, MPI_Comm comm);
int incin_prev_allgather(void* m, const void* sbuf, int scount, MPI_Datatype sdt, void* rbuf, int rcount,
                         MPI_Datatype rdt, MPI_Comm comm);
void incin_progress(void);

#ifdef __cplusplus
}
#endif
