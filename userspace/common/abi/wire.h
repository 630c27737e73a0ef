// SPDX-License-Identifier: Apache-2.0
// C++ view of bpf/include/inc_wire.h: pins every size and offset of the wire
// headers an INC frame carries.
#pragma once

#include <cstddef>

#include "inc_wire.h"

static_assert(sizeof(inc_bth) == 12, "BTH is 12 bytes");
static_assert(sizeof(inc_reth) == 16, "RETH is 16 bytes");
static_assert(sizeof(inc_immdt) == 4, "IMMDT is 4 bytes");
static_assert(sizeof(inc_hdr) == 24, "INC header is 24 bytes");
static_assert(offsetof(inc_hdr, tree_id) == 4);
static_assert(offsetof(inc_hdr, rank) == 6);
static_assert(offsetof(inc_hdr, msg_id) == 8);
static_assert(offsetof(inc_hdr, slot) == 12);
static_assert(offsetof(inc_hdr, count) == 14);
static_assert(offsetof(inc_hdr, key) == 16);
static_assert(offsetof(inc_hdr, exponent) == 20);
static_assert(offsetof(inc_hdr, root_rank) == 21);
static_assert(offsetof(inc_hdr, aux) == 22);
static_assert(offsetof(inc_reth, rkey) == 8);
static_assert(offsetof(inc_reth, dma_len) == 12);
static_assert(INC_OFF_PAYLOAD == INC_OFF_INC + sizeof(inc_hdr));
// aux: a 14-bit threshold code and two flag bits; the trailer has one bit
// per element of the largest payload.
static_assert((INC_AUX_CODE_MASK | INC_AUX_TRAILER | INC_AUX_UNCERTIFIED) == 0xFFFF);
static_assert((INC_AUX_CODE_MASK & (INC_AUX_TRAILER | INC_AUX_UNCERTIFIED)) == 0);
static_assert(INC_CERT_TRAILER_BYTES == 96 && INC_CERT_TRAILER_WORDS * 64 == INC_MAX_PAYLOAD_BYTES / 4,
              "certificate trailer: one bit per four-byte element");
static_assert(INC_MAX_WIRE_PAYLOAD_BYTES == INC_MAX_PAYLOAD_BYTES + INC_CERT_TRAILER_BYTES);
static_assert(INC_OFF_INC == INC_OFF_IMMDT + sizeof(inc_immdt));
static_assert(INC_OFF_IMMDT == INC_OFF_RETH + sizeof(inc_reth));
static_assert(INC_OFF_RETH == INC_OFF_BTH + sizeof(inc_bth));
