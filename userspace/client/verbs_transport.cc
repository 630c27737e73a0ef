// SPDX-License-Identifier: Apache-2.0
#include "client/verbs_transport.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace inc::client {
namespace {

// RoCEv2 over IPv4 headers an IB MTU does not count: IPv4 + UDP + BTH + RETH
// + IMMDT + ICRC (the IB MTU limits the bytes after IMMDT).
constexpr uint32_t kRoceV2Overhead = 20 + 8 + 12 + 16 + 4 + 4;

uint32_t MtuBytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

ibv_mtu MtuEnum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

ibv_gid MappedGid(Ipv4 ip) {
  ibv_gid g{};
  g.raw[10] = 0xFF;
  g.raw[11] = 0xFF;
  uint32_t be = htonl(ip.host);
  std::memcpy(&g.raw[12], &be, 4);
  return g;
}

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() { list = ibv_get_device_list(&n); }
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
};

}  // namespace

// ---------------------------------------------------------------- mapping

Expected<VerbsWrite> WriteFromFrame(const uint8_t* f, size_t len) {
  if (len < INC_FRAME_OVERHEAD)
    return InvalidArgument("frame of " + std::to_string(len) + " bytes is too short");
  if (LoadBe16(f + 12) != 0x0800 || f[INC_OFF_IP] != 0x45 || f[INC_OFF_IP + 9] != 17 ||
      LoadBe16(f + INC_OFF_UDP + 2) != INC_ROCEV2_UDP_PORT)
    return InvalidArgument("not an IPv4 RoCEv2 frame");
  const uint8_t* bth = f + INC_OFF_BTH;
  if (bth[0] != INC_BTH_OPCODE_UC_WRITE_ONLY_IMM)
    return InvalidArgument("BTH opcode " + std::to_string(bth[0]) +
                           " is not UC RDMA WRITE ONLY WITH IMMEDIATE");
  const size_t pad = (bth[1] >> 4) & 0x3;
  VerbsWrite w;
  w.dest_qpn = LoadBe32(bth + 4) & INC_QPN_MASK;
  w.remote_va = LoadBe64(f + INC_OFF_RETH);
  w.rkey = LoadBe32(f + INC_OFF_RETH + 8);
  w.imm = LoadBe32(f + INC_OFF_IMMDT);
  w.offset = INC_OFF_INC;
  if (len < INC_OFF_INC + INC_ICRC_LEN + pad) return InvalidArgument("frame shorter than its pad");
  w.length = len - INC_OFF_INC - INC_ICRC_LEN - pad;
  const uint32_t dma = LoadBe32(f + INC_OFF_RETH + 12);
  if (dma != w.length)
    return InvalidArgument("RETH DMA length " + std::to_string(dma) + " != " + std::to_string(w.length) +
                           " bytes after IMMDT");
  return w;
}

Expected<size_t> FrameFromCompletion(const ResultAddressing& a, uint32_t imm, const uint8_t* data, size_t len,
                                     uint8_t* out, size_t capacity) {
  if (len < sizeof(inc_hdr))
    return InvalidArgument("RDMA write of " + std::to_string(len) + " bytes is shorter than an INC header");
  FrameSpec s;
  s.src_mac = a.switch_mac;
  s.dst_mac = a.member_mac;
  s.src_ip = a.switch_ip;
  s.dst_ip = a.member_ip;
  s.src_qpn = a.switch_qpn;
  s.dest_qpn = a.member_qpn;
  s.rkey = a.rkey;
  s.inc = DecodeIncHeader(data);
  if (s.inc.msg_id != imm)
    return InvalidArgument("result slot holds message " + std::to_string(s.inc.msg_id) +
                           ", the immediate says " + std::to_string(imm));
  s.va = a.va_base + uint64_t{s.inc.slot} * a.slot_stride;
  s.payload = data + sizeof(inc_hdr);
  s.payload_len = len - sizeof(inc_hdr);
  return BuildFrame(s, out, capacity);
}

uint32_t IbMtuForEthernetMtu(uint32_t eth_mtu) {
  if (eth_mtu <= kRoceV2Overhead) return 0;
  uint32_t room = eth_mtu - kRoceV2Overhead;
  for (uint32_t m : {4096u, 2048u, 1024u, 512u, 256u})
    if (m <= room) return m;
  return 0;
}

