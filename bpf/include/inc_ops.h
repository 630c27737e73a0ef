/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The reduction operators of the wire format, one table for every layer:
 * inc_wire.h makes `enum inc_op` of it, libinc its ReduceOp, names and
 * checks, the data path its capability mask. Macros only, so that a header
 * with its own op enum (libinc's public C API) can include it too. */
#ifndef INC_OPS_H
#define INC_OPS_H

/* The reduction operators, one row each, from which every layer takes its
 * names and checks (libinc's ReduceOp, the front ends' maps, the switch's
 * capability mask): X(NAME, CamelName, wire value, short name, integer only).
 * Bitwise ops work on the lanes' bits, so they take the integer types only
 * (the MPI and torch rule) and need no widening: INT32 and INT64 share one
 * loop over 64-bit words. A new op is a row here, its lane loop in
 * aggregate.h, and its entry in each front end's own vocabulary. */
#define INC_OP_TABLE(X)                                                                            \
	X(SUM, Sum, 1, "sum", 0)                                                                   \
	X(MIN, Min, 2, "min", 0)                                                                   \
	X(MAX, Max, 3, "max", 0)                                                                   \
	X(BAND, Band, 4, "band", 1)                                                                \
	X(BOR, Bor, 5, "bor", 1)                                                                   \
	X(BXOR, Bxor, 6, "bxor", 1)

/* Every op of the table as 1 << value bits (the data path's capability). */
#define INC_OP_BIT_OF(name, camel, value, text, int_only) | (1u << (value))
#define INC_OPS_ALL					  (0u INC_OP_TABLE(INC_OP_BIT_OF))

#endif /* INC_OPS_H */
