// SPDX-License-Identifier: Apache-2.0
#include "dp_harness.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/net.h"

namespace inc::bench {
namespace {

Status Run(const std::string& command) {
  int status = std::system((command + " >/dev/null 2>&1").c_str());
  if (status != 0) return Internal("'" + command + "' failed (status " + std::to_string(status) + ")");
  return Status::Ok();
}

}  // namespace

Status EnterPrivateNetns() {
  if (unshare(CLONE_NEWNET) != 0) return ErrnoStatus("unshare(CLONE_NEWNET)", errno);
  return Run("ip link set lo up");
}

Status AddVethPair(const std::string& name) {
  static int next_subnet = 0;  // the data path sources its frames from the port's address
  INC_RETURN_IF_ERROR(Run("ip link add " + name + " type veth peer name " + name + "p"));
  INC_RETURN_IF_ERROR(Run("ip addr add 10.200." + std::to_string(next_subnet++) + ".1/24 dev " + name));
  INC_RETURN_IF_ERROR(Run("ip link set " + name + " up"));
  return Run("ip link set " + name + "p up");
}

Expected<RunResult> TestRun(int prog_fd, const uint8_t* frame, size_t len, uint32_t repeat,
                            size_t out_capacity, bool live, uint32_t ingress_ifindex) {
  RunResult r;
  xdp_md ctx{};
  ctx.data_end = static_cast<uint32_t>(len);
  ctx.ingress_ifindex = ingress_ifindex;
  if (live) out_capacity = 0;
  r.out.resize(out_capacity);
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  opts.data_in = frame;
  opts.data_size_in = static_cast<uint32_t>(len);
  if (out_capacity) {
    opts.data_out = r.out.data();
    opts.data_size_out = static_cast<uint32_t>(out_capacity);
  }
  opts.repeat = static_cast<int>(repeat);
  if (live) opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
  if (ingress_ifindex) {
    opts.ctx_in = &ctx;
    opts.ctx_size_in = sizeof(ctx);
  }
  if (bpf_prog_test_run_opts(prog_fd, &opts) != 0) return ErrnoStatus("BPF_PROG_TEST_RUN", errno);
  r.retval = opts.retval;
  r.duration_ns = opts.duration;
  r.out.resize(out_capacity ? opts.data_size_out : 0);
  return r;
}

Ipv4 ChildIp(int rank) {
  return Ipv4{0x0A400000u + 0x100u * static_cast<uint32_t>(rank) + 2};  // 10.64.<rank>.2
}
uint32_t ChildSwitchQpn(int rank) {
  return 0x200 + static_cast<uint32_t>(rank);
}
Ipv4 SwitchIp() {
  return Ipv4{0x0A400001u};
}

dp::TreeSpec MakeTree(const TreeParams& p) {
  dp::TreeSpec t;
  t.tree_id = p.tree_id;
  t.key = p.key;
  t.role = p.role;
  t.pool_size = p.pool_size;
  t.max_elems = p.max_elems;
  t.slot_base = 0;
  t.dtype_mask =
      static_cast<uint16_t>(INC_BIT(INC_DTYPE_INT32) | INC_BIT(INC_DTYPE_FP32) | INC_BIT(INC_DTYPE_INT64));
  t.op_mask = static_cast<uint8_t>(INC_OPS_ALL);
  t.coll_mask = static_cast<uint8_t>(INC_BIT(INC_COLL_ALLREDUCE) | INC_BIT(INC_COLL_REDUCE) |
                                     INC_BIT(INC_COLL_BROADCAST) | INC_BIT(INC_COLL_BARRIER));
  for (int r = 0; r < p.children; r++) {
    dp::Endpoint e;
    e.port = static_cast<size_t>(r) < p.ports.size() ? p.ports[r] : "";
    e.peer_mac.bytes = {0x02, 0x64, 0, 0, static_cast<uint8_t>(r >> 8), static_cast<uint8_t>(r)};
    e.peer_ip = ChildIp(r);
    e.peer_qpn = 0x1000 + static_cast<uint32_t>(r);
    e.switch_qpn = ChildSwitchQpn(r);
    e.rkey = 0x7000 + static_cast<uint32_t>(r);
    e.va_base = 0x7f0000000000ull + (uint64_t{static_cast<uint32_t>(r)} << 24);
    e.slot_stride = 4096;
    e.member_lo = static_cast<uint16_t>(r);
    e.member_hi = static_cast<uint16_t>(r + 1);
    t.children.push_back(e);
  }
  if (p.role == INC_ROLE_LEAF) {
    dp::Endpoint parent;
    parent.port = p.parent_port;
    parent.peer_mac.bytes = {0x02, 0x65, 0, 0, 0, 1};
    parent.peer_ip = Ipv4{0x0A410001u};  // 10.65.0.1
    parent.peer_qpn = 0x3000;
    parent.switch_qpn = 0x3001;
    parent.member_lo = 0;
    parent.member_hi = static_cast<uint16_t>(p.children);
    t.parent = parent;
    t.rank_at_parent = 3;
  }
  return t;
}

Expected<std::vector<uint8_t>> ContributionFrame(const TreeParams& tree, const Contribution& c) {
  FrameSpec s;
  s.src_mac.bytes = {0x02, 0x64, 0, 0, static_cast<uint8_t>(c.rank >> 8), static_cast<uint8_t>(c.rank)};
  s.dst_mac.bytes = {0x02, 0x53, 0, 0, 0, 1};
  s.src_ip = ChildIp(c.rank);
  s.dst_ip = SwitchIp();
  // INC frames are addressed to the switch: the address of the rank's port
  // (the endpoint's switch_ip), else a frame is transit traffic.
  if (c.rank >= 0 && static_cast<size_t>(c.rank) < tree.ports.size()) {
    auto port = GetInterfaceInfo(tree.ports[c.rank]);
    if (port.ok() && port->ip.host != 0) s.dst_ip = port->ip;
  }
  s.src_qpn = 0x1000 + static_cast<uint32_t>(c.rank);
  s.dest_qpn = ChildSwitchQpn(c.rank);
  s.psn = c.msg & INC_PSN_MASK;
  s.va = 0x5000000;
  s.rkey = 0x77;
  s.inc.flags = c.flags;
  s.inc.collective = c.collective;
  s.inc.dtype = c.dtype;
  s.inc.op = c.op;
  s.inc.tree_id = tree.tree_id;
  s.inc.rank = static_cast<uint16_t>(c.rank);
  s.inc.msg_id = c.msg;
  s.inc.slot = static_cast<uint16_t>(c.msg % tree.pool_size);
  s.inc.count = static_cast<uint16_t>(c.count);
  s.inc.key = tree.key;
  s.inc.exponent = c.exponent;
  s.payload = static_cast<const uint8_t*>(c.payload);
  s.payload_len = c.payload_len;
  return BuildFrame(s);
}

uint32_t IngressOf(const TreeParams& tree, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= tree.ports.size()) return 0;
  return if_nametoindex(tree.ports[rank].c_str());
}