// ---------------------------------------------------------------- devices

Expected<RoceGid> FindRoceV2Gid(Ipv4 ip) {
  DeviceList devs;
  // No RDMA subsystem at all (ENOSYS) and no device are the same to a user.
  if (!devs.list)
    return Unavailable(std::string("no RDMA device (ibv_get_device_list: ") + std::strerror(errno) + ")");
  if (devs.n == 0) return Unavailable("no RDMA device (ibv_get_device_list found none)");
  const ibv_gid want = MappedGid(ip);
  std::string seen;
  for (int d = 0; d < devs.n; d++) {
    const char* name = ibv_get_device_name(devs.list[d]);
    ibv_context* ctx = ibv_open_device(devs.list[d]);
    if (!ctx) {
      seen += std::string(seen.empty() ? "" : ", ") + name + " (open failed)";
      continue;
    }
    ibv_device_attr da{};
    int ports = ibv_query_device(ctx, &da) == 0 ? da.phys_port_cnt : 1;
    for (int port = 1; port <= ports; port++) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, port, &pa) != 0) continue;
      if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
      for (int i = 0; i < pa.gid_tbl_len; i++) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(ctx, port, i, &e, 0) != 0) continue;
        if (e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
        if (std::memcmp(e.gid.raw, want.raw, 16) != 0) continue;
        RoceGid g;
        g.device = name;
        g.port = port;
        g.gid_index = i;
        g.active_mtu = MtuBytes(pa.active_mtu);
        ibv_close_device(ctx);
        return g;
      }
    }
    seen += std::string(seen.empty() ? "" : ", ") + name;
    ibv_close_device(ctx);
  }
  return NotFound("no RDMA device has a RoCEv2 GID for " + ip.ToString() + " (devices: " + seen + ")");
}

// ---------------------------------------------------------------- transport

Expected<std::unique_ptr<VerbsTransport>> VerbsTransport::Open(const VerbsOptions& options) {
  if (options.tx_buffers == 0 || options.rx_depth == 0 || options.result_slots == 0)
    return InvalidArgument("verbs: tx_buffers, rx_depth and result_slots must be > 0");
  if (options.slot_stride < sizeof(inc_hdr) + INC_MAX_PAYLOAD_BYTES)
    return InvalidArgument("verbs: slot_stride " + std::to_string(options.slot_stride) +
                           " is below the largest result (" +
                           std::to_string(sizeof(inc_hdr) + INC_MAX_PAYLOAD_BYTES) + " bytes)");
  std::unique_ptr<VerbsTransport> t(new VerbsTransport(options));
  Status s = t->Init();
  if (!s.ok()) return s.WithContext("verbs transport on " + options.iface);
  return t;
}

