// SPDX-License-Identifier: Apache-2.0
// libinc's rdma-core transport: one ibverbs UC QP per member, connected to
// the switch-side QPN the AM assigned, behind the same PacketIo interface as
// the AF_XDP socket, so the message engine (window, retransmission, error
// reporting) runs unchanged on top of it.
//
// The engine builds whole RoCEv2 frames (docs/wire-format.md). Toward the
// switch, the bytes after IMMDT (INC header + payload) become the payload of
// an RDMA WRITE WITH IMMEDIATE whose RETH VA/R_Key and immediate are taken
// from the frame; the NIC (or rxe) writes the headers and the ICRC itself.
// From the switch, results land as RDMA WRITEs with immediate in the
// registered result buffer at va_base + slot * slot_stride; the receive CQE
// carries the message id as immediate and the written length. The adapter
// turns such a completion back into the frame the switch sent (addresses,
// QPNs, INC header, payload, ICRC), which the engine validates as usual.
//
// Device choice: the RDMA device, port and GID index whose GID table has a
// RoCEv2 entry for the interface's IPv4 address (::ffff:a.b.c.d), so in a
// network namespace only the device bound to that namespace's interface
// matches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/packet_io.h"
#include "common/frame.h"
#include "common/net.h"
#include "common/status.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_mr;
struct ibv_comp_channel;

namespace inc::client {

// ---------------------------------------------------------------- mapping
// Pure functions between frames and verbs work requests/completions; they
// need no device and are unit-tested.

// The RDMA WRITE WITH IMMEDIATE that carries an engine-built frame.
struct VerbsWrite {
  uint32_t dest_qpn = 0;   // BTH DestQP (must be the QP's connected peer)
  uint64_t remote_va = 0;  // RETH VA
  uint32_t rkey = 0;       // RETH R_Key
  uint32_t imm = 0;        // IMMDT, host order (the message id)
  size_t offset = 0;       // where the write's data starts in the frame
  size_t length = 0;       // INC header + payload (= RETH DMA length)
};

// Checks the frame is a UC RDMA WRITE ONLY WITH IMMEDIATE whose RETH DMA
// length equals the bytes between IMMDT and ICRC, and maps it.
Expected<VerbsWrite> WriteFromFrame(const uint8_t* frame, size_t len);

// Who a result frame is from and to: the switch and this member.
struct ResultAddressing {
  Mac switch_mac;
  Ipv4 switch_ip;
  uint32_t switch_qpn = 0;
  Mac member_mac;
  Ipv4 member_ip;
  uint32_t member_qpn = 0;
  uint64_t va_base = 0;
  uint32_t rkey = 0;
  uint32_t slot_stride = 0;
};

// The slot a result for message `imm` lands in (the switch writes
// va_base + slot * stride with slot = the INC header's slot = msg id mod pool).
inline size_t ResultOffset(uint32_t imm, uint32_t pool_size, uint32_t slot_stride) {
  return size_t{imm % pool_size} * slot_stride;
}

// Rebuilds the frame a completion stands for: `data` is what the switch
// wrote (INC header + payload, `len` bytes, the CQE's byte_len), `imm` the
// CQE's immediate. Fails (kMalformed for the engine's counters) when the
// write is shorter than an INC header or its message id differs from the
// immediate (the slot was overwritten by a later result).
Expected<size_t> FrameFromCompletion(const ResultAddressing& a, uint32_t imm, const uint8_t* data, size_t len,
                                     uint8_t* out, size_t capacity);

// IB path MTU (256..4096) an Ethernet MTU carries for RoCEv2 over IPv4:
// the largest IB MTU not above mtu - (IPv4 20 + UDP 8 + BTH 12 + RETH 16 +
// IMMDT 4 + ICRC 4).
uint32_t IbMtuForEthernetMtu(uint32_t eth_mtu);

// ---------------------------------------------------------------- devices

struct RoceGid {
  std::string device;  // e.g. "rxe0", "mlx5_0"
  uint32_t port = 1;
  int gid_index = -1;
  uint32_t active_mtu = 0;  // IB MTU in bytes
};

// The RDMA device/port/GID index with a RoCEv2 GID for ip; NOT_FOUND (with
// what was seen) when there is none, UNAVAILABLE when there is no device.
Expected<RoceGid> FindRoceV2Gid(Ipv4 ip);

// ---------------------------------------------------------------- transport

struct VerbsOptions {
  std::string iface;   // for messages only; the GID is looked up by ip
  Ipv4 member_ip;      // selects the device (RoCEv2 GID ::ffff:ip)
  Mac member_mac;      // stamped on rebuilt result frames
  std::string device;  // force a device (then gid_index must be set or found on it)
  int gid_index = -1;  // force a GID index
  uint32_t tx_buffers = 256;
  uint32_t rx_depth = 1024;      // receive WRs kept posted (one per expected result)
  uint32_t result_slots = 1024;  // result buffer capacity in slots (>= the tree's pool size)
  uint32_t slot_stride = sizeof(inc_hdr) + INC_MAX_PAYLOAD_BYTES;   // bytes per result slot
  uint32_t max_frame = INC_FRAME_OVERHEAD + INC_MAX_PAYLOAD_BYTES;  // engine frame buffer size
  uint8_t traffic_class = INC_IP_TOS_DEFAULT;
  uint8_t hop_limit = INC_IP_TTL_DEFAULT;
};

class VerbsTransport : public PacketIo {
 public:
  // Opens the device, creates PD, CQs, the UC QP (in INIT) and registers the
  // TX and result buffers. The QPN, rkey and result buffer address exist from
  // here on (they go into JoinGroup); the QP is connected later.
  static Expected<std::unique_ptr<VerbsTransport>> Open(const VerbsOptions& options);
  ~VerbsTransport() override;
  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  uint32_t qpn() const;
  uint32_t rkey() const;
  uint64_t result_va() const { return reinterpret_cast<uint64_t>(results_.data()); }
  uint32_t slot_stride() const { return opt_.slot_stride; }
  const RoceGid& gid() const { return gid_; }

