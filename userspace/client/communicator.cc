// SPDX-License-Identifier: Apache-2.0
#include "client/communicator.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "client/am_session.h"
#include "client/block_op.h"
#include "client/engine.h"
#include "client/float_sum.h"
#include "client/gather_sum.h"
#include "client/host_stage.h"
#include "client/numerics.h"
#include "client/reduction_plan.h"
#include "client/verbs_transport.h"
#include "client/xdp_io.h"
#include "client/xsk_socket.h"
#include "common/frame.h"
#include "common/job_credential.h"
#include "common/log.h"
#include "common/net.h"
#include "common/settings.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc::client {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kInt32: return "int32";
    case DataType::kFloat32: return "float32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat64: return "float64";
  }
  return "?";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
#define INC_REDUCE_OP_NAME(name, camel, value, text, int_only) \
  case ReduceOp::k##camel: return text;
    INC_OP_TABLE(INC_REDUCE_OP_NAME)
#undef INC_REDUCE_OP_NAME
  }
  return "?";
}

bool ReduceOpIntegerOnly(ReduceOp op) {
  switch (op) {
#define INC_REDUCE_OP_INT(name, camel, value, text, int_only) \
  case ReduceOp::k##camel: return int_only;
    INC_OP_TABLE(INC_REDUCE_OP_INT)
#undef INC_REDUCE_OP_INT
  }
  return false;
}

bool ParseDataType(const std::string& s, DataType* out) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"int32", DataType::kInt32},       {"float32", DataType::kFloat32}, {"float", DataType::kFloat32},
      {"int64", DataType::kInt64},       {"float16", DataType::kFloat16}, {"half", DataType::kFloat16},
      {"bfloat16", DataType::kBFloat16}, {"float64", DataType::kFloat64}, {"double", DataType::kFloat64}};
  for (const auto& [name, t] : kNames)
    if (s == name) {
      *out = t;
      return true;
    }
  return false;
}

bool ParseReduceOp(const std::string& s, ReduceOp* out) {
  static const std::pair<const char*, ReduceOp> kNames[] = {
#define INC_REDUCE_OP_PAIR(name, camel, value, text, int_only) {text, ReduceOp::k##camel},
      INC_OP_TABLE(INC_REDUCE_OP_PAIR)
#undef INC_REDUCE_OP_PAIR
  };
  for (const auto& [name, op] : kNames)
    if (s == name) {
      *out = op;
      return true;
    }
  return false;
}

namespace {

// Every rank passes the same op and type, so every rank fails alike.
Status CheckOpType(ReduceOp op, DataType t) {
  if (ReduceOpIntegerOnly(op) && t != DataType::kInt32 && t != DataType::kInt64)
    return InvalidArgument(std::string("op ") + ReduceOpName(op) +
                           " needs an integer type (int32, int64), not " + DataTypeName(t));
  return Status::Ok();
}

}  // namespace

namespace {

// The wire type of float64 SUM lanes (int64 block fixed point).
constexpr uint8_t kFp64SumWire = INC_DTYPE_FP64;
// Largest gathered vector of one pass of a float sum's gathered blocks.
constexpr size_t kGatherChunkBytes = 4u << 20;

uint32_t DefaultQpn() {
  // Unique per process on a host (pids fit in 22 bits), never 0 or 1.
  return 0x800000u | (static_cast<uint32_t>(getpid()) & 0x7FFFFFu);
}

}  // namespace

Expected<std::string> ResolveTransport(const std::string& requested, const std::string& iface,
                                       std::string* why) {
  if (requested == "afxdp" || requested == "verbs" || requested == "xdp") {
    if (why) *why = "requested";
    return requested;
  }
  if (requested != "auto")
    return InvalidArgument("transport must be 'xdp', 'afxdp', 'verbs' or 'auto', not '" + requested + "'");
  auto info = GetInterfaceInfo(iface);
  if (!info.ok()) return info.status();
  auto gid = FindRoceV2Gid(info->ip);
  if (gid.ok()) {
    if (why) *why = gid->device + " has RoCEv2 GID index " + std::to_string(gid->gid_index) + " for " + iface;
    return std::string("verbs");
  }
  if (why) *why = gid.status().message();
  return std::string("xdp");
}

Expected<Assignment> AssignmentFromJson(const std::string& json) {
  inc::v1::MemberAssignment a;
  auto st = google::protobuf::util::JsonStringToMessage(json, &a);
  if (!st.ok()) return InvalidArgument("MemberAssignment JSON: " + std::string(st.message()));
  return AssignmentFromProto(a);
}

std::string CommunicatorStatus::ToJson() const {
  std::ostringstream o;
  o << "{\"rank\":" << rank << ",\"world_size\":" << world_size << ",\"iface\":" << JsonQuote(iface)
    << ",\"member_ip\":\"" << member_ip << "\",\"member_mac\":\"" << member_mac
    << "\",\"member_qpn\":" << member_qpn << ",\"transport\":\"" << transport
    << "\",\"rdma_device\":" << JsonQuote(rdma_device) << ",\"tree_id\":" << assignment.tree_id
    << ",\"pool_size\":" << assignment.pool_size << ",\"elems_per_packet\":" << assignment.elems_per_packet
    << ",\"member_index\":" << assignment.member_index << ",\"rank_at_switch\":" << assignment.rank_at_switch
    << ",\"switch\":" << JsonQuote(assignment.switch_name) << ",\"switch_ip\":\"" << assignment.switch_ip
    << "\",\"switch_qpn\":" << assignment.switch_qpn << ",\"tree_state\":\"" << tree_state << "\""
    << ",\"tx_packets\":" << tx_packets << ",\"tx_bytes\":" << tx_bytes << ",\"rx_packets\":" << rx_packets
    << ",\"rx_bytes\":" << rx_bytes << ",\"messages\":" << messages
    << ",\"retransmissions\":" << retransmissions << ",\"overflow_results\":" << overflow_results
    << ",\"saturated_blocks\":" << saturated_blocks << ",\"gathered_blocks\":" << gathered_blocks
    << ",\"uncertified_blocks\":" << uncertified_blocks
    << ",\"exponent_guess_misses\":" << exponent_guess_misses << ",\"operations\":" << operations
    << ",\"failed_operations\":" << failed_operations << ",\"heartbeats_failed\":" << heartbeats_failed
    << ",\"srtt_us\":" << static_cast<uint64_t>(srtt_us) << ",\"rto_us\":" << static_cast<uint64_t>(rto_us)
    << ",\"tx_kicks\":" << tx_kicks << ",\"tx_busy\":" << tx_busy << ",\"cq_bogus\":" << cq_bogus
    << ",\"rx_dropped\":" << rx_dropped << ",\"rx_ring_full\":" << rx_ring_full
    << ",\"rx_fill_empty\":" << rx_fill_empty << ",\"rejects\":{";
  bool first = true;
  for (const auto& [k, v] : rejects) {
    o << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  }
  o << "}}";
  return o.str();
}