Status VerbsTransport::Init() {
  if (opt_.device.empty()) {
    auto g = FindRoceV2Gid(opt_.member_ip);
    if (!g.ok()) return g.status();
    gid_ = *g;
  } else {
    gid_.device = opt_.device;
    gid_.gid_index = opt_.gid_index;
  }
  if (opt_.gid_index >= 0) gid_.gid_index = opt_.gid_index;
  if (gid_.gid_index < 0) return InvalidArgument("a forced device needs a GID index");
  {
    DeviceList devs;
    for (int d = 0; d < devs.n && !ctx_; d++)
      if (gid_.device == ibv_get_device_name(devs.list[d])) ctx_ = ibv_open_device(devs.list[d]);
  }
  if (!ctx_) return NotFound("RDMA device " + gid_.device + " cannot be opened");
  ibv_port_attr pa{};
  if (ibv_query_port(ctx_, gid_.port, &pa) != 0) return ErrnoStatus("ibv_query_port", errno);
  gid_.active_mtu = MtuBytes(pa.active_mtu);
  if (pa.state != IBV_PORT_ACTIVE)
    return FailedPrecondition("RDMA device " + gid_.device + " port " + std::to_string(gid_.port) +
                              " is not ACTIVE");

  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) return ErrnoStatus("ibv_alloc_pd", errno);
  channel_ = ibv_create_comp_channel(ctx_);
  if (!channel_) return ErrnoStatus("ibv_create_comp_channel", errno);
  send_cq_ = ibv_create_cq(ctx_, static_cast<int>(opt_.tx_buffers), nullptr, nullptr, 0);
  if (!send_cq_) return ErrnoStatus("ibv_create_cq (send)", errno);
  recv_cq_ = ibv_create_cq(ctx_, static_cast<int>(opt_.rx_depth), nullptr, channel_, 0);
  if (!recv_cq_) return ErrnoStatus("ibv_create_cq (receive)", errno);

  ibv_qp_init_attr qa{};
  qa.send_cq = send_cq_;
  qa.recv_cq = recv_cq_;
  qa.qp_type = IBV_QPT_UC;
  qa.cap.max_send_wr = opt_.tx_buffers;
  qa.cap.max_recv_wr = opt_.rx_depth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.sq_sig_all = 1;
  qp_ = ibv_create_qp(pd_, &qa);
  if (!qp_) return ErrnoStatus("ibv_create_qp (UC)", errno);

  tx_.assign(size_t{opt_.tx_buffers} * opt_.max_frame, 0);
  results_.assign(size_t{opt_.result_slots} * opt_.slot_stride, 0);
  tx_mr_ = ibv_reg_mr(pd_, tx_.data(), tx_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!tx_mr_) return ErrnoStatus("ibv_reg_mr (send buffers)", errno);
  result_mr_ =
      ibv_reg_mr(pd_, results_.data(), results_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!result_mr_) return ErrnoStatus("ibv_reg_mr (result buffer)", errno);
  for (uint32_t i = opt_.tx_buffers; i-- > 0;) free_tx_.push_back(i);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(gid_.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) return ErrnoStatus("ibv_modify_qp INIT", rc);
  // Receive WRs may be posted in INIT: results can arrive the moment the
  // switch is programmed, before this side reaches RTR.
  INC_RETURN_IF_ERROR(PostReceives(opt_.rx_depth));
  LOG_INFO << "verbs: " << gid_.device << " port " << gid_.port << " GID index " << gid_.gid_index
           << " (RoCEv2, " << opt_.member_ip.ToString() << "), active MTU " << gid_.active_mtu << ", UC QPN "
           << qp_->qp_num;
  return Status::Ok();
}