  // Moves the QP to RTR/RTS toward the switch's QPN at switch_ip and fixes
  // the tree parameters results are decoded with. elems_per_packet (four-byte
  // elements) must fit the port's path MTU.
  Status Connect(const Mac& switch_mac, Ipv4 switch_ip, uint32_t switch_qpn, uint32_t pool_size,
                 uint32_t elems_per_packet);

  size_t MaxFrame() const override { return opt_.max_frame; }
  uint8_t* TxBuffer() override;
  void TxCommit(size_t len) override;
  Status Flush() override;
  Expected<size_t> Receive(const FrameHandler& handler, int timeout_ms, size_t max_frames) override;
  PacketIoStats Stats() const override { return stats_; }

 private:
  explicit VerbsTransport(const VerbsOptions& o) : opt_(o) {}
  Status Init();
  Status PostReceives(uint32_t n);
  Status ReapSends();
  Status WaitForCompletion(int timeout_ms);

  VerbsOptions opt_;
  RoceGid gid_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* tx_mr_ = nullptr;
  ibv_mr* result_mr_ = nullptr;
  std::vector<uint8_t> tx_;       // tx_buffers x max_frame
  std::vector<uint8_t> results_;  // result_slots x slot_stride
  std::vector<uint32_t> free_tx_;
  struct Committed {
    uint32_t buf;
    size_t len;
  };
  std::vector<Committed> committed_;
  uint32_t tx_in_flight_ = 0;
  uint32_t rx_posted_ = 0;
  bool connected_ = false;
  bool cq_armed_ = false;
  uint32_t pool_size_ = 1;
  ResultAddressing addr_;
  std::vector<uint8_t> rebuilt_;  // one frame rebuilt from a completion
  PacketIoStats stats_;
};

}  // namespace inc::client