Expected<int> AttachedProgFd(const std::string& port) {
  unsigned ifindex = if_nametoindex(port.c_str());
  if (ifindex == 0) return NotFound("no interface " + port);
  __u32 id = 0;
  int err = bpf_xdp_query_id(static_cast<int>(ifindex), 0, &id);
  if (err) return ErrnoStatus("bpf_xdp_query_id(" + port + ")", -err);
  if (id == 0) return FailedPrecondition("no XDP program attached to " + port);
  int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return ErrnoStatus("bpf_prog_get_fd_by_id", errno);
  return fd;
}

Expected<int> IngressProgFd(const dp::Datapath& datapath, const std::string& port) {
  auto attached = AttachedProgFd(port);
  int fd = datapath.ingress_prog_fd();
  if (fd < 0) return attached;
  if (attached.ok()) {
    bpf_prog_info a{}, b{};
    __u32 la = sizeof(a), lb = sizeof(b);
    bool same = bpf_obj_get_info_by_fd(fd, &a, &la) == 0 && bpf_obj_get_info_by_fd(*attached, &b, &lb) == 0 &&
                a.id == b.id;
    close(*attached);
    if (!same)
      return FailedPrecondition("the program attached to " + port + " is not Datapath::ingress_prog_fd()");
  }
  return fd;
}

const char* XdpActionName(uint32_t action) {
  switch (action) {
    case XDP_ABORTED: return "XDP_ABORTED";
    case XDP_DROP: return "XDP_DROP";
    case XDP_PASS: return "XDP_PASS";
    case XDP_TX: return "XDP_TX";
    case XDP_REDIRECT: return "XDP_REDIRECT";
    default: return "XDP_?";
  }
}

}  // namespace inc::bench