VerbsTransport::~VerbsTransport() {
  if (qp_) ibv_destroy_qp(qp_);
  if (tx_mr_) ibv_dereg_mr(tx_mr_);
  if (result_mr_) ibv_dereg_mr(result_mr_);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

uint32_t VerbsTransport::qpn() const {
  return qp_->qp_num;
}
uint32_t VerbsTransport::rkey() const {
  return result_mr_->rkey;
}

Status VerbsTransport::Connect(const Mac& switch_mac, Ipv4 switch_ip, uint32_t switch_qpn, uint32_t pool_size,
                               uint32_t elems_per_packet) {
  if (pool_size == 0) return InvalidArgument("verbs: pool size 0");
  if (pool_size > opt_.result_slots)
    return FailedPrecondition("verbs: the tree's pool of " + std::to_string(pool_size) +
                              " slots exceeds the registered result buffer (" +
                              std::to_string(opt_.result_slots) + " slots); request a smaller pool");
  const uint32_t need = static_cast<uint32_t>(sizeof(inc_hdr)) + elems_per_packet * 4;
  if (need > gid_.active_mtu)
    return FailedPrecondition("verbs: " + std::to_string(elems_per_packet) +
                              " elements per packet need an IB MTU of " + std::to_string(need) +
                              " bytes but " + gid_.device + " runs " + std::to_string(gid_.active_mtu) +
                              " (raise the interface MTU or request fewer --elems)");
  if (FrameLength(size_t{elems_per_packet} * 4) > opt_.max_frame)
    return InvalidArgument("verbs: elems_per_packet " + std::to_string(elems_per_packet) +
                           " exceeds the frame buffer");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = MtuEnum(gid_.active_mtu);
  a.dest_qp_num = switch_qpn;
  a.rq_psn = 0;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = MappedGid(switch_ip);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_.gid_index);
  a.ah_attr.grh.hop_limit = opt_.hop_limit;
  a.ah_attr.grh.traffic_class = opt_.traffic_class;
  a.ah_attr.port_num = static_cast<uint8_t>(gid_.port);
  int rc =
      ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
  if (rc)
    return ErrnoStatus(
        "ibv_modify_qp RTR (switch " + switch_ip.ToString() + " QPN " + std::to_string(switch_qpn) + ")", rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (rc) return ErrnoStatus("ibv_modify_qp RTS", rc);
  pool_size_ = pool_size;
  addr_.switch_mac = switch_mac;
  addr_.switch_ip = switch_ip;
  addr_.switch_qpn = switch_qpn;
  addr_.member_mac = opt_.member_mac;
  addr_.member_ip = opt_.member_ip;
  addr_.member_qpn = qp_->qp_num;
  addr_.va_base = result_va();
  addr_.rkey = rkey();
  addr_.slot_stride = opt_.slot_stride;
  rebuilt_.assign(FrameLength(opt_.slot_stride), 0);
  connected_ = true;
  LOG_INFO << "verbs: UC QP " << qp_->qp_num << " connected to " << switch_ip.ToString() << " QPN "
           << switch_qpn << " (path MTU " << gid_.active_mtu << ")";
  return Status::Ok();
}

Status VerbsTransport::PostReceives(uint32_t n) {
  // Writes with immediate consume a receive WR but place no data through
  // it, so the WRs carry no scatter entries.
  std::vector<ibv_recv_wr> wrs(n);
  for (uint32_t i = 0; i < n; i++) {
    wrs[i] = {};
    wrs[i].wr_id = i;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  if (n == 0) return Status::Ok();
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_, wrs.data(), &bad);
  if (rc) return ErrnoStatus("ibv_post_recv", rc);
  rx_posted_ += n;
  return Status::Ok();
}

Status VerbsTransport::ReapSends() {
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(send_cq_, 32, wc);
    if (n < 0) return Internal("ibv_poll_cq (send) failed");
    for (int i = 0; i < n; i++) {
      free_tx_.push_back(static_cast<uint32_t>(wc[i].wr_id));
      tx_in_flight_--;
      if (wc[i].status != IBV_WC_SUCCESS)
        return Unavailable(std::string("verbs: send completion failed: ") + ibv_wc_status_str(wc[i].status) +
                           " (vendor error " + std::to_string(wc[i].vendor_err) + ")");
    }
    if (n < 32) return Status::Ok();
  }
}

uint8_t* VerbsTransport::TxBuffer() {
  if (free_tx_.empty()) {
    Status s = ReapSends();
    if (!s.ok()) {
      LOG_WARN << s.ToString();
    }
  }
  if (free_tx_.empty()) return nullptr;
  return tx_.data() + size_t{free_tx_.back()} * opt_.max_frame;
}

void VerbsTransport::TxCommit(size_t len) {
  committed_.push_back({free_tx_.back(), len});
  free_tx_.pop_back();
}

Status VerbsTransport::Flush() {
  if (committed_.empty()) return Status::Ok();
  if (!connected_) return FailedPrecondition("verbs: send before the QP is connected");
  std::vector<ibv_send_wr> wrs(committed_.size());
  std::vector<ibv_sge> sges(committed_.size());
  size_t bytes = 0;
  for (size_t i = 0; i < committed_.size(); i++) {
    const Committed& c = committed_[i];
    uint8_t* frame = tx_.data() + size_t{c.buf} * opt_.max_frame;
    auto w = WriteFromFrame(frame, c.len);
    if (!w.ok()) {
      for (const Committed& r : committed_) free_tx_.push_back(r.buf);
      committed_.clear();
      return w.status().WithContext("verbs: engine frame");
    }
    if (w->dest_qpn != addr_.switch_qpn) {
      for (const Committed& r : committed_) free_tx_.push_back(r.buf);
      committed_.clear();
      return Internal("verbs: frame for QPN " + std::to_string(w->dest_qpn) + " but the QP is connected to " +
                      std::to_string(addr_.switch_qpn));
    }
    sges[i].addr = reinterpret_cast<uint64_t>(frame + w->offset);
    sges[i].length = static_cast<uint32_t>(w->length);
    sges[i].lkey = tx_mr_->lkey;
    ibv_send_wr& wr = wrs[i];
    wr = {};
    wr.wr_id = c.buf;
    wr.sg_list = &sges[i];
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    wr.imm_data = htonl(w->imm);
    wr.wr.rdma.remote_addr = w->remote_va;
    wr.wr.rdma.rkey = w->rkey;
    wr.next = i + 1 < committed_.size() ? &wrs[i + 1] : nullptr;
    bytes += w->length;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, wrs.data(), &bad);
  stats_.tx_kicks++;
  if (rc) {
    // Everything from `bad` on was not posted: its buffers are free again.
    size_t first_bad = bad ? static_cast<size_t>(bad - wrs.data()) : 0;
    for (size_t i = first_bad; i < committed_.size(); i++) free_tx_.push_back(committed_[i].buf);
    tx_in_flight_ += static_cast<uint32_t>(first_bad);
    stats_.tx_packets += first_bad;
    stats_.tx_busy++;
    committed_.clear();
    if (rc == ENOMEM) return Status::Ok();  // send queue full: the engine retransmits later
    return ErrnoStatus("ibv_post_send", rc);
  }
  tx_in_flight_ += static_cast<uint32_t>(committed_.size());
  stats_.tx_packets += committed_.size();
  stats_.tx_bytes += bytes;
  committed_.clear();
  return Status::Ok();
}

