// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the ICRC proofs: random INC frames, a pcap writer, and
// the bridge to the independent Python reference (selftests/icrc_ref.py).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/frame.h"

namespace inc::selftest {

// A random but valid frame spec: addresses, QPNs, PSN, TOS/TTL, IP id, RETH,
// every INC header field and 0..INC_MAX_PAYLOAD_BYTES of random payload.
// `payload` must outlive the spec.
FrameSpec RandomFrameSpec(std::mt19937_64& rng, std::vector<uint8_t>& payload);

// Writes Ethernet frames as a classic pcap file (link type 1).
void WritePcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames);

// Runs a shell command and returns its stdout; `exit_code` gets the status.
std::string RunCommand(const std::string& command, int* exit_code);

struct PythonIcrc {
  bool roce = false;  // false: the reference skipped the frame as non-RoCEv2
  uint32_t computed = 0;
  uint32_t wire = 0;
  bool ok = false;
};

// Runs `python3 icrc_ref.py pcap FILE` and returns one entry per frame.
// Fails (gtest ADD_FAILURE) and returns what it parsed if the script errs.
std::vector<PythonIcrc> PythonIcrcOfPcap(const std::string& pcap_path);

// A fresh temporary directory, removed with its files on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string Hex(const uint8_t* data, size_t len);

}  // namespace inc::selftest