class Communicator::Impl {
 public:
  CommunicatorOptions opt;
  Assignment asg;
  InterfaceInfo ifinfo;
  uint32_t qpn = 0;
  std::string transport;            // resolved: "xdp", "afxdp" or "verbs"
  VerbsTransport* verbs = nullptr;  // = io when transport is verbs
  std::unique_ptr<PacketIo> io;
  std::unique_ptr<Engine> engine;
  // The membership at the AM; none without an AM address, with a given
  // assignment, or on a local rank other than its host's member.
  std::unique_ptr<AmSession> am;
  uint64_t saturated = 0;
  uint64_t gathered_blocks = 0;     // float-sum blocks added from gathered values
  uint64_t uncertified_blocks = 0;  // of which the switch could not certify
  uint64_t guess_misses = 0;        // float sums whose guessed exponents did not fit some block
  ExponentGuesses guesses;          // float-sum exponents of earlier calls
  LaneChoice lanes;                 // float32 sums on 32- or 64-bit lanes, per count
  // The job's rank and world; with several ranks per host opt.rank and
  // opt.world_size number the hosts (this rank's leader is the member).
  uint32_t g_rank = 0, g_world = 1;
  std::unique_ptr<HostStage> stage;     // several ranks per host
  std::unique_ptr<HostNet> host_net;    // the leader's tree member for stage
  std::unique_ptr<HostCollectives> hc;  // set: collectives go through stage
  std::chrono::steady_clock::time_point last_op_end = std::chrono::steady_clock::now();

  ~Impl() {
    if (!am) return;
    // Heartbeats keep running while lingering.
    am->SetLingering();
    if (am->joined() && engine && !engine->aborted()) {
      auto since = std::chrono::steady_clock::now() - last_op_end;
      auto linger = std::chrono::milliseconds(opt.leave_linger_ms);
      if (since < linger) std::this_thread::sleep_for(linger - since);
    }
    am->Close();
  }

  uint8_t MemberIndexOf(uint32_t rank) const {
    if (rank < asg.member_index_of_rank.size()) return static_cast<uint8_t>(asg.member_index_of_rank[rank]);
    return static_cast<uint8_t>(rank);
  }

  Status CheckRoot(uint32_t root) const {
    if (root >= g_world)
      return InvalidArgument("root " + std::to_string(root) + " >= world size " + std::to_string(g_world));
    return Status::Ok();
  }

  // Broadcast and typed reduction by global root rank, through the host
  // stage when there is one.
  Status Bcast(const void* send, void* recv, size_t bytes, uint32_t root) {
    if (hc) return hc->Broadcast(send, recv, bytes, root);
    return BroadcastBytes(send, recv, bytes, root);
  }
  Status TRed(uint8_t collective, const void* send, void* recv, size_t count, DataType t, ReduceOp op,
              uint32_t root, bool want) {
    if (hc) return hc->Reduce(collective, send, recv, count, t, op, root, want);
    if (collective == INC_COLL_ALLREDUCE)
      return TypedReduction(collective, send, recv, count, t, op, 0, true);
    return TypedReduction(collective, send, recv, count, t, op, MemberIndexOf(root), want);
  }

  static bool Allowed(const std::vector<uint32_t>& set, uint32_t v) {
    return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
  }

  Status Run(const BlockSpec& spec) {
    // Fail fast instead of timing out on contributions the switch drops.
    if (!Allowed(asg.collectives, spec.collective))
      return FailedPrecondition("tree " + std::to_string(asg.tree_id) + " does not offer collective " +
                                std::to_string(spec.collective));
    bool reduces = spec.collective == INC_COLL_ALLREDUCE || spec.collective == INC_COLL_REDUCE;
    if (spec.collective != INC_COLL_BARRIER && !Allowed(asg.dtypes, spec.wire_dtype))
      return FailedPrecondition("tree " + std::to_string(asg.tree_id) + " does not compute data type " +
                                std::to_string(spec.wire_dtype));
    if (reduces && !Allowed(asg.ops, spec.op))
      return FailedPrecondition("tree " + std::to_string(asg.tree_id) + " does not compute op " +
                                std::to_string(spec.op));
    BlockOperation op(spec);
    Status s = engine->Run(&op);
    last_op_end = std::chrono::steady_clock::now();
    saturated += op.saturated();
    return s;
  }

  BlockSpec Base(uint8_t collective, uint8_t wire, uint8_t op, uint64_t count) const {
    BlockSpec s;
    s.collective = collective;
    s.wire_dtype = wire;
    s.op = op;
    s.count = count;
    s.elems4 = asg.elems_per_packet;
    return s;
  }

  // Reduce runs as an AllReduce when the options say so (non-roots then
  // ignore the elements).
  void MapReduceMode(uint8_t* collective, uint8_t* root_index) const {
    if (*collective == INC_COLL_REDUCE && opt.reduce_mode == "allreduce" &&
        Allowed(asg.collectives, INC_COLL_ALLREDUCE)) {
      *collective = INC_COLL_ALLREDUCE;
      *root_index = 0;
    }
  }

  // A rooted or unrooted reduction of the lanes PlanReduction gives as
  // they are: int32/int64 (any op) or float32 MIN/MAX (the switch orders
  // them). recv may be null when this rank gets no data (Reduce non-root).
  Status Reduction(uint8_t collective, DataType t, ReduceOp op, const void* send, void* recv, uint64_t count,
                   uint8_t root_index, bool recv_data) {
    MapReduceMode(&collective, &root_index);
    const ReductionPlan plan = PlanReduction(t, op);
    const bool as_is =
        plan.form == LaneForm::kRaw || (plan.form == LaneForm::kFloatKey32 && t == DataType::kFloat32);
    if (!as_is) return Internal(std::string(DataTypeName(t)) + " " + ReduceOpName(op) + " is not raw lanes");
    BlockSpec s = Base(collective, plan.wire, static_cast<uint8_t>(op), count);
    s.root_index = root_index;
    s.send = send;
    s.recv = recv;
    s.recv_data = recv_data && recv != nullptr;
    return Run(s);
  }

