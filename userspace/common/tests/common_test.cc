// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/icrc.h"
#include "common/net.h"

namespace inc {
namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Two RDMA WRITE WITH IMMEDIATE frames sent by the Linux rxe driver (kernel
// 7.2, captured in shared/probes/wire-rxe/rxe_tx.pcap): the ICRC must match
// rxe's byte for byte, including TOS 0x00 vs 0x6A (masked) and different QPs.
const char* kRxeFrames[] = {
    "0200000000020200000000010800450000787a3040004011aba80a4d00010a4d0002c01212b7006400002b80ffff0000"
    "04560000010000000000000010000badcafe00000038cafe000157504150504844522d7278652d746f2d73656e646572"
    "2121a0000000a0000001a0000002a0000003a0000004a0000005a0000006a00000072ac1fe81",
    "0200000000020200000000010800456a00787a2e40004011ab400a4d00010a4d0002d35312b7006400002b80ffff0000"
    "012300000100dead0000beef00001234abcd00000038cafe000157504150504844522d7278652d746f2d73656e646572"
    "2121a0000000a0000001a0000002a0000003a0000004a0000005a0000006a00000073dd59fc7",
};

TEST(Icrc, MatchesFramesSentByRxe) {
  for (const char* hex : kRxeFrames) {
    auto frame = FromHex(hex);
    EXPECT_TRUE(CheckIcrc(frame.data(), frame.size())) << hex;
    frame[60] ^= 0x01;  // one payload bit
    EXPECT_FALSE(CheckIcrc(frame.data(), frame.size()));
  }
}

TEST(Icrc, MaskedFieldsDoNotChangeIt) {
  auto frame = FromHex(kRxeFrames[0]);
  auto before = ComputeIcrc(frame.data(), frame.size());
  frame[15] = 0x12;  // TOS
  frame[22] = 3;     // TTL
  frame[46] = 0xC0;  // BTH resv8 (FECN)
  auto after = ComputeIcrc(frame.data(), frame.size());
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(*before, *after);
}

// Bit-at-a-time reference of the register-form CRC (no inversion).
uint32_t BitwiseCrc32Le(uint32_t crc, const uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
  }
  return crc;
}

std::vector<Crc32Path> SupportedCrc32Paths() {
  std::vector<Crc32Path> out;
  for (Crc32Path p : {Crc32Path::kTable, Crc32Path::kPclmul, Crc32Path::kVpclmul})
    if (Crc32PathSupported(p)) out.push_back(p);
  return out;
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> buf(n);
  uint32_t x = seed;
  for (auto& b : buf) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
  return buf;
}

TEST(Crc32, EveryLengthOffsetAndSeedMatchesTheBitwiseDefinition) {
  const std::vector<uint8_t> buf = RandomBytes(4200, 12345);
  std::vector<size_t> lengths;
  for (size_t len = 0; len <= 600; len++) lengths.push_back(len);  // every fold and tail boundary
  for (size_t len : {1000, 1023, 1024, 1025, 1052, 1106, 2076, 2130, 3072, 3160, 4096})
    lengths.push_back(len);
  for (Crc32Path path : SupportedCrc32Paths()) {
    for (size_t len : lengths) {
      for (size_t off : {0, 1, 3, 8, 13}) {
        for (uint32_t seed : {0u, 0xFFFFFFFFu, 0xDEBB20E3u, 0x12345678u}) {
          ASSERT_EQ(Crc32Le(path, seed, buf.data() + off, len), BitwiseCrc32Le(seed, buf.data() + off, len))
              << Crc32PathName(path) << " len " << len << " offset " << off << " seed " << seed;
        }
      }
    }
  }
}

// The ICRC's definition: 8 bytes of 0xFF, then IPv4, UDP and BTH headers
// with TOS, TTL, IPv4 checksum, UDP checksum and BTH resv8 set to 0xFF,
// then the UDP payload after the BTH up to the ICRC; inverted.
uint32_t IcrcByDefinition(const uint8_t* frame, size_t udp_len) {
  const size_t covered = INC_OFF_UDP + udp_len - INC_ICRC_LEN - INC_OFF_IP;
  std::vector<uint8_t> m(8 + covered, 0xFF);
  std::memcpy(m.data() + 8, frame + INC_OFF_IP, covered);
  for (size_t off : {INC_OFF_IP + 1, INC_OFF_IP + 8, INC_OFF_IP + 10, INC_OFF_IP + 11, INC_OFF_UDP + 6,
                     INC_OFF_UDP + 7, INC_OFF_BTH + 4})
    m[8 + off - INC_OFF_IP] = 0xFF;
  return ~BitwiseCrc32Le(0xFFFFFFFF, m.data(), m.size());
}

TEST(Icrc, EveryPathAndUdpLengthMatchesTheMaskedDefinition) {
  // Random header bytes (masked ones included) around every UDP length
  // from the shortest RoCEv2 packet to a 3 KiB payload, with bytes after
  // the UDP datagram that must not count.
  const std::vector<uint8_t> noise = RandomBytes(INC_OFF_UDP + 3200 + 16, 777);
  for (size_t udp_len = 8 + 12 + INC_ICRC_LEN; udp_len <= 3200; udp_len++) {
    std::vector<uint8_t> frame(noise.begin(), noise.begin() + INC_OFF_UDP + udp_len + udp_len % 5);
    frame[12] = 0x08;
    frame[13] = 0x00;
    frame[INC_OFF_IP] = 0x45;
    frame[INC_OFF_UDP + 4] = static_cast<uint8_t>(udp_len >> 8);
    frame[INC_OFF_UDP + 5] = static_cast<uint8_t>(udp_len);
    const uint32_t want = IcrcByDefinition(frame.data(), udp_len);
    for (Crc32Path path : SupportedCrc32Paths()) {
      auto got = ComputeIcrc(path, frame.data(), frame.size());
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(*got, want) << Crc32PathName(path) << " UDP length " << udp_len;
    }
  }
}

TEST(Crc32, CombineEqualsDirectComputation) {
  std::vector<uint8_t> a(77), b(1003);
  for (size_t i = 0; i < a.size(); i++) a[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t i = 0; i < b.size(); i++) b[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> ab(a);
  ab.insert(ab.end(), b.begin(), b.end());
  uint32_t direct = Crc32Le(kIcrcSeed, ab.data(), ab.size());
  uint32_t combined =
      Crc32Combine(Crc32Le(kIcrcSeed, a.data(), a.size()), Crc32Le(0, b.data(), b.size()), b.size());
  EXPECT_EQ(direct, combined);
  std::vector<uint8_t> zeros(555, 0);
  EXPECT_EQ(Crc32Le(0x12345678, zeros.data(), zeros.size()), Crc32MulModP(0x12345678, Crc32XPow8n(555)));
}

TEST(Frame, BuildThenParseRoundTrips) {
  std::vector<uint8_t> payload(240 * 4);
  for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<uint8_t>(i);
  FrameSpec s;
  s.src_mac = *Mac::Parse("02:00:00:00:00:01");
  s.dst_mac = *Mac::Parse("02:00:00:00:00:02");
  s.src_ip = *Ipv4::Parse("10.0.0.2");
  s.dst_ip = *Ipv4::Parse("10.0.0.1");
  s.src_qpn = 0x12345;
  s.dest_qpn = 0x100;
  s.psn = 0xFFFFFF;
  s.va = 0x1122334455667788ull;
  s.rkey = 0xabcdef01;
  s.inc.tree_id = 7;
  s.inc.rank = 3;
  s.inc.msg_id = 1000;
  s.inc.slot = 1000 % 256;
  s.inc.count = 240;
  s.inc.key = 0xdeadbeef;
  s.inc.exponent = -5;
  s.payload = payload.data();
  s.payload_len = payload.size();
  auto frame = BuildFrame(s);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->size(), 1062u);
  auto p = ParseFrame(frame->data(), frame->size());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->icrc_ok);
  EXPECT_EQ(p->udp_sport, 0xC000 | (0x12345 & 0x3FFF));
  EXPECT_EQ(p->dest_qpn, 0x100u);
  EXPECT_EQ(p->psn, 0xFFFFFFu);
  EXPECT_EQ(p->va, s.va);
  EXPECT_EQ(p->dma_len, 24u + 960u);
  EXPECT_EQ(p->imm, 1000u);
  EXPECT_EQ(p->inc.exponent, -5);
  EXPECT_EQ(p->inc.key, 0xdeadbeefu);
  EXPECT_EQ(p->payload_len, 960u);
  EXPECT_EQ(Ipv4HeaderChecksum(frame->data() + INC_OFF_IP),
            static_cast<uint16_t>((*frame)[INC_OFF_IP + 10] << 8 | (*frame)[INC_OFF_IP + 11]));
}

