/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* incin switch data path: XDP ingress on every switch port, and the
 * devmap egress program that addresses each replicated result. Ingress runs
 * the stages in order: INC aggregation (pipeline.h), then for other traffic
 * the credit gate of flows across WAN links (credit.h), then best-path
 * forwarding (forward.h); what none of them takes goes to the kernel. The
 * logic lives in the headers by role (parse, aggregate, replicate, csum,
 * stats, credit, forward). */
#include "pipeline.h"
#include "credit.h"
#include "forward.h"

SEC("xdp.frags")
int inc_ingress_prog(struct xdp_md *ctx)
{
	int r = inc_ingress(ctx);

	if (r != INC_NOT_INC)
		return r;
	r = inc_credit_gate(ctx);
	if (r != INC_CREDIT_NOT_MINE)
		return r;
	return inc_bpt_forward(ctx);
}

SEC("xdp.frags/devmap")
int inc_egress_prog(struct xdp_md *ctx)
{
	return inc_egress(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
