// SPDX-License-Identifier: Apache-2.0
// ARN messages (arn/message.cc): what incswitchd's routing agent decodes from
// every datagram on its ARN socket. Each input is decoded as received, once
// without a key and once with one after the harness has put the right digest
// in (random bytes never carry one, and the checks behind it would go
// unexercised). Invariants: a digest the harness wrote is never rejected; a
// decoded message encodes and decodes back to itself; a Receiver refuses the
// same datagram a second time.
#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "arn/message.h"
#include "fuzz_check.h"

namespace {

using inc::arn::Reject;

const inc::arn::AuthKey kKey = {16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
constexpr size_t kAuthOffset = offsetof(inc_arn_msg, auth);

void CheckDecoded(const inc::arn::Message& m, const inc::arn::AuthKey& key) {
  if (m.type == inc::arn::Type::kLinkFailed) FUZZ_CHECK(m.severity == inc::arn::kSeverityFailure);
  if (m.type == inc::arn::Type::kCongestionDetected)
    FUZZ_CHECK(m.severity >= 1 && m.severity <= inc::arn::kSeverityMaxCongestion);
  std::vector<uint8_t> again = inc::arn::Encode(m, key);
  FUZZ_CHECK(again.size() == sizeof(inc_arn_msg));
  auto back = inc::arn::Decode(again.data(), again.size(), key, nullptr);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == m);

  // A group the origin belongs to, as a neighbour other than the origin.
  inc::arn::Receiver receiver(m.origin + 1, {m.origin}, key);
  FUZZ_CHECK(receiver.Accept(again.data(), again.size()).ok());
  FUZZ_CHECK(!receiver.Accept(again.data(), again.size()).ok());
  FUZZ_CHECK(receiver.rejects(Reject::kStale) == 1);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Keys come from config files as 32 hex digits.
  auto parsed_key = inc::arn::ParseAuthKey(std::string(reinterpret_cast<const char*>(data), size));
  if (parsed_key.ok()) FUZZ_CHECK(size == 32);

  std::vector<uint8_t> msg(data, data + size);
  const inc::arn::AuthKey no_key{};
  Reject why = Reject::kCount;
  auto m = inc::arn::Decode(msg.data(), msg.size(), no_key, &why);
  if (m.ok()) CheckDecoded(*m, no_key);

  if (size < sizeof(inc_arn_msg)) return 0;
  uint32_t auth = htonl(inc::arn::Digest(kKey, msg.data(), kAuthOffset));
  std::memcpy(msg.data() + kAuthOffset, &auth, sizeof(auth));
  why = Reject::kCount;
  m = inc::arn::Decode(msg.data(), msg.size(), kKey, &why);
  if (!m.ok()) {
    FUZZ_CHECK(why != Reject::kCount && why != Reject::kBadAuth);
    return 0;
  }
  CheckDecoded(*m, kKey);
  // A receiver that hears itself drops its own notice.
  inc::arn::Receiver self(m->origin, {m->origin}, kKey);
  FUZZ_CHECK(!self.Accept(msg.data(), msg.size()).ok());
  return 0;
}
