/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* incin INC switch data path: XDP ingress on every switch port, and the
 * devmap egress program that addresses each replicated result. The logic
 * lives in the headers by role (parse, aggregate, replicate, csum, stats). */
#include "pipeline.h"

SEC("xdp.frags")
int inc_ingress_prog(struct xdp_md *ctx)
{
	return inc_ingress(ctx);
}

SEC("xdp.frags/devmap")
int inc_egress_prog(struct xdp_md *ctx)
{
	return inc_egress(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
