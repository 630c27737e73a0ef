// SPDX-License-Identifier: Apache-2.0
#include "icrc_test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/abi/tree.h"

#ifndef INC_SELFTESTS_DIR
#error "INC_SELFTESTS_DIR must point at the selftests source folder"
#endif

namespace inc::selftest {

FrameSpec RandomFrameSpec(std::mt19937_64& rng, std::vector<uint8_t>& payload) {
  auto u = [&rng](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  FrameSpec s;
  for (auto& b : s.src_mac.bytes) b = static_cast<uint8_t>(u(0, 255));
  for (auto& b : s.dst_mac.bytes) b = static_cast<uint8_t>(u(0, 255));
  s.src_mac.bytes[0] &= 0xFE;  // unicast
  s.dst_mac.bytes[0] &= 0xFE;
  s.src_ip.host = static_cast<uint32_t>(u(0x01000000, 0xDFFFFFFF));
  s.dst_ip.host = static_cast<uint32_t>(u(0x01000000, 0xDFFFFFFF));
  s.tos = static_cast<uint8_t>(u(0, 255));
  s.ttl = static_cast<uint8_t>(u(1, 255));
  s.ip_id = static_cast<uint16_t>(u(0, 0xFFFF));
  s.src_qpn = static_cast<uint32_t>(u(0, INC_QPN_MASK));
  s.dest_qpn = static_cast<uint32_t>(u(0, INC_QPN_MASK));
  s.psn = static_cast<uint32_t>(u(0, INC_PSN_MASK));
  s.solicited = u(0, 1);
  s.va = u(0, UINT64_MAX);
  s.rkey = static_cast<uint32_t>(u(0, UINT32_MAX));
  IncHeader& h = s.inc;
  h.flags = static_cast<uint8_t>(u(0, INC_FLAGS_MASK));
  h.collective = static_cast<uint8_t>(u(INC_COLL_ALLREDUCE, INC_COLL_ALLGATHER));
  h.dtype = static_cast<uint8_t>(u(INC_DTYPE_INT32, INC_DTYPE_FP64));
  h.op = static_cast<uint8_t>(u(INC_OP_SUM, INC_OP_MAX));
  h.tree_id = static_cast<uint16_t>(u(1, INC_MAX_TREES - 1));
  h.rank = u(0, 7) == 0 ? INC_RANK_RESULT : static_cast<uint16_t>(u(0, INC_MAX_CHILDREN - 1));
  h.msg_id = static_cast<uint32_t>(u(0, UINT32_MAX));
  h.slot = static_cast<uint16_t>(h.msg_id % 256);
  h.key = static_cast<uint32_t>(u(0, UINT32_MAX));
  h.exponent = static_cast<int8_t>(u(0, 255));
  h.root_rank = static_cast<uint8_t>(u(0, 63));
  size_t elem = inc_dtype_size(h.dtype);
  size_t count = u(0, INC_MAX_PAYLOAD_BYTES / elem);
  h.count = static_cast<uint16_t>(count);
  payload.resize(count * elem);
  for (auto& b : payload) b = static_cast<uint8_t>(u(0, 255));
  s.payload = payload.data();
  s.payload_len = payload.size();
  return s;
}

void WritePcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  std::ofstream out(path, std::ios::binary);
  auto put32 = [&out](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto put16 = [&out](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  put32(0xA1B2C3D4);  // microsecond timestamps, host (little-endian) order
  put16(2);
  put16(4);
  put32(0);
  put32(0);
  put32(65535);
  put32(1);  // LINKTYPE_ETHERNET
  uint32_t usec = 0;
  for (const auto& f : frames) {
    put32(1700000000);
    put32(usec++);
    put32(static_cast<uint32_t>(f.size()));
    put32(static_cast<uint32_t>(f.size()));
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
  if (!out) ADD_FAILURE() << "writing " << path << " failed";
}

std::string RunCommand(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *exit_code = -1;
    return output;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

std::vector<PythonIcrc> PythonIcrcOfPcap(const std::string& pcap_path) {
  std::vector<PythonIcrc> result;
  int rc = 0;
  std::string out =
      RunCommand("python3 " INC_SELFTESTS_DIR "/icrc_ref.py pcap '" + pcap_path + "' 2>&1", &rc);
  if (rc != 0) {
    ADD_FAILURE() << "icrc_ref.py exited with " << rc << ":\n" << out;
    return result;
  }
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    size_t index;
    std::string computed, wire, verdict;
    if (!(fields >> index >> computed >> wire >> verdict) || index != result.size()) {
      ADD_FAILURE() << "unexpected icrc_ref.py line: " << line;
      return result;
    }
    PythonIcrc r;
    if (verdict != "SKIP") {
      r.roce = true;
      r.computed = static_cast<uint32_t>(std::stoul(computed, nullptr, 16));
      r.wire = static_cast<uint32_t>(std::stoul(wire, nullptr, 16));
      r.ok = verdict == "OK";
    }
    result.push_back(r);
  }
  return result;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/incin-icrc-XXXXXX";
  const char* made = mkdtemp(tmpl);
  if (made) path_ = made;
}

TempDir::~TempDir() {
  if (!path_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string Hex(const uint8_t* data, size_t len) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(len * 2);
  for (size_t i = 0; i < len; i++) {
    s.push_back(kDigits[data[i] >> 4]);
    s.push_back(kDigits[data[i] & 15]);
  }
  return s;
}

}  // namespace inc::selftest