Status VerbsTransport::WaitForCompletion(int timeout_ms) {
  if (!cq_armed_) {
    if (ibv_req_notify_cq(recv_cq_, 0)) return Internal("ibv_req_notify_cq failed");
    cq_armed_ = true;
  }
  pollfd p{channel_->fd, POLLIN, 0};
  int rc = poll(&p, 1, timeout_ms);
  if (rc < 0) return errno == EINTR ? Status::Ok() : ErrnoStatus("poll (completion channel)", errno);
  if (rc > 0) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
    cq_armed_ = false;
  }
  return Status::Ok();
}

Expected<size_t> VerbsTransport::Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) {
  INC_RETURN_IF_ERROR(ReapSends());
  ibv_wc wc[64];
  size_t delivered = 0;
  bool waited = false;
  while (delivered < max_frames) {
    int want = static_cast<int>(std::min<size_t>(64, max_frames - delivered));
    int n = ibv_poll_cq(recv_cq_, want, wc);
    if (n < 0) return Internal("ibv_poll_cq (receive) failed");
    if (n == 0) {
      if (delivered > 0 || waited || timeout_ms <= 0) break;
      // Arm, then look again: a completion that raced the arming is seen
      // by the second poll instead of being waited for.
      INC_RETURN_IF_ERROR(WaitForCompletion(0));
      n = ibv_poll_cq(recv_cq_, want, wc);
      if (n == 0) {
        INC_RETURN_IF_ERROR(WaitForCompletion(timeout_ms));
        waited = true;
        continue;
      }
      if (n < 0) return Internal("ibv_poll_cq (receive) failed");
    }
    rx_posted_ -= static_cast<uint32_t>(n);
    for (int i = 0; i < n; i++) {
      const ibv_wc& c = wc[i];
      if (c.status != IBV_WC_SUCCESS)
        return Unavailable(std::string("verbs: receive completion failed: ") + ibv_wc_status_str(c.status) +
                           " (vendor error " + std::to_string(c.vendor_err) + ")");
      stats_.rx_packets++;
      stats_.rx_bytes += c.byte_len;
      delivered++;
      if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(c.wc_flags & IBV_WC_WITH_IMM) ||
          c.byte_len > opt_.slot_stride) {
        stats_.rx_dropped++;
        handler(rebuilt_.data(), 0);  // counted by the engine as malformed
        continue;
      }
      const uint32_t imm = ntohl(c.imm_data);
      const uint8_t* data = results_.data() + ResultOffset(imm, pool_size_, opt_.slot_stride);
      auto len = FrameFromCompletion(addr_, imm, data, c.byte_len, rebuilt_.data(), rebuilt_.size());
      if (!len.ok()) {
        LOG_DEBUG << "verbs: " << len.status().ToString();
        handler(rebuilt_.data(), 0);
        continue;
      }
      handler(rebuilt_.data(), *len);
    }
  }
  if (rx_posted_ < opt_.rx_depth / 2) INC_RETURN_IF_ERROR(PostReceives(opt_.rx_depth - rx_posted_));
  return delivered;
}

}  // namespace inc::client
