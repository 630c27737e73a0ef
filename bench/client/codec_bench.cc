// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark of libinc's per-byte client work: the FP32 SUM codec
// (block exponent, quantise, dequantise), CRC-32 and the RoCEv2 ICRC, frame
// build/parse, and the message engine's whole per-frame path over a
// loopback PacketIo (no kernel, no switch: results are prebuilt frames).
// Prints medians over rounds; asserts nothing. Pin it: taskset -c 1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "client/block_op.h"
#include "client/engine.h"
#include "client/numerics.h"
#include "client/protocol.h"
#include "client/tests/loopback_io.h"
#include "common/frame.h"
#include "common/icrc.h"

namespace inc::client {
namespace {

using Clock = std::chrono::steady_clock;

int g_rounds = 9;

// Median over rounds of the seconds one call of fn takes.
double MedianSeconds(const std::function<void()>& fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int r = 0; r < g_rounds; r++) {
    auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

volatile uint64_t g_sink;
void Sink(uint64_t v) {
  g_sink = g_sink + v;
}

void Report(const std::string& what, double seconds, double units, const char* unit, double bytes) {
  std::printf("%-58s %9.3f ns/%s %8.4f ns/byte\n", what.c_str(), seconds * 1e9 / units, unit,
              seconds * 1e9 / bytes);
}

constexpr size_t kBlock = 768;                      // elements: 3 KiB blocks
constexpr size_t kBig = size_t{64} << 20;           // bytes
constexpr size_t kBigElems = kBig / sizeof(float);  // 16 Mi floats
constexpr size_t kHotRepeat = 20000;                // calls per hot timing
constexpr size_t kBigBlocks = kBigElems / kBlock;   // whole blocks in 64 MiB

std::vector<float> RandomFloats(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

void BenchNumerics() {
  std::vector<float> x = RandomFloats(kBigElems);
  std::vector<int32_t> q(kBigElems);
  std::vector<float> back(kBigElems);
  const int h = 2;
  const int32_t b = BlockExponentF32(x.data(), kBlock);
  const double hot_bytes = double(kHotRepeat) * kBlock * 4, big_bytes = double(kBigBlocks) * kBlock * 4;
  const double hot_elems = double(kHotRepeat) * kBlock, big_elems = double(kBigBlocks) * kBlock;
  auto hot = [&](const char* name, const std::function<void(size_t)>& one) {
    Report(std::string(name) + " 768 elems (hot)", MedianSeconds([&] {
             for (size_t r = 0; r < kHotRepeat; r++) one(0);
           }),
           hot_elems, "elem", hot_bytes);
  };
  auto big = [&](const char* name, const std::function<void(size_t)>& one) {
    Report(std::string(name) + " 64 MiB in 768-elem blocks", MedianSeconds([&] {
             for (size_t k = 0; k < kBigBlocks; k++) one(k * kBlock);
           }),
           big_elems, "elem", big_bytes);
  };
  for (Simd path : {Simd::kScalar, Simd::kSse2, Simd::kAvx2, Simd::kAvx512}) {
    if (!SimdSupported(path)) continue;
    const std::string tag = std::string(" ") + SimdName(path);
    auto exponent = [&](size_t off) {
      Sink(static_cast<uint64_t>(BlockExponentF32(path, x.data() + off, kBlock)));
    };
    auto quantise = [&](size_t off) {
      Sink(QuantiseF32(path, x.data() + off, kBlock, b, h, q.data() + off));
    };
    auto dequantise = [&](size_t off) {
      DequantiseF32(path, q.data() + off, kBlock, b, h, back.data() + off);
    };
    hot(("BlockExponentF32" + tag).c_str(), exponent);
    big(("BlockExponentF32" + tag).c_str(), exponent);
    hot(("QuantiseF32" + tag).c_str(), quantise);
    big(("QuantiseF32" + tag).c_str(), quantise);
    hot(("DequantiseF32" + tag).c_str(), dequantise);
    big(("DequantiseF32" + tag).c_str(), dequantise);
  }
}

void BenchCrc() {
  std::vector<uint8_t> buf(kBig + 64);
  std::mt19937 rng(2);
  for (auto& v : buf) v = static_cast<uint8_t>(rng());
  for (Crc32Path path : {Crc32Path::kTable, Crc32Path::kPclmul, Crc32Path::kVpclmul}) {
    if (!Crc32PathSupported(path)) continue;
    const std::string tag = std::string(" ") + Crc32PathName(path);
    for (size_t len : {64, 1024, 3072}) {
      Report("Crc32Le" + tag + " " + std::to_string(len) + " B (hot)", MedianSeconds([&] {
               for (size_t r = 0; r < kHotRepeat; r++) Sink(Crc32Le(path, 0xFFFFFFFF, buf.data() + 1, len));
             }),
             double(kHotRepeat), "call", double(kHotRepeat) * len);
    }
    const size_t chunks = kBig / 3072;
    Report("Crc32Le" + tag + " 64 MiB in 3 KiB calls", MedianSeconds([&] {
             for (size_t k = 0; k < chunks; k++) Sink(Crc32Le(path, 0xFFFFFFFF, buf.data() + k * 3072, 3072));
           }),
           double(chunks), "call", double(chunks) * 3072);
  }
}

FrameSpec ResultSpec(const uint8_t* payload, size_t len) {
  FrameSpec s;
  s.src_mac = *Mac::Parse("02:00:00:00:00:01");
  s.dst_mac = *Mac::Parse("02:00:00:00:00:02");
  s.src_ip = *Ipv4::Parse("10.0.0.1");
  s.dst_ip = *Ipv4::Parse("10.0.0.2");
  s.dest_qpn = 0x800123;
  s.inc.flags = INC_FLAG_RESULT;
  s.inc.dtype = INC_DTYPE_FP32;
  s.inc.tree_id = 7;
  s.inc.key = 0xC0FFEE;
  s.inc.msg_id = 300;
  s.inc.slot = 300 % 256;
  s.inc.rank = INC_RANK_RESULT;
  s.inc.count = static_cast<uint16_t>(len / 4);
  s.payload = payload;
  s.payload_len = len;
  return s;
}

void BenchFrames() {
  for (size_t elems : {240, 768}) {
    const size_t len = elems * 4;
    std::vector<uint8_t> payload(len);
    for (size_t i = 0; i < len; i++) payload[i] = static_cast<uint8_t>(i * 7);
    FrameSpec spec = ResultSpec(payload.data(), len);
    std::vector<uint8_t> frame(FrameLength(len));
    const std::string tag = " " + std::to_string(elems) + " elems (" + std::to_string(frame.size()) + " B)";
    const double fbytes = double(kHotRepeat) * frame.size();
    Report("BuildFrame" + tag, MedianSeconds([&] {
             for (size_t r = 0; r < kHotRepeat; r++) Sink(*BuildFrame(spec, frame.data(), frame.size()));
           }),
           double(kHotRepeat), "frame", fbytes);
    for (Crc32Path path : {Crc32Path::kTable, Crc32Path::kPclmul, Crc32Path::kVpclmul}) {
      if (!Crc32PathSupported(path)) continue;
      Report(std::string("ComputeIcrc ") + Crc32PathName(path) + tag, MedianSeconds([&] {
               for (size_t r = 0; r < kHotRepeat; r++) Sink(*ComputeIcrc(path, frame.data(), frame.size()));
             }),
             double(kHotRepeat), "frame", fbytes);
    }
    ResultFilter want{0x800123, *Ipv4::Parse("10.0.0.1"), 7, 0xC0FFEE, 256};
    Report("ParseFrame+CheckResultFrame" + tag, MedianSeconds([&] {
             for (size_t r = 0; r < kHotRepeat; r++) {
               auto p = ParseFrame(frame.data(), frame.size());
               Sink(static_cast<uint64_t>(CheckResultFrame(*p, want)));
             }
           }),
           double(kHotRepeat), "frame", fbytes);
  }
}

void BenchEngine() {
  const uint32_t elems = 768;
  std::vector<float> x = RandomFloats(kBigElems), out(kBigElems);
  std::vector<int32_t> exps(PacketCount(kBigElems, elems));
  for (size_t p = 0; p < exps.size(); p++) {
    PacketRange r = PacketElements(p, kBigElems, elems);
    exps[p] = BlockExponentF32(x.data() + r.first, r.count);
  }
  EngineConfig ec;
  ec.member_mac = *Mac::Parse("02:00:00:00:00:02");
  ec.member_ip = *Ipv4::Parse("10.0.0.2");
  ec.member_qpn = 0x800123;
  ec.switch_mac = *Mac::Parse("02:00:00:00:00:01");
  ec.switch_ip = *Ipv4::Parse("10.0.0.1");
  ec.switch_qpn = 0x100;
  ec.tree_id = 7;
  ec.key = 0xC0FFEE;
  ec.pool_size = 64;
  ec.elems_per_packet = elems;
  ec.first_msg_id = 1000;
  ec.timeout = std::chrono::seconds(10);
  ec.max_timeout = std::chrono::seconds(10);
  BlockSpec s;
  s.wire_dtype = INC_DTYPE_FP32;
  s.codec = Codec::kFixedF32;
  s.exponents = exps.data();
  s.headroom = 0;
  s.count = kBigElems;
  s.elems4 = elems;
  s.send = x.data();
  s.recv = out.data();
  LoopbackIo io(ec.first_msg_id, ec.member_qpn);
  auto run = [&] {
    Engine engine(&io, ec);
    BlockOperation op(s);
    Status st = engine.Run(&op);
    if (!st.ok() || engine.counters().retransmissions)
      std::fprintf(stderr, "run: %s\n", st.ToString().c_str());
  };
  run();  // records the results
  const std::vector<float> first = out;
  const double frames = double(exps.size());
  Report("Engine::Run FP32 SUM 64 MiB, 768 elems/frame, per frame", MedianSeconds(run), frames, "frame",
         double(kBig));
  if (std::memcmp(first.data(), out.data(), kBig) != 0) std::fprintf(stderr, "engine: runs differ\n");
}

}  // namespace
}  // namespace inc::client

int main(int argc, char** argv) {
  std::string only = argc > 1 ? argv[1] : "";
  if (argc > 2) inc::client::g_rounds = std::max(1, std::atoi(argv[2]));
  if (only.empty() || only == "numerics") inc::client::BenchNumerics();
  if (only.empty() || only == "crc") inc::client::BenchCrc();
  if (only.empty() || only == "frame") inc::client::BenchFrames();
  if (only.empty() || only == "engine") inc::client::BenchEngine();
  return 0;
}