  // A float SUM (client/float_sum.h): block fixed point for ordinary
  // blocks, with the exponents agreed by a pre-pass or guessed from the
  // last call of the same type and count (ExponentGuesses); gathered in
  // rank order where the switch cannot certify an element or a block holds
  // inf/NaN; every block gathered when no certificate exists (world <= 2)
  // or when every rank's elements fit one packet (one round trip).
  Status FloatSum(uint8_t collective, DataType t, const void* send, void* recv, uint64_t count,
                  uint8_t root_index, bool recv_data) {
    const uint32_t world = opt.world_size;
    const size_t esize = DataTypeSize(t);
    recv_data = recv_data && recv != nullptr;
    if (!Allowed(asg.dtypes, INC_DTYPE_INT32) || !Allowed(asg.ops, INC_OP_SUM) ||
        !Allowed(asg.ops, INC_OP_MAX))
      return FailedPrecondition("tree " + std::to_string(asg.tree_id) +
                                " cannot run float sums: they need INT32 SUM and MAX besides the float type");
    FixedSum f;
    f.t = t;
    // float32 on 64-bit lanes when the tree takes them and LaneChoice says
    // so (data whose blocks 32-bit lanes cannot certify).
    const bool wide = t == DataType::kFloat32 && Allowed(asg.dtypes, kFp64SumWire) && lanes.Wide(count);
    f.ft = wide ? DataType::kFloat64 : FixedPointType(t);
    f.lane = f.ft == DataType::kFloat64 ? 8 : 4;
    f.per = ElemsPerPacket(asg.elems_per_packet, f.lane);
    f.count = count;
    f.blocks = PacketCount(count, f.per);
    f.code = CertificateCode(t, f.ft, world);
    f.collective = collective;
    f.root_index = root_index;
    f.recv_data = recv_data;
    const bool small = opt.small_sum == "gather" && GatherSumFits(world, count, esize, asg.elems_per_packet);
    std::vector<uint32_t> gathered;
    if (f.code == 0 || small) {
      gathered.resize(f.blocks);
      for (uint64_t b = 0; b < f.blocks; b++) gathered[b] = static_cast<uint32_t>(b);
    } else {
      // The fixed point's input: float32 and float64 as they are, 16-bit
      // types widened (exactly) to float32, float32 on 64-bit lanes to
      // float64; their results narrowed from out32 / out64.
      std::vector<float> wide32, out32;
      f.in = send;
      if (t == DataType::kFloat16 || t == DataType::kBFloat16) {
        const auto* h = static_cast<const uint16_t*>(send);
        wide32.resize(count);
        for (uint64_t i = 0; i < count; i++)
          wide32[i] = t == DataType::kFloat16 ? F16ToF32(h[i]) : Bf16ToF32(h[i]);
        f.in = wide32.data();
        if (recv_data) out32.resize(count);
      }
      f.out = out32.empty() ? recv : out32.data();
      f.own.resize(f.blocks);
      for (uint64_t b = 0; b < f.blocks; b++) {
        PacketRange r = PacketElements(b, count, f.per);
        // float32 on 64-bit lanes: float32's exponent (widening is exact).
        f.own[b] = t == DataType::kFloat64
                       ? BlockExponentF64(static_cast<const double*>(f.in) + r.first, r.count)
                       : BlockExponentF32(static_cast<const float*>(f.in) + r.first, r.count);
      }
      std::vector<uint32_t> all(f.blocks);
      for (uint64_t b = 0; b < f.blocks; b++) all[b] = static_cast<uint32_t>(b);
      const uint64_t uncertified_before = uncertified_blocks;
      if (const std::vector<int32_t>* guess = guesses.Use(t, f.ft, count)) {
        // One round trip: the data pass with the guessed exponents; blocks
        // some rank could not quantise come back OVERFLOW and are redone
        // with a pre-pass of their own.
        f.agreed = *guess;
        std::vector<uint32_t> redo;
        INC_RETURN_IF_ERROR(FixedPass(&f, all, /*speculative=*/true, &gathered, &redo));
        if (!redo.empty()) {
          guess_misses++;
          guesses.Forget(t, f.ft, count);
          INC_RETURN_IF_ERROR(AgreeAndSum(&f, redo, &gathered));
        }
      } else {
        INC_RETURN_IF_ERROR(AgreeAndSum(&f, all, &gathered));
        // On 64-bit lanes the guesses keep two bits of margin (data whose
        // blocks grow by up to 4x from call to call, as gradients do, need
        // no redo), and a block that was all zero guesses the call's
        // largest exponent (a ReLU unit that was dead for a batch is
        // usually alive in the next; zeros quantise exactly at any
        // exponent). Those bits are a few of the ~37 the certificate has to
        // spare on 64-bit lanes.
        std::vector<int32_t> next = f.agreed;
        if (wide) {
          int32_t largest = kZeroBlockExponent;
          for (int32_t& e : next)
            if (e != kZeroBlockExponent && e < kGatherBlockExponent) largest = std::max(largest, e += 2);
          for (int32_t& e : next)
            if (e == kZeroBlockExponent) e = largest;
        }
        guesses.Store(t, f.ft, count, std::move(next));
      }
      if (t == DataType::kFloat32)
        lanes.Record(count, wide, f.blocks, uncertified_blocks - uncertified_before);
      std::sort(gathered.begin(), gathered.end());
      if (!out32.empty()) {
        // Narrow what the fixed point delivered, not the gathered blocks:
        // their inputs, which recv may hold (in place), are still needed.
        for (uint64_t b = 0; b < f.blocks; b++) {
          if (std::binary_search(gathered.begin(), gathered.end(), static_cast<uint32_t>(b))) continue;
          PacketRange r = PacketElements(b, count, f.per);
          auto* o = static_cast<uint16_t*>(recv);
          for (uint64_t i = r.first; i < r.first + r.count; i++)
            o[i] = t == DataType::kFloat16 ? F32ToF16(out32[i]) : F32ToBf16(out32[i]);
        }
      }
    }
    gathered_blocks += gathered.size();
    for (const GatherChunk& c : ChunkGather(gathered, count, f.per, world, esize, kGatherChunkBytes)) {
      std::vector<int32_t> mine(c.Lanes(esize)), all(recv_data ? c.Lanes(esize) : 0);
      GatherChunkContribution(c, count, f.per, world, opt.rank, esize, send, mine.data());
      INC_RETURN_IF_ERROR(Reduction(collective, DataType::kInt32, ReduceOp::kSum, mine.data(),
                                    recv_data ? all.data() : nullptr, mine.size(), root_index, recv_data)
                              .WithContext("gathered float sum"));
      if (recv_data) GatherChunkSum(c, t, count, f.per, world, all.data(), recv);
    }
    return Status::Ok();
  }

  // One float SUM's fixed-point state.
  struct FixedSum {
    DataType t, ft;
    size_t lane = 4;
    uint32_t per = 0;
    uint64_t count = 0, blocks = 0;
    uint16_t code = 0;
    uint8_t collective = INC_COLL_ALLREDUCE, root_index = 0;
    bool recv_data = false;
    const void* in = nullptr;          // float32 or float64 values
    void* out = nullptr;               // float32 or float64 results (or null)
    std::vector<int32_t> own, agreed;  // per block
  };

  // The pre-pass for `blocks` (their agreed exponents into f->agreed), then
  // their data pass.
  Status AgreeAndSum(FixedSum* f, const std::vector<uint32_t>& blocks, std::vector<uint32_t>* gathered) {
    std::vector<int32_t> local(blocks.size()), agreed(blocks.size());
    for (size_t k = 0; k < blocks.size(); k++) local[k] = f->own[blocks[k]];
    INC_RETURN_IF_ERROR(Reduction(INC_COLL_ALLREDUCE, DataType::kInt32, ReduceOp::kMax, local.data(),
                                  agreed.data(), blocks.size(), 0, true)
                            .WithContext("exponent pre-pass"));
    f->agreed.resize(f->blocks);
    for (size_t k = 0; k < blocks.size(); k++) f->agreed[blocks[k]] = agreed[k];
    return FixedPass(f, blocks, /*speculative=*/false, gathered, nullptr);
  }

