// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus, fuzz/corpus/<target>/seed-<n>, from the project's
// own builders and serializers, so every seed is an input the real senders
// produce (scripts/fuzz.sh --seeds). Seeds a parser would reject mean the
// seed or the parser is wrong: the program then fails.
//   fuzz_seeds CORPUS_DIR
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "am/topology.h"
#include "arn/message.h"
#include "common/frame.h"
#include "common/job_credential.h"
#include "credit/rsvp.h"
#include "mpi/config.h"
#include "switch/config.h"

namespace {

std::string corpus_dir;
int failures = 0;

void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_seeds: %s\n", what.c_str());
  failures++;
}

void Write(const std::string& target, int n, const std::string& bytes) {
  const std::string dir = corpus_dir + "/" + target;
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/seed-" + std::to_string(n);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Fail("cannot write " + path);
}

std::string Bytes(const std::vector<uint8_t>& v) {
  return std::string(v.begin(), v.end());
}

void Frames() {
  inc::FrameSpec s;
  s.src_mac = *inc::Mac::Parse("02:00:00:00:00:fe");
  s.dst_mac = *inc::Mac::Parse("02:00:00:00:01:01");
  s.src_ip = *inc::Ipv4::Parse("10.0.1.254");
  s.dst_ip = *inc::Ipv4::Parse("10.0.1.1");
  s.dest_qpn = 0x11;
  s.psn = 7;
  s.inc.tree_id = 1;
  s.inc.key = 0x1234;
  s.inc.msg_id = 5;
  s.inc.slot = 5;
  const std::vector<uint8_t> payload(16 * 4, 0x5a);
  // A result of 16 int32 sums, a float32 maximum with an exponent, an
  // element-less barrier result, and a member's contribution.
  s.inc.flags = INC_FLAG_RESULT;
  s.inc.count = 16;
  s.payload = payload.data();
  s.payload_len = payload.size();
  Write("frame", 1, Bytes(*inc::BuildFrame(s)));
  s.inc.dtype = INC_DTYPE_FP32;
  s.inc.op = INC_OP_MAX;
  s.inc.exponent = -3;
  Write("frame", 2, Bytes(*inc::BuildFrame(s)));
  s.inc.collective = INC_COLL_BARRIER;
  s.inc.count = 0;
  s.payload_len = 0;
  Write("frame", 3, Bytes(*inc::BuildFrame(s)));
  s.inc = inc::IncHeader{};
  s.inc.tree_id = 1;
  s.inc.count = 16;
  s.payload_len = payload.size();
  std::swap(s.src_ip, s.dst_ip);
  Write("frame", 4, Bytes(*inc::BuildFrame(s)));
}

// The key fuzz_rsvp.cc decodes with.
const inc::SipKey kRsvpKey = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
constexpr uint64_t kRsvpKeyId = 0xbeef;

void Rsvp() {
  using inc::credit::MsgType;
  inc::credit::Message m;
  m.flow.src_ip = inc::Ipv4::Parse("10.0.0.2")->host;
  m.flow.dst_ip = inc::Ipv4::Parse("10.0.3.2")->host;
  m.flow.src_port = 49152;
  m.flow.dest_qpn = 4096;
  m.hop.address = inc::Ipv4::Parse("10.3.1.1")->host;
  m.hop.lih = 2;
  m.period_ms = 1000;
  int n = 1;
  m.type = MsgType::kCreditPath;
  Write("rsvp", n++, Bytes(inc::credit::Encode(m, kRsvpKeyId, kRsvpKey, 1)));
  m.type = MsgType::kCreditResv;
  m.credit = inc::credit::Credit{inc::credit::CreditUnit::kBytes, 65536, 1u << 30};
  Write("rsvp", n++, Bytes(inc::credit::Encode(m, kRsvpKeyId, kRsvpKey, 2)));
  m.credit = inc::credit::Credit{inc::credit::CreditUnit::kMegabytes, 4, 12345};
  Write("rsvp", n++, Bytes(inc::credit::Encode(m, kRsvpKeyId, kRsvpKey, 3)));
  m.credit.reset();
  m.type = MsgType::kPathTear;
  Write("rsvp", n++, Bytes(inc::credit::Encode(m, kRsvpKeyId, kRsvpKey, 4)));
  m.type = MsgType::kResvTear;
  Write("rsvp", n++, Bytes(inc::credit::Encode(m, kRsvpKeyId, kRsvpKey, 5)));
}