TEST(Frame, BuildAroundAPlacedPayloadEqualsBuildFrame) {
  for (size_t len : {0, 4, 12, 960, 2024, 3072}) {
    const std::vector<uint8_t> payload = RandomBytes(len, static_cast<uint32_t>(len) + 1);
    FrameSpec s;
    s.src_ip = *Ipv4::Parse("10.0.0.2");
    s.dst_ip = *Ipv4::Parse("10.0.0.1");
    s.psn = 77;
    s.inc.count = static_cast<uint16_t>(len / 4);
    s.payload = payload.data();
    s.payload_len = len;
    auto want = BuildFrame(s);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    std::vector<uint8_t> frame(want->size() + 8, 0xEE);
    std::copy(payload.begin(), payload.end(), frame.begin() + INC_OFF_PAYLOAD);
    s.payload = nullptr;
    auto n = BuildFrameAroundPayload(s, frame.data(), frame.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, want->size()) << "payload " << len;
    frame.resize(*n);
    EXPECT_EQ(frame, *want) << "payload " << len;
    EXPECT_FALSE(BuildFrameAroundPayload(s, frame.data(), *n - 1).ok()) << "payload " << len;
  }
}

TEST(Frame, ParseRejectsTruncatedAndForeignFrames) {
  FrameSpec s;
  s.inc.count = 0;
  auto frame = BuildFrame(s);
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(ParseFrame(frame->data(), 50).ok());
  auto other = *frame;
  other[INC_OFF_UDP + 3] = 0x35;  // port 53 instead of 4791
  EXPECT_FALSE(ParseFrame(other.data(), other.size()).ok());
  other = *frame;
  other[INC_OFF_BTH] = 0x0A;  // RC RDMA WRITE ONLY
  EXPECT_FALSE(ParseFrame(other.data(), other.size()).ok());
}