  // The data pass of `blocks` at f->agreed: zero blocks are +0 without a
  // message (unless speculative: a rank whose block is not zero must be
  // able to say so), inf/NaN blocks and uncertified ones join *gathered,
  // blocks that came back OVERFLOW (speculative only) go to *redo.
  Status FixedPass(FixedSum* f, const std::vector<uint32_t>& blocks, bool speculative,
                   std::vector<uint32_t>* gathered, std::vector<uint32_t>* redo) {
    std::vector<uint32_t> fast;
    std::vector<uint8_t> mark(speculative ? f->blocks : 0, 0);
    for (uint32_t b : blocks) {
      const int32_t e = f->agreed[b];
      if (e >= kGatherBlockExponent) {
        gathered->push_back(b);
      } else if (e == kZeroBlockExponent && !speculative) {
        if (f->recv_data) {
          PacketRange r = PacketElements(b, f->count, f->per);
          const size_t out_size = f->t == DataType::kFloat64 ? 8 : 4;  // float32 on 64-bit lanes: 4
          std::memset(static_cast<uint8_t*>(f->out) + r.first * out_size, 0, r.count * out_size);
        }
      } else {
        fast.push_back(b);
        if (speculative && f->own[b] > e) mark[b] = 1;  // would saturate (or holds inf/NaN)
      }
    }
    if (fast.empty()) return Status::Ok();
    uint8_t coll = f->collective, root = f->root_index;
    MapReduceMode(&coll, &root);
    BlockSpec s = Base(coll, f->lane == 8 ? kFp64SumWire : uint8_t{INC_DTYPE_FP32}, INC_OP_SUM, f->count);
    s.codec = f->lane == 4                 ? Codec::kFixedF32
              : f->t == DataType::kFloat64 ? Codec::kFixedF64
                                           : Codec::kFixedF32Wide;
    s.exponents = f->agreed.data();
    s.headroom = HeadroomBits(opt.world_size);
    s.blocks = fast.data();
    s.num_blocks = fast.size();
    s.aux = f->code;
    std::vector<uint8_t> flagged, overflowed;
    s.uncertified = &flagged;
    if (speculative) {
      s.mark_overflow = mark.data();
      s.overflowed = &overflowed;
    }
    s.root_index = root;
    s.send = f->in;
    s.recv = f->recv_data ? f->out : nullptr;
    s.recv_data = f->recv_data;
    INC_RETURN_IF_ERROR(Run(s));
    for (size_t k = 0; k < fast.size(); k++) {
      if (speculative && overflowed[k]) {
        redo->push_back(fast[k]);
      } else if (flagged[k]) {
        gathered->push_back(fast[k]);
        uncertified_blocks++;
      }
    }
    return Status::Ok();
  }

  // Maps every user type onto Reduction's or FloatSum, as PlanReduction
  // says.
  Status TypedReduction(uint8_t collective, const void* send, void* recv, size_t count, DataType t,
                        ReduceOp op, uint8_t root_index, bool recv_data) {
    if (count == 0) return Status::Ok();
    switch (PlanReduction(t, op).form) {
      case LaneForm::kFloatSum: return FloatSum(collective, t, send, recv, count, root_index, recv_data);
      case LaneForm::kRaw: return Reduction(collective, t, op, send, recv, count, root_index, recv_data);
      case LaneForm::kFloatKey32: {
        if (t == DataType::kFloat32)
          return Reduction(collective, t, op, send, recv, count, root_index, recv_data);
        // float16/bfloat16 on float32 keys: widening and narrowing are
        // exact for every value the result can be.
        bool half = t == DataType::kFloat16;
        const auto* in = static_cast<const uint16_t*>(send);
        std::vector<float> wide(count), out(recv_data ? count : 0);
        for (size_t i = 0; i < count; i++) wide[i] = half ? F16ToF32(in[i]) : Bf16ToF32(in[i]);
        INC_RETURN_IF_ERROR(Reduction(collective, DataType::kFloat32, op, wide.data(),
                                      recv_data ? out.data() : nullptr, count, root_index, recv_data));
        if (recv_data && recv) {
          auto* o = static_cast<uint16_t*>(recv);
          for (size_t i = 0; i < count; i++) o[i] = half ? F32ToF16(out[i]) : F32ToBf16(out[i]);
        }
        return Status::Ok();
      }
      case LaneForm::kFloatKey64: {
        const auto* in = static_cast<const double*>(send);
        std::vector<int64_t> ord(count), out(recv_data ? count : 0);
        for (size_t i = 0; i < count; i++) ord[i] = OrderedFromF64(in[i]);
        INC_RETURN_IF_ERROR(Reduction(collective, DataType::kInt64, op, ord.data(),
                                      recv_data ? out.data() : nullptr, count, root_index, recv_data));
        if (recv_data && recv) {
          auto* o = static_cast<double*>(recv);
          for (size_t i = 0; i < count; i++) o[i] = F64FromOrdered(out[i]);
        }
        return Status::Ok();
      }
    }
    return InvalidArgument("unknown data type");
  }

  // Broadcast of raw bytes as int32 lanes (the last lane zero-padded).
  Status BroadcastBytes(const void* send, void* recv, size_t bytes, uint32_t root) {
    if (bytes == 0) return Status::Ok();
    const bool is_root = opt.rank == root;
    const uint64_t lanes = (bytes + 3) / 4;
    std::vector<uint8_t> padded;
    const void* src = send;
    void* dst = recv;
    if (bytes % 4) {
      padded.assign(lanes * 4, 0);
      if (is_root) std::memcpy(padded.data(), send, bytes);
      src = padded.data();
      dst = padded.data();
    }
    BlockSpec s;
    const bool via_allreduce = opt.broadcast_mode == "allreduce" &&
                               Allowed(asg.collectives, INC_COLL_ALLREDUCE) &&
                               Allowed(asg.dtypes, INC_DTYPE_INT32) && Allowed(asg.ops, INC_OP_SUM);
    if (via_allreduce) {
      // root's lanes + zeros: int32 addition reproduces the root's bits.
      s = Base(INC_COLL_ALLREDUCE, INC_DTYPE_INT32, INC_OP_SUM, lanes);
      s.send_zeros = !is_root;
    } else {
      // Nothing is computed: any four-byte type the tree accepts will do.
      uint8_t wire = Allowed(asg.dtypes, INC_DTYPE_INT32) ? INC_DTYPE_INT32 : INC_DTYPE_FP32;
      s = Base(INC_COLL_BROADCAST, wire, INC_OP_SUM, lanes);
      s.root_index = MemberIndexOf(root);
      s.send_data = is_root;
    }
    s.send = is_root ? src : nullptr;
    s.recv = dst;
    INC_RETURN_IF_ERROR(Run(s));
    if (bytes % 4 && recv) std::memcpy(recv, padded.data(), bytes);
    return Status::Ok();
  }