void Arn() {
  using inc::arn::Type;
  const inc::arn::AuthKey none{};
  inc::arn::Message m;
  m.origin = 1;
  m.peer = 3;
  m.local_port = 2;
  m.seq = 10;
  m.timestamp_ns = 1700000000000000000ull;
  m.utilisation_ppm = 950000;
  int n = 1;
  m.type = Type::kCongestionDetected;
  m.severity = 2;
  Write("arn_message", n++, Bytes(inc::arn::Encode(m, none)));
  m.type = Type::kCongestionEliminated;
  m.severity = inc::arn::kSeverityClear;
  Write("arn_message", n++, Bytes(inc::arn::Encode(m, none)));
  m.type = Type::kLinkFailed;
  m.severity = inc::arn::kSeverityFailure;
  Write("arn_message", n++, Bytes(inc::arn::Encode(m, none)));
  m.type = Type::kLinkRestored;
  m.severity = inc::arn::kSeverityClear;
  Write("arn_message", n++, Bytes(inc::arn::Encode(m, none)));
}

std::string Json(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions pretty;
  pretty.add_whitespace = true;
  if (!google::protobuf::util::MessageToJsonString(msg, &out, pretty).ok()) Fail("cannot print JSON");
  return out;
}

void SwitchConfigs() {
  // A minimal agent, one with routes and ARN (the shape of
  // switch/tests/arn_config_test.cc's), one with credit flow control.
  const char* texts[] = {
      R"({"switchName": "leaf0", "ports": [{"name": "p0"}, {"name": "p1", "ip": "10.0.1.254"}]})",
      R"({"switchName": "leaf0", "amAddress": "127.0.0.1:50051", "logLevel": "debug", "logFormat": "json",
        "ports": [{"name": "w0", "ip": "10.0.0.254"}, {"name": "l0s0", "ip": "10.2.0.1"},
                  {"name": "l0s1", "ip": "10.2.1.1"}],
        "routes": [
          {"prefix": "10.0.2.0/24", "destSwitch": "leaf1", "hops": [
            {"port": "l0s0", "mac": "02:00:00:00:00:10", "cost": 10, "viaSwitch": "spine0"},
            {"port": "l0s1", "mac": "02:00:00:00:00:11", "cost": 10, "viaSwitch": "spine1"}]},
          {"prefix": "10.0.0.0/24", "hops": [{"port": "w0", "mac": "02:00:00:00:00:01"}]}],
        "arn": {"enabled": true, "switchId": 1, "keyHex": "000102030405060708090a0b0c0d0e0f",
          "group": [{"switchName": "leaf1", "switchId": 2, "address": "172.31.0.12"},
                    {"switchName": "spine0", "switchId": 3, "address": "172.31.0.13"},
                    {"switchName": "spine1", "switchId": 4, "address": "172.31.0.14"}],
          "ports": [{"port": "l0s0", "capacityBps": "1000000000", "peerSwitch": "spine0"},
                    {"port": "w0", "capacityBps": "1000000000"}]}})",
      R"({"switchName": "gw0", "ports": [{"name": "lan0"}, {"name": "wan0"}, {"name": "wan1"}],
        "credit": {"enabled": true, "reserveBytes": 131072, "returnQuantumBytes": 8192, "heartbeatMs": 50,
          "keyHex": "000102030405060708090a0b0c0d0e0f", "keyId": 7,
          "ports": [{"port": "wan0", "neighborIp": "10.3.1.2", "nextHopMac": "02:1a:00:03:00:02", "cost": 10},
                    {"port": "wan1", "neighborIp": "10.3.3.2", "nextHopMac": "02:1a:00:03:02:02", "cost": 20}],
          "flows": [{"flow": {"srcIp": "10.0.0.2", "dstIp": "10.0.3.2", "udpSport": 49152, "destQpn": 4096}},
                    {"flow": {"srcIp": "10.0.1.2", "dstIp": "10.0.3.2", "udpSport": 49152, "destQpn": 4096},
                     "ports": ["wan1"]}],
          "localPrefixes": ["10.0.0.0/23"]}})",
  };
  int n = 1;
  for (const char* text : texts) {
    auto config = inc::sw::ParseConfigJson(text);
    if (!config.ok()) {
      Fail("switch config seed " + std::to_string(n) + ": " + config.status().message());
      continue;
    }
    Write("switch_config", n++, Json(*config));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void AmFiles() {
  const std::string examples = std::string(INC_SOURCE_DIR) + "/userspace/am/examples/";
  inc::v1::AmConfig am;
  auto st = inc::am::ParseJsonText(ReadFile(examples + "am.json"), "am.json", &am);
  if (!st.ok()) Fail(st.message());
  Write("am_config", 1, Json(am));
  am.set_move_on_congestion_severity(2);
  am.set_log_format("json");
  Write("am_config", 2, Json(am));
  Write("am_config", 3, Json(inc::v1::AmConfig{}));

  inc::v1::TopologyFile topo;
  st = inc::am::ParseJsonText(ReadFile(examples + "topology.json"), "topology.json", &topo);
  if (!st.ok()) Fail(st.message());
  Write("am_topology", 1, Json(topo));
  // One leaf, two hosts: the single-switch case.
  inc::v1::TopologyFile single;
  *single.add_switches() = topo.switches(0);
  for (const auto& h : topo.hosts())
    if (h.switch_name() == topo.switches(0).name()) *single.add_hosts() = h;
  Write("am_topology", 2, Json(single));
}

inc::v1::Endpoint Endpoint(const std::string& port, const std::string& ip, uint32_t qpn, uint32_t lo,
                           uint32_t hi) {
  inc::v1::Endpoint e;
  e.set_port(port);
  e.set_peer_mac("02:00:00:00:01:01");
  e.set_peer_ip(ip);
  e.set_peer_qpn(qpn);
  e.set_switch_qpn(qpn + 0x100);
  e.set_rkey(0x42);
  e.set_va_base(0x10000);
  e.set_slot_stride(3072);
  e.set_member_lo(lo);
  e.set_member_hi(hi);
  e.set_peer_name("w" + std::to_string(lo));
  return e;
}

void TreeConfigs() {
  inc::v1::TreeConfig single;
  single.set_tree_id(1);
  single.set_key(0x1234);
  single.set_role(inc::v1::SINGLE);
  single.set_pool_size(64);
  single.set_elems_per_packet(240);
  single.set_slot_base(128);
  single.add_dtypes(inc::v1::DataType(INC_DTYPE_INT32));
  single.add_dtypes(inc::v1::DataType(INC_DTYPE_FP32));
  single.add_ops(inc::v1::ReduceOp(INC_OP_SUM));
  single.add_collectives(inc::v1::Collective(INC_COLL_ALLREDUCE));
  *single.add_children() = Endpoint("p1", "10.0.1.1", 0x11, 0, 1);
  *single.add_children() = Endpoint("p2", "10.0.1.2", 0x12, 1, 2);
  single.set_job_id("job-1");
  Write("switch_translate", 1, single.SerializeAsString());

  inc::v1::TreeConfig leaf = single;
  leaf.set_role(inc::v1::LEAF);
  *leaf.mutable_parent() = Endpoint("up0", "10.1.0.1", 0x21, 0, 4);
  leaf.set_rank_at_parent(1);
  Write("switch_translate", 2, leaf.SerializeAsString());

  inc::v1::TreeConfig root = single;
  root.set_role(inc::v1::ROOT);
  root.clear_dtypes();
  Write("switch_translate", 3, root.SerializeAsString());
}

void Registrations() {
  inc::v1::RegisterSwitchRequest req;
  req.set_switch_name("leaf1");
  req.set_agent_address("10.0.0.1:50061");
  auto* c = req.mutable_capabilities();
  for (int d = 1; d <= inc::v1::DataType_MAX; d++) c->add_dtypes(inc::v1::DataType(d));
  for (int o = 1; o <= inc::v1::ReduceOp_MAX; o++) c->add_ops(inc::v1::ReduceOp(o));
  for (int k = 1; k <= inc::v1::Collective_MAX; k++) c->add_collectives(inc::v1::Collective(k));
  c->set_max_children(64);
  c->set_slot_capacity(4096);
  c->set_free_slots(4000);
  c->set_max_trees(1023);
  c->set_max_elems_per_packet(768);
  for (int i = 1; i <= 2; i++) {
    auto* p = req.add_ports();
    p->set_name("p" + std::to_string(i));
    p->set_ifindex(10 + i);
    p->set_mac("02:00:00:00:00:0" + std::to_string(i));
    p->set_ip("10.0.1.25" + std::to_string(i));
    p->set_mtu(9000);
    p->set_up(true);
    p->set_xdp_attached(true);
    p->set_xdp_mode("native");
  }
  req.add_live_tree_ids(1);
  Write("am_convert", 1, req.SerializeAsString());
  req.clear_ports();
  req.mutable_capabilities()->clear_dtypes();
  req.set_agent_address("[::1]:50061");
  Write("am_convert", 2, req.SerializeAsString());
}

void MpiEnvironments() {
  const std::string blocks[] = {
      "INCMPI_AM=10.0.0.100:50051\nINCMPI_IFACE=eth0\nINCMPI_MIN_BYTES=64K\nINCMPI_MAX_BYTES=1G\n",
      "INCMPI_ENABLE=1\nINCMPI_TRANSPORT=xdp\nINCMPI_JOB_ID=job-7\nINCMPI_JOIN_TIMEOUT_MS=5000\n"
      "INCMPI_FLOAT_SUM=fallback\nINCMPI_REDUCE_MODE=native\nINCMPI_BROADCAST_MODE=allreduce\n"
      "INCMPI_LOG_LEVEL=debug\nINCMPI_FALLBACK_LOG_LEVEL=info\nINCMPI_FALLBACK_LOG=all\n"
      "INCMPI_SUMMARY=all\nINCMPI_SUMMARY_JSON=/tmp/incmpi-%r.json\n",
      "INCMPI_ENABLE=off\nINCMPI_SUMMARY=1\nINCMPI_TYPO=1\nPATH=/usr/bin\n",
  };
  int n = 1;
  for (const std::string& block : blocks) {
    std::istringstream lines(block);
    std::vector<std::string> kept;
    for (std::string line; std::getline(lines, line);) kept.push_back(line);
    auto config = inc::mpi::ParseConfig([&](const char* name) -> const char* {
      for (const std::string& l : kept)
        if (l.rfind(std::string(name) + "=", 0) == 0) return l.c_str() + std::strlen(name) + 1;
      return nullptr;
    });
    if (!config.ok()) Fail("mpi seed " + std::to_string(n) + ": " + config.status().message());
    Write("mpi_env", n++, block);
  }
}

// JoinGroup's job id and credential, "JOB\nCREDENTIAL", under the harness's
// secret (64 'f' hex digits): the right one (any host, for host h0 and
// another), another job's, none, a job id with ':' and '/', a malformed
// one, one of the old format.
void JobCredentialInputs() {
  const auto c = *inc::JobCredentials::FromHex(std::string(64, 'f'), "fuzz");
  auto issue = [&](const std::string& job, std::vector<std::string> hosts) {
    return *c.Issue({job, 1000, 4000000000000, std::move(hosts)});
  };
  const std::string inputs[] = {"train-7\n" + issue("train-7", {}),
                                "train-7\n" + issue("other", {}),
                                "j\n",
                                "a:b/c\n" + issue("a:b/c", {"h0"}),
                                "x\nincjob2:zz:x",
                                "acme/t\n" + issue("acme/t", {"h0", "h9"}),
                                "x\nincjob1:" + std::string(64, '0') + ":x"};
  int n = 1;
  for (const std::string& input : inputs) Write("job_credential", n++, input);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  corpus_dir = argv[1];
  Frames();
  Rsvp();
  Arn();
  SwitchConfigs();
  AmFiles();
  TreeConfigs();
  Registrations();
  MpiEnvironments();
  JobCredentialInputs();
  if (failures) return 1;
  std::printf("fuzz_seeds: wrote the seed corpus under %s\n", corpus_dir.c_str());
  return 0;
}