TEST(Net, ParsesAndRejectsAddresses) {
  EXPECT_EQ(Ipv4::Parse("10.1.2.3")->host, 0x0A010203u);
  EXPECT_EQ(Ipv4::Parse("10.1.2.3")->ToString(), "10.1.2.3");
  EXPECT_FALSE(Ipv4::Parse("10.1.2").ok());
  EXPECT_EQ(Ipv4::Parse("300.1.1.1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Mac::Parse("02:aa:00:00:00:0f")->ToString(), "02:aa:00:00:00:0f");
  EXPECT_FALSE(Mac::Parse("02:aa:00:00:00").ok());
  EXPECT_FALSE(Mac::Parse("02:aa:00:00:00:0f:11").ok());
}

TEST(Net, ListenAndDialAddressesRefusePortsBeyond65535) {
  struct Case {
    const char* name;
    std::string address;
    std::string listen_error;  // empty: a valid listen address
    std::string dial_error;    // empty: a valid address to dial
  };
  const Case cases[] = {
      {"IPv4 and port", "127.0.0.1:50051", "", ""},
      {"every address", "0.0.0.0:50061", "", ""},
      {"empty host", ":50051", "", "am \":50051\" has no host"},
      {"host name", "am.example:50051", "", ""},
      {"IPv6 in brackets", "[::1]:50051", "", ""},
      {"highest port", "127.0.0.1:65535", "", ""},
      {"port 0: the kernel picks", "127.0.0.1:0", "", "am \"127.0.0.1:0\": port 0 cannot be dialled"},
      {"unix socket", "unix:/run/incin/am.sock", "", ""},
      {"dns target", "dns:///am.example:50051", "listen: \"dns:///am.example:50051\" is not host:port", ""},
      {"port one above", "127.0.0.1:65536", "listen: \"127.0.0.1:65536\": port 65536 is not in 0..65535",
       "am: \"127.0.0.1:65536\": port 65536 is not in 0..65535"},
      {"port 70000 (gRPC would take 4464)", ":70000", "listen: \":70000\": port 70000 is not in 0..65535",
       "am: \":70000\": port 70000 is not in 0..65535"},
      {"port 99999 (gRPC would take 34463)", "0.0.0.0:99999",
       "listen: \"0.0.0.0:99999\": port 99999 is not in 0..65535", "port 99999 is not in 0..65535"},
      {"eleven digits", "h:12345678901", "port \"12345678901\" is not a number", "is not a number"},
      {"no port", "127.0.0.1", "listen: \"127.0.0.1\" is not host:port",
       "am: \"127.0.0.1\" is not host:port"},
      {"empty port", "127.0.0.1:", "port \"\" is not a number", "port \"\" is not a number"},
      {"signed port", "127.0.0.1:+80", "port \"+80\" is not a number", "port \"+80\" is not a number"},
      {"IPv6 without brackets", "::1:50051", "an IPv6 host goes in brackets",
       "an IPv6 host goes in brackets"},
      {"empty", "", "listen is empty", "am is empty"},
      {"unix without a path", "unix:", "listen \"unix:\" has no path", ""},
  };
  for (const Case& c : cases) {
    Status listen = ValidateListenAddress(c.address, "listen");
    if (c.listen_error.empty()) {
      EXPECT_TRUE(listen.ok()) << c.name << ": " << listen.ToString();
    } else {
      EXPECT_EQ(listen.code(), Code::kInvalidArgument) << c.name;
      EXPECT_NE(listen.message().find(c.listen_error), std::string::npos)
          << c.name << ": " << listen.message();
    }
    Status dial = ValidateDialAddress(c.address, "am");
    if (c.dial_error.empty()) {
      EXPECT_TRUE(dial.ok()) << c.name << ": " << dial.ToString();
    } else {
      EXPECT_EQ(dial.code(), Code::kInvalidArgument) << c.name;
      EXPECT_NE(dial.message().find(c.dial_error), std::string::npos) << c.name << ": " << dial.message();
    }
  }
  auto hp = HostPort::Parse("[fe80::1]:7");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "[fe80::1]");
  EXPECT_EQ(hp->port, 7u);
}

}  // namespace
}  // namespace inc