  // The raw-frame transports (frames built here, no RDMA device): "xdp",
  // or "afxdp" when asked for or when "auto" finds the kernel without what
  // "xdp" needs (live-frame BPF_PROG_RUN, XDP ring buffers).
  Status OpenRawTransport() {
    const Ipv4 filter_ip = ifinfo.ip;
    const uint32_t filter_qpn = opt.qpn_filter ? qpn : 0;
    if (transport == "xdp") {
      XdpIoOptions xo;
      xo.ifname = opt.iface;
      xo.xdp_generic = opt.xdp_generic;
      xo.filter_ip = filter_ip;
      xo.filter_qpn = filter_qpn;
      auto x = XdpIo::Open(xo);
      if (x.ok()) {
        io = std::move(*x);
        return Status::Ok();
      }
      if (opt.transport != "auto") return x.status();
      LOG_WARN << "transport auto: xdp cannot start (" << x.status().ToString() << "); using afxdp";
      transport = "afxdp";
    }
    XskOptions xo;
    xo.ifname = opt.iface;
    xo.xdp_generic = opt.xdp_generic;
    xo.filter_ip = filter_ip;
    xo.filter_qpn = filter_qpn;
    auto sock = XskSocket::Open(xo);
    if (!sock.ok()) return sock.status();
    io = std::move(*sock);
    return Status::Ok();
  }

  // How the switch reaches this member, as JoinGroup tells the AM.
  inc::v1::MemberInfo MemberEndpoint() const {
    inc::v1::MemberInfo m;
    m.set_ip(ifinfo.ip.ToString());
    m.set_mac(ifinfo.mac.ToString());
    m.set_qpn(qpn);
    if (verbs) {
      // Results are RDMA writes into the registered result buffer.
      m.set_rkey(verbs->rkey());
      m.set_va_base(verbs->result_va());
      m.set_slot_stride(verbs->slot_stride());
      m.set_transport(inc::v1::TRANSPORT_VERBS);
    } else {
      m.set_rkey(qpn);
      m.set_va_base(0);
      m.set_slot_stride(INC_MAX_PAYLOAD_BYTES + sizeof(inc_hdr));
      m.set_transport(transport == "xdp" ? inc::v1::TRANSPORT_XDP : inc::v1::TRANSPORT_AF_XDP);
    }
    return m;
  }

  Status Start() {
    if (asg.pool_size == 0) return InvalidArgument("assignment has pool size 0");
    if (asg.elems_per_packet == 0) asg.elems_per_packet = INC_DEFAULT_ELEMS_PER_PACKET;
    // afxdp: a received frame sits after XDP_PACKET_HEADROOM (256) in a
    // 4096-byte UMEM chunk (bigger frames would need multi-buffer AF_XDP);
    // xdp: a live frame is one page minus headroom and tailroom.
    const size_t frame = FrameLength(size_t{asg.elems_per_packet} * 4);
    const size_t max_frame = transport == "xdp" ? size_t{INC_IO_FRAME_BYTES} : 4096 - 256;
    if (!verbs && frame > max_frame)
      return InvalidArgument("elems_per_packet " + std::to_string(asg.elems_per_packet) + " makes " +
                             std::to_string(frame) + "-byte frames, larger than the " + transport +
                             " transport's " + std::to_string(max_frame));
    auto sw_ip = Ipv4::Parse(asg.switch_ip);
    if (!sw_ip.ok()) return sw_ip.status().WithContext("assignment switch_ip");
    auto sw_mac = Mac::Parse(asg.switch_mac);
    if (!sw_mac.ok()) return sw_mac.status().WithContext("assignment switch_mac");
    if (verbs) {
      // The QP, rkey and result buffer went into JoinGroup; now the switch
      // side is known.
      INC_RETURN_IF_ERROR(
          verbs->Connect(*sw_mac, *sw_ip, asg.switch_qpn, asg.pool_size, asg.elems_per_packet));
    }
    EngineConfig ec;
    ec.member_mac = ifinfo.mac;
    ec.member_ip = ifinfo.ip;
    ec.member_qpn = qpn;
    ec.switch_mac = *sw_mac;
    ec.switch_ip = *sw_ip;
    ec.switch_qpn = asg.switch_qpn;
    ec.rkey = qpn;
    ec.tree_id = static_cast<uint16_t>(asg.tree_id);
    ec.key = asg.key;
    ec.pool_size = asg.pool_size;
    ec.elems_per_packet = asg.elems_per_packet;
    ec.rank_at_switch = static_cast<uint16_t>(asg.rank_at_switch);
    ec.timeout = std::chrono::microseconds(opt.message_timeout_us);
    ec.max_retries = opt.max_retries;
    ec.op_timeout = std::chrono::milliseconds(opt.op_timeout_ms);
    ec.max_timeout = std::chrono::microseconds(std::max(opt.max_message_timeout_us, opt.message_timeout_us));
    ec.poll_ms = opt.poll_ms;
    ec.on_wait = opt.on_wait;
    engine = std::make_unique<Engine>(io.get(), ec);
    engine->SetTimeoutReporter([this](uint32_t id, uint32_t n, const std::string& e) {
      if (am) am->ReportError(asg.tree_id, id, n, e);
      // The AM failed the tree for every rank; this rank's later
      // collectives fail at once with the same story.
      engine->Abort("this rank gave up on message " + std::to_string(id) + ": " + e);
    });
    if (am && opt.heartbeats) am->StartHeartbeats(asg.tree_id, asg.heartbeat_interval_ms, engine.get());
    LOG_INFO << "rank " << opt.rank << "/" << opt.world_size << " on " << opt.iface << " [" << transport
             << "] (" << ifinfo.ip.ToString() << ", QPN " << qpn << "): tree " << asg.tree_id
             << " via switch " << asg.switch_name << " " << asg.switch_ip << " QPN " << asg.switch_qpn
             << ", pool " << asg.pool_size << ", " << asg.elems_per_packet << " elems/packet, member index "
             << asg.member_index;
    return Status::Ok();
  }
};

namespace {

// The leader's tree member, as the host stage uses it (node numbers are
// this member's rank space).
class ImplNet : public HostNet {
 public:
  explicit ImplNet(Communicator::Impl* impl) : impl_(impl) {}
  Status Reduce(uint8_t collective, uint8_t wire_dtype, uint8_t op, void* lanes, uint64_t count,
                uint32_t root_node, bool recv, const HostNetSum& sum) override {
    uint8_t root_index = impl_->MemberIndexOf(root_node);
    impl_->MapReduceMode(&collective, &root_index);
    BlockSpec s = impl_->Base(collective, wire_dtype, op, count);
    s.blocks = sum.blocks;
    s.num_blocks = sum.num_blocks;
    s.aux = sum.aux;
    s.uncertified = sum.uncertified;
    s.root_index = root_index;
    s.send = lanes;
    s.recv = recv ? lanes : nullptr;
    s.recv_data = recv;
    return impl_->Run(s);
  }
  Status Broadcast(const void* send, void* recv, size_t bytes, uint32_t root_node) override {
    return impl_->BroadcastBytes(send, recv, bytes, root_node);
  }
  Status Barrier() override {
    BlockSpec s = impl_->Base(INC_COLL_BARRIER, INC_DTYPE_INT32, INC_OP_SUM, 0);
    s.send_data = false;
    s.recv_data = false;
    return impl_->Run(s);
  }

 private:
  Communicator::Impl* impl_;
};

Status ValidateOptions(const CommunicatorOptions& o) {
  if (o.world_size == 0 || o.world_size > 4096) return InvalidArgument("world_size must be in 1..4096");
  if (o.rank >= o.world_size)
    return InvalidArgument("rank " + std::to_string(o.rank) + " >= world_size " +
                           std::to_string(o.world_size));
  if (o.iface.empty()) return InvalidArgument("iface is required (the worker's interface toward its switch)");
  if (o.qpn > INC_QPN_MASK || o.qpn == 1) return InvalidArgument("qpn must be a 24-bit value other than 1");
  if (o.message_timeout_us == 0) return InvalidArgument("message_timeout_us must be > 0");
  if (o.reduce_mode != "allreduce" && o.reduce_mode != "native")
    return InvalidArgument("reduce_mode must be 'allreduce' or 'native', not '" + o.reduce_mode + "'");
  if (o.transport != "xdp" && o.transport != "afxdp" && o.transport != "verbs" && o.transport != "auto")
    return InvalidArgument("transport must be 'xdp', 'afxdp', 'verbs' or 'auto', not '" + o.transport + "'");
  if (o.transport == "verbs" && o.qpn)
    return InvalidArgument("qpn cannot be chosen with the verbs transport (the RDMA device assigns it)");
  if (o.broadcast_mode != "allreduce" && o.broadcast_mode != "native")
    return InvalidArgument("broadcast_mode must be 'allreduce' or 'native', not '" + o.broadcast_mode + "'");
  if (o.small_sum != "gather" && o.small_sum != "fixed")
    return InvalidArgument("small_sum must be 'gather' or 'fixed', not '" + o.small_sum + "'");
  return Status::Ok();
}

Expected<std::unique_ptr<Communicator::Impl>> MakeImpl(const CommunicatorOptions& options) {
  // Before any interface is touched: a missing or bad certificate is a
  // configuration error to report at once.
  auto security = options.security             ? Expected<TransportSecurity>(*options.security)
                  : options.am_address.empty() ? Expected<TransportSecurity>(TransportSecurity{true, {}})
                                               : TransportSecurityFromEnv("INCIN");
  auto credentials = security ? MakeChannelCredentials(*security) : security.status();
  if (!credentials) return credentials.status().WithContext("AM connection");
  INC_RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<Communicator::Impl>();
  impl->opt = options;
  // float32_lanes, or INCIN_FLOAT32_LANES (a choice setting: checked there).
  std::string source = "float32_lanes";
  if (impl->opt.float32_lanes.empty()) {
    auto v = settings::Env().String("INCIN_FLOAT32_LANES");
    if (!v.ok()) return v.status();
    impl->opt.float32_lanes = *v;
    source = "INCIN_FLOAT32_LANES";
  }
  LaneChoice::Mode lanes;
  if (!LaneChoice::Parse(impl->opt.float32_lanes, &lanes))
    return InvalidArgument(source + " must be 'auto', '32' or '64', not '" + impl->opt.float32_lanes + "'");
  impl->lanes = LaneChoice(lanes);
  impl->g_rank = options.rank;
  impl->g_world = options.world_size;
  auto info = GetInterfaceInfo(options.iface);
  if (!info.ok()) return info.status();
  if (!info->ip.host) return FailedPrecondition("interface " + options.iface + " has no IPv4 address");
  impl->ifinfo = *info;
  std::string why;
  auto transport = ResolveTransport(options.transport, options.iface, &why);
  if (!transport.ok()) return transport.status();
  impl->transport = *transport;
  if (options.transport == "auto") {
    LOG_INFO << "transport auto: " << impl->transport << " (" << why << ")";
  }
  if (impl->transport == "verbs") {
    VerbsOptions vo;
    vo.iface = options.iface;
    vo.member_ip = info->ip;
    vo.member_mac = info->mac;
    vo.device = options.rdma_device;
    vo.gid_index = options.gid_index;
    if (options.pool_size > vo.result_slots) vo.result_slots = options.pool_size;
    auto v = VerbsTransport::Open(vo);
    if (!v.ok()) return v.status();
    impl->verbs = v->get();
    impl->io = std::move(*v);
    impl->qpn = impl->verbs->qpn();
  } else {
    impl->qpn = options.qpn ? options.qpn : DefaultQpn();
    INC_RETURN_IF_ERROR(impl->OpenRawTransport());
  }
  if (!options.am_address.empty()) impl->am = std::make_unique<AmSession>(options, *credentials);
  return impl;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

Expected<std::unique_ptr<Communicator>> Communicator::Create(const CommunicatorOptions& options) {
  if (options.am_address.empty()) return InvalidArgument("am_address is required");
  if (options.job_id.empty()) return InvalidArgument("job_id is required");
  std::string credential = options.job_credential.value_or("");
  if (!options.job_credential) {
    credential = settings::Env().String(kJobCredentialEnv).value();
  }
  if (!credential.empty()) {
    const std::string source = options.job_credential ? "the job credential" : kJobCredentialEnv;
    auto job = JobOfCredential(credential);
    if (!job) return InvalidArgument(source + ": " + job.status().message());
    if (*job != options.job_id)
      return InvalidArgument(source + " is for job '" + *job + "', not for job '" + options.job_id + "'");
  }
  // Several ranks per host?
  uint32_t local_size = options.local_size;
  if (local_size == 0) {
    auto v = settings::Env().UInt("INCIN_LOCAL_SIZE");
    if (!v.ok()) return v.status();
    if (*v == 0) return InvalidArgument("INCIN_LOCAL_SIZE must be in 1..256, not 0");
    local_size = static_cast<uint32_t>(*v);
  }
  std::optional<uint32_t> local_rank = options.local_rank;
  if (!local_rank && local_size > 1) {
    if (settings::Env().IsSet("INCIN_LOCAL_RANK")) {
      auto v = settings::Env().UInt("INCIN_LOCAL_RANK");
      if (!v.ok()) return v.status();
      if (*v >= local_size)
        return InvalidArgument("INCIN_LOCAL_RANK must be below INCIN_LOCAL_SIZE " +
                               std::to_string(local_size) + ", not " + std::to_string(*v));
      local_rank = static_cast<uint32_t>(*v);
    }
  }
  if (local_size > 1) return CreateLocal(options, credential, local_size, local_rank);
  auto made = MakeImpl(options);
  if (!made.ok()) return made.status();
  std::unique_ptr<Impl> impl = std::move(*made);
  INC_RETURN_IF_ERROR(JoinAm(impl.get(), credential, {}, 0));
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Status Communicator::JoinAm(Impl* impl, const std::string& credential,
                            const std::vector<uint32_t>& host_ranks, uint32_t total_ranks) {
  auto asg = impl->am->Join(credential, impl->MemberEndpoint(), host_ranks, total_ranks);
  if (!asg.ok()) return asg.status();
  impl->asg = std::move(*asg);
  return impl->Start();
}

Expected<std::unique_ptr<Communicator>> Communicator::CreateLocal(const CommunicatorOptions& options,
                                                                  const std::string& credential,
                                                                  uint32_t local_size,
                                                                  std::optional<uint32_t> local_rank) {
  if (options.world_size == 0 || options.world_size > 4096)
    return InvalidArgument("world_size must be in 1..4096");
  if (options.rank >= options.world_size)
    return InvalidArgument("rank " + std::to_string(options.rank) + " >= world_size " +
                           std::to_string(options.world_size));
  if (options.world_size % local_size)
    return InvalidArgument("world_size " + std::to_string(options.world_size) + " is not a multiple of " +
                           std::to_string(local_size) + " ranks per host");
  if (local_rank && *local_rank != options.rank % local_size)
    return InvalidArgument("local rank " + std::to_string(*local_rank) + " of rank " +
                           std::to_string(options.rank) + " must be rank % " + std::to_string(local_size) +
                           " = " + std::to_string(options.rank % local_size) +
                           " (ranks go in blocks per host)");
  const uint32_t node = options.rank / local_size, nodes = options.world_size / local_size;
  HostStageOptions so;
  so.name = HostStageName(options.job_id, node);
  so.local_rank = options.rank % local_size;
  so.local_size = local_size;
  so.slot_bytes = options.local_slot_bytes;
  so.attach_timeout_ms = options.join_timeout_ms;
  so.barrier_timeout_ms = options.op_timeout_ms;  // a late local rank is waited for as long as a remote one
  so.on_wait = options.on_wait;
  auto stage = HostStage::Open(so);
  if (!stage.ok()) return stage.status().WithContext("host stage " + so.name);
  std::unique_ptr<Impl> impl;
  HostInfo info;
  if ((*stage)->leader()) {
    INC_RETURN_IF_ERROR((*stage)->WaitAttached());
    CommunicatorOptions member = options;
    member.rank = node;
    member.world_size = nodes;
    std::vector<uint32_t> ranks;
    for (uint32_t l = 0; l < local_size; l++) ranks.push_back(node * local_size + l);
    auto made = MakeImpl(member);
    Status st = made.ok() ? JoinAm(made->get(), credential, ranks, options.world_size) : made.status();
    if (st.ok()) {
      impl = std::move(*made);
      info.elems4 = impl->asg.elems_per_packet;
      info.tree_id = impl->asg.tree_id;
      info.gather_sum = impl->opt.small_sum == "gather" && Impl::Allowed(impl->asg.dtypes, INC_DTYPE_INT32) &&
                        Impl::Allowed(impl->asg.ops, INC_OP_SUM);
    }
    (*stage)->PublishJoin(st, info);
    if (!st.ok()) return st;
    impl->host_net = std::make_unique<ImplNet>(impl.get());
  } else {
    auto joined = (*stage)->WaitJoin();
    if (!joined.ok()) return joined.status();
    info = *joined;
    impl = std::make_unique<Impl>();
    impl->opt = options;
    impl->asg.elems_per_packet = info.elems4;
    impl->asg.tree_id = info.tree_id;
  }
  impl->g_rank = options.rank;
  impl->g_world = options.world_size;
  impl->stage = std::move(*stage);
  impl->hc = std::make_unique<HostCollectives>(impl->stage.get(), impl->host_net.get(), options.rank,
                                               options.world_size, info);
  LOG_INFO << "rank " << options.rank << "/" << options.world_size << ": local rank " << so.local_rank
           << " of " << local_size << " on host " << node << " of " << nodes
           << (so.local_rank == 0 ? " (the host's tree member)" : "");
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Expected<std::unique_ptr<Communicator>> Communicator::CreateWithAssignment(const CommunicatorOptions& options,
                                                                           const Assignment& assignment) {
  auto made = MakeImpl(options);
  if (!made.ok()) return made.status();
  std::unique_ptr<Impl> impl = std::move(*made);
  impl->asg = assignment;
  impl->g_rank = options.rank;
  impl->g_world = options.world_size;
  // Without a JoinGroup there is no membership to leave.
  impl->am.reset();
  Status st = impl->Start();
  if (!st.ok()) return st;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

void Communicator::Abort(const std::string& why) {
  if (impl_->stage) impl_->stage->Abort(why);
  if (impl_->engine) impl_->engine->Abort(why);
}

uint32_t Communicator::rank() const {
  return impl_->g_rank;
}
uint32_t Communicator::world_size() const {
  return impl_->g_world;
}

Status Communicator::AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  if (count && (!send || !recv)) return InvalidArgument("AllReduce: null buffer");
  INC_RETURN_IF_ERROR(CheckOpType(op, type).WithContext("AllReduce"));
  if (impl_->hc)
    return impl_->hc->Reduce(INC_COLL_ALLREDUCE, send, recv, count, type, op, 0, true)
        .WithContext("AllReduce");
  return impl_->TypedReduction(INC_COLL_ALLREDUCE, send, recv, count, type, op, 0, true)
      .WithContext("AllReduce");
}

Status Communicator::Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            uint32_t root) {
  INC_RETURN_IF_ERROR(impl_->CheckRoot(root));
  bool is_root = rank() == root;
  if (count && (!send || (is_root && !recv))) return InvalidArgument("Reduce: null buffer");
  INC_RETURN_IF_ERROR(CheckOpType(op, type).WithContext("Reduce"));
  if (impl_->hc)
    return impl_->hc->Reduce(INC_COLL_REDUCE, send, recv, count, type, op, root, is_root)
        .WithContext("Reduce");
  return impl_
      ->TypedReduction(INC_COLL_REDUCE, send, is_root ? recv : nullptr, count, type, op,
                       impl_->MemberIndexOf(root), is_root)
      .WithContext("Reduce");
}

Status Communicator::Broadcast(void* buf, size_t count, DataType type, uint32_t root) {
  INC_RETURN_IF_ERROR(impl_->CheckRoot(root));
  if (count && !buf) return InvalidArgument("Broadcast: null buffer");
  return impl_->Bcast(buf, buf, count * DataTypeSize(type), root).WithContext("Broadcast");
}

Status Communicator::Barrier() {
  if (impl_->hc) return impl_->hc->Barrier().WithContext("Barrier");
  BlockSpec s = impl_->Base(INC_COLL_BARRIER, INC_DTYPE_INT32, INC_OP_SUM, 0);
  s.send_data = false;
  s.recv_data = false;
  return impl_->Run(s).WithContext("Barrier");
}

Status Communicator::AllGather(const void* send, void* recv, size_t count, DataType type) {
  const size_t block = count * DataTypeSize(type);
  if (count && (!send || !recv)) return InvalidArgument("AllGather: null buffer");
  for (uint32_t r = 0; r < world_size(); r++) {
    auto* dst = static_cast<uint8_t*>(recv) + r * block;
    INC_RETURN_IF_ERROR(impl_->Bcast(r == rank() ? send : nullptr, dst, block, r)
                            .WithContext("AllGather block " + std::to_string(r)));
  }
  return Status::Ok();
}

Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  const size_t block = count * DataTypeSize(type);
  if (count && (!send || !recv)) return InvalidArgument("ReduceScatter: null buffer");
  INC_RETURN_IF_ERROR(CheckOpType(op, type).WithContext("ReduceScatter"));
  for (uint32_t r = 0; r < world_size(); r++) {
    const auto* src = static_cast<const uint8_t*>(send) + r * block;
    bool mine = r == rank();
    INC_RETURN_IF_ERROR(impl_->TRed(INC_COLL_REDUCE, src, mine ? recv : nullptr, count, type, op, r, mine)
                            .WithContext("ReduceScatter block " + std::to_string(r)));
  }
  return Status::Ok();
}

Status Communicator::Scatter(const void* send, void* recv, size_t count, DataType type, uint32_t root) {
  INC_RETURN_IF_ERROR(impl_->CheckRoot(root));
  const size_t block = count * DataTypeSize(type);
  if (count && (!recv || (rank() == root && !send))) return InvalidArgument("Scatter: null buffer");
  std::vector<uint8_t> all(block * world_size());
  if (rank() == root && block) std::memcpy(all.data(), send, all.size());
  INC_RETURN_IF_ERROR(impl_->Bcast(all.data(), all.data(), all.size(), root).WithContext("Scatter"));
  if (block) std::memcpy(recv, all.data() + rank() * block, block);
  return Status::Ok();
}

Status Communicator::Gather(const void* send, void* recv, size_t count, DataType type, uint32_t root) {
  INC_RETURN_IF_ERROR(impl_->CheckRoot(root));
  const size_t block = count * DataTypeSize(type);
  if (count && (!send || (rank() == root && !recv))) return InvalidArgument("Gather: null buffer");
  if (block == 0) return Status::Ok();
  // A Reduce (INT32 SUM) of vectors that are zero except each rank's own
  // block: the bytes of different ranks never overlap, so the sum is exact.
  const size_t lanes = (block * world_size() + 3) / 4;
  std::vector<int32_t> mine(lanes, 0), out(rank() == root ? lanes : 0);
  std::memcpy(reinterpret_cast<uint8_t*>(mine.data()) + rank() * block, send, block);
  if (impl_->hc)
    INC_RETURN_IF_ERROR(impl_->hc
                            ->Reduce(INC_COLL_REDUCE, mine.data(), rank() == root ? out.data() : nullptr,
                                     lanes, DataType::kInt32, ReduceOp::kSum, root, rank() == root)
                            .WithContext("Gather"));
  else
    INC_RETURN_IF_ERROR(impl_
                            ->Reduction(INC_COLL_REDUCE, DataType::kInt32, ReduceOp::kSum, mine.data(),
                                        rank() == root ? out.data() : nullptr, lanes,
                                        impl_->MemberIndexOf(root), rank() == root)
                            .WithContext("Gather"));
  if (rank() == root) std::memcpy(recv, out.data(), block * world_size());
  return Status::Ok();
}

Status Communicator::AllToAll(const void* send, void* recv, size_t count, DataType type) {
  const size_t block = count * DataTypeSize(type);
  if (count && (!send || !recv)) return InvalidArgument("AllToAll: null buffer");
  // One Scatter per source rank: the source broadcasts its whole buffer and
  // each rank keeps the block addressed to it.
  std::vector<uint8_t> all(block * world_size());
  for (uint32_t s = 0; s < world_size(); s++) {
    if (s == rank() && block) std::memcpy(all.data(), send, all.size());
    INC_RETURN_IF_ERROR(impl_->Bcast(all.data(), all.data(), all.size(), s)
                            .WithContext("AllToAll source " + std::to_string(s)));
    if (block) std::memcpy(static_cast<uint8_t*>(recv) + s * block, all.data() + rank() * block, block);
  }
  return Status::Ok();
}

CommunicatorStatus Communicator::GetStatus() const {
  CommunicatorStatus s;
  s.assignment = impl_->asg;
  s.rank = impl_->g_rank;
  s.world_size = impl_->g_world;
  s.iface = impl_->opt.iface;
  s.member_ip = impl_->ifinfo.ip.ToString();
  s.member_mac = impl_->ifinfo.mac.ToString();
  s.member_qpn = impl_->qpn;
  s.transport = impl_->transport;
  if (impl_->verbs) s.rdma_device = impl_->verbs->gid().device;
  s.gathered_blocks = impl_->gathered_blocks + (impl_->hc ? impl_->hc->gathered_blocks() : 0);
  s.uncertified_blocks = impl_->uncertified_blocks + (impl_->hc ? impl_->hc->uncertified_blocks() : 0);
  s.exponent_guess_misses = impl_->guess_misses;
  if (!impl_->io || !impl_->engine) return s;  // a local rank other than its host's member
  PacketIoStats io = impl_->io->Stats();
  s.tx_packets = io.tx_packets;
  s.tx_bytes = io.tx_bytes;
  s.rx_packets = io.rx_packets;
  s.rx_bytes = io.rx_bytes;
  s.tx_kicks = io.tx_kicks;
  s.tx_busy = io.tx_busy;
  s.cq_bogus = io.cq_bogus;
  s.rx_dropped = io.rx_dropped;
  s.rx_ring_full = io.rx_ring_full;
  s.rx_fill_empty = io.rx_fill_empty;
  EngineCounters c = impl_->engine->counters();
  s.messages = c.messages;
  s.retransmissions = c.retransmissions;
  s.overflow_results = c.overflow_results;
  s.operations = c.operations;
  s.failed_operations = c.failed_operations;
  s.srtt_us = c.srtt_us;
  s.rto_us = c.rto_us;
  s.saturated_blocks = impl_->saturated;
  s.heartbeats_failed = impl_->am ? impl_->am->heartbeats_failed() : 0;
  for (size_t i = 1; i < c.rejects.size(); i++)
    if (c.rejects[i]) s.rejects[RejectName(static_cast<Reject>(i))] = c.rejects[i];
  s.tree_state = impl_->am ? impl_->am->tree_state() : "ACTIVE";  // no AM to report otherwise
  return s;
}

}  // namespace inc::client
