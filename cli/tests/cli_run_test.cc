// SPDX-License-Identifier: Apache-2.0
// incinctl's command line and exit codes, run in-process: parsing errors,
// help, where the AM address comes from, and what happens when the AM cannot
// be reached (a refused port, a peer that never answers).

// clang-format off
// First: <sys/socket.h> defines an AF_XDP macro that would clobber the
// generated enum value inc::v1::AF_XDP.
#include "cli/commands.h"

#include "cli/tests/cli_test_util.h"
// clang-format on

#include <arpa/inet.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/version.h"

namespace inc::cli {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunCli(const std::vector<std::string>& args, const Connector& connect = ConnectToAm) {
  std::ostringstream out, err;
  int code = Run(args, out, err, connect);
  return {code, out.str(), err.str()};
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A TCP socket on 127.0.0.1 with an ephemeral port. listen=false: bound
// only, so connecting is refused; listen=true: the kernel completes the
// handshake but nobody ever reads, so an RPC waits for its deadline.
class LocalSocket {
 public:
  explicit LocalSocket(bool listen) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (listen && ::listen(fd_, 16) != 0) port_ = 0;
  }
  ~LocalSocket() {
    if (fd_ >= 0) close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool ok() const { return port_ != 0; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A connector for commands that must fail before they reach the AM.
Connector MustNotContactAm(const std::string& what) {
  return [what](const std::string&,
                const std::shared_ptr<grpc::ChannelCredentials>&) -> std::unique_ptr<AmStub> {
    ADD_FAILURE() << what << ": a usage error must not contact the AM";
    return nullptr;
  };
}

TEST(CliRun, HelpExitsZeroAndDocumentsExitCodesAndExamples) {
  Result r = RunCli({"--help"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  for (const char* text : {"switch", "topology", "tree", "stats", "events", "version", "--am", "--output",
                           "--timeout", "Exit codes:", "4  not found", "Examples:"})
    EXPECT_TRUE(Contains(r.out, text)) << "missing '" << text << "' in:\n" << r.out;
}

TEST(CliRun, EverySubcommandHasHelpWithExamples) {
  for (std::vector<std::string> cmd : {std::vector<std::string>{"switch", "list"},
                                       {"switch", "show"},
                                       {"topology", "show"},
                                       {"tree", "create"},
                                       {"tree", "list"},
                                       {"tree", "show"},
                                       {"tree", "delete"},
                                       {"stats"},
                                       {"events"},
                                       {"version"}}) {
    cmd.push_back("--help");
    Result r = RunCli(cmd);
    EXPECT_EQ(r.code, kExitOk) << cmd[0] << ": " << r.err;
    EXPECT_TRUE(Contains(r.out, "incinctl " + cmd[0])) << cmd[0] << " help has no example:\n" << r.out;
  }
}

TEST(CliRun, UsageErrorsExitOne) {
  const std::vector<std::vector<std::string>> bad = {
      {},                                                  // no command
      {"frobnicate"},                                      // unknown command
      {"tree"},                                            // group without a command
      {"tree", "show", "3", "--job", "j"},                 // id and --job exclude each other
      {"tree", "show", "0"},                               // tree ids start at 1
      {"tree", "show", "seven"},                           // not a number
      {"tree", "delete"},                                  // id required
      {"tree", "create", "--world", "2", "--host", "h1"},  // --job required
      {"tree", "create", "--job", "j", "--host", "h1"},    // --world required
      {"switch", "show"},                                  // name required
      {"switch", "list", "-o", "yaml"},                    // unknown format
      {"switch", "list", "--timeout", "-1"},               // timeout must be positive
      {"stats", "--bogus"},                                // unknown flag
      {"tree", "create", "--job", "j", "--world", "1", "--host", "h1", "--dtype", "fp33"},  // unknown dtype
      {"tree", "create", "--job", "j", "--world", "1", "--host", "h1", "--op", "avg"},      // unknown op
  };
  for (const auto& args : bad) {
    Result r = RunCli(
        args,
        [](const std::string&, const std::shared_ptr<grpc::ChannelCredentials>&) -> std::unique_ptr<AmStub> {
          ADD_FAILURE() << "a usage error must not contact the AM";
          return nullptr;
        });
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.code, kExitUsage) << "args: " << joined << "\nstderr: " << r.err;
    EXPECT_FALSE(r.err.empty()) << "args: " << joined;
  }
}

TEST(CliRun, UnknownOrMissingCommandsAreNamedWithTheGroupsCommands) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::string want;  // the whole first line of stderr
  };
  const std::string top =
      "commands: switch, arn, credit, topology, tree, job, stats, events, version (see --help)";
  const Case cases[] = {
      {"unknown top-level command", {"bogus"}, "incinctl: unknown command 'bogus'; " + top},
      {"unknown command after a global option",
       {"--am", "10.0.0.1:1", "bogus"},
       "incinctl: unknown command 'bogus'; " + top},
      {"unknown command in a group",
       {"tree", "bogus"},
       "incinctl: unknown command 'tree bogus'; commands (tree): create, list, show, delete (see --help)"},
      {"no command at all", {}, "incinctl: no command given; " + top},
      {"group without its command",
       {"switch"},
       "incinctl: no command given (switch); commands: list, show (see --help)"},
  };
  for (const Case& c : cases) {
    Result r = RunCli(c.args, MustNotContactAm(c.name));
    EXPECT_EQ(r.code, kExitUsage) << c.name;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), c.want) << c.name;
    EXPECT_TRUE(r.out.empty()) << c.name << ": " << r.out;
  }
}

TEST(CliRun, NumbersThatAreNotWhatTheOptionMeansAreRefused) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::string want;  // in stderr
  };
  const Case cases[] = {
      {"timeout NaN",
       {"switch", "list", "--timeout", "nan"},
       "--timeout: must be a finite number of seconds above 0, got 'nan'"},
      {"timeout infinite",
       {"switch", "list", "--timeout", "inf"},
       "--timeout: must be a finite number of seconds above 0, got 'inf'"},
      {"timeout zero", {"switch", "list", "--timeout", "0"}, "got '0'"},
      {"timeout not a number", {"switch", "list", "--timeout", "soon"}, "got 'soon'"},
      {"negative event limit",
       {"events", "--limit", "-5"},
       "--limit: must be a whole number from 0 to 18446744073709551615, got '-5'"},
      {"event limit beyond 64 bits",
       {"events", "--limit", "18446744073709551616"},
       "got '18446744073709551616'"},
      {"hexadecimal tree id",
       {"tree", "show", "0x10"},
       "must be a whole number from 1 to 4294967295, got '0x10'"},
      {"negative stats tree",
       {"stats", "--tree", "-1"},
       "--tree: must be a whole number from 0 to 4294967295"},
      {"negative pool size",
       {"tree", "create", "--job", "j", "--world", "1", "--host", "h1", "--pool-size", "-1"},
       "--pool-size: must be a whole number from 0 to 4294967295, got '-1'"},
      {"world size with a sign",
       {"tree", "create", "--job", "j", "--world", "+2", "--host", "h1,h2"},
       "got '+2'"},
  };
  for (const Case& c : cases) {
    Result r = RunCli(c.args, MustNotContactAm(c.name));
    EXPECT_EQ(r.code, kExitUsage) << c.name;
    EXPECT_TRUE(Contains(r.err, c.want)) << c.name << ": " << r.err;
  }
}

// An AM that only records the GetTree requests it gets and answers NOT_FOUND.
class GetTreeRecorder final : public v1::AggregationManager::Service {
 public:
  grpc::Status GetTree(grpc::ServerContext*, const v1::GetTreeRequest* request,
                       v1::GetTreeResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ids_.push_back(request->tree_id());
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no tree " + std::to_string(request->tree_id()));
  }
  std::vector<uint32_t> ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_;
  }

 private:
  std::mutex mu_;
  std::vector<uint32_t> ids_;
};

TEST(CliRun, NumbersWithLeadingZerosAreDecimal) {
  GetTreeRecorder am;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&am);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server && port != 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(RunCli({"tree", "show", "010", "--am", address}).code, kExitNotFound);
  EXPECT_EQ(RunCli({"tree", "show", "0000000000000000000000042", "--am", address}).code, kExitNotFound);
  EXPECT_EQ(am.ids(), (std::vector<uint32_t>{10, 42}));
  server->Shutdown();
}

TEST(CliRun, VersionFlagPrintsTheProjectVersionWithoutTheAm) {
  Result r = RunCli({"--version"}, MustNotContactAm("--version"));
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, std::string("incinctl ") + kVersion + " (API inc.v1)\n");
  EXPECT_EQ(RunCli({"version"}).out, r.out) << "the flag and the command agree";
}

TEST(CliRun, ExitCodeForEveryGrpcCode) {
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OK), kExitOk);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::NOT_FOUND), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAVAILABLE), kExitUnreachable);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::DEADLINE_EXCEEDED), kExitUnreachable);
  for (grpc::StatusCode code :
       {grpc::StatusCode::CANCELLED, grpc::StatusCode::UNKNOWN, grpc::StatusCode::INVALID_ARGUMENT,
        grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::ABORTED, grpc::StatusCode::OUT_OF_RANGE, grpc::StatusCode::UNIMPLEMENTED,
        grpc::StatusCode::INTERNAL, grpc::StatusCode::DATA_LOSS, grpc::StatusCode::UNAUTHENTICATED})
    EXPECT_EQ(ExitCodeFor(code), kExitAmError) << StatusCodeName(code);
  EXPECT_STREQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_STREQ(StatusCodeName(grpc::StatusCode::NOT_FOUND), "NOT_FOUND");
}

TEST(CliRun, VersionNeedsNoAmAndPrintsJson) {
  auto no_am = [](const std::string&,
                  const std::shared_ptr<grpc::ChannelCredentials>&) -> std::unique_ptr<AmStub> {
    ADD_FAILURE() << "version must not contact the AM";
    return nullptr;
  };
  Result table = RunCli({"version"}, no_am);
  EXPECT_EQ(table.code, kExitOk);
  EXPECT_TRUE(Contains(table.out, "incinctl ")) << table.out;
  Result json = RunCli({"version", "-o", "json"}, no_am);
  EXPECT_EQ(json.code, kExitOk);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  EXPECT_EQ(parsed.fields().at("api").string_value(), "inc.v1");
  EXPECT_FALSE(parsed.fields().at("incinctl").string_value().empty());
}

TEST(CliRun, AmAddressFromFlagThenEnvironmentThenDefault) {
  std::vector<std::string> seen;
  Connector record = [&](const std::string& address,
                         const std::shared_ptr<grpc::ChannelCredentials>&) -> std::unique_ptr<AmStub> {
    seen.push_back(address);
    return nullptr;  // no stub: the CLI reports it and exits 3
  };
  {
    ScopedEnv env("INCIN_AM", nullptr);
    EXPECT_EQ(RunCli({"switch", "list"}, record).code, kExitUnreachable);
  }
  {
    ScopedEnv env("INCIN_AM", "10.1.2.3:7000");
    EXPECT_EQ(RunCli({"switch", "list"}, record).code, kExitUnreachable);
    // The flag wins, and global options may follow the subcommand.
    EXPECT_EQ(RunCli({"tree", "list", "--am", "10.9.9.9:1", "-o", "json"}, record).code, kExitUnreachable);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{kDefaultAmAddress, "10.1.2.3:7000", "10.9.9.9:1"}));
}

TEST(CliRun, RefusedConnectionExitsThreeWithUnavailable) {
  LocalSocket refused(/*listen=*/false);
  ASSERT_TRUE(refused.ok());
  for (std::vector<std::string> cmd : {std::vector<std::string>{"switch", "list"},
                                       {"tree", "show", "3"},
                                       {"events"},
                                       {"stats", "-o", "json"}}) {
    cmd.insert(cmd.end(), {"--am", refused.address()});
    Result r = RunCli(cmd);
    EXPECT_EQ(r.code, kExitUnreachable) << cmd[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("incinctl: UNAVAILABLE: ", 0), 0u) << r.err;
    EXPECT_TRUE(Contains(r.err, "AM at " + refused.address())) << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing on stdout on failure: " << r.out;
  }
}

TEST(CliRun, SilentPeerExitsThreeWithDeadlineExceeded) {
  LocalSocket silent(/*listen=*/true);
  ASSERT_TRUE(silent.ok());
  Result r = RunCli({"tree", "list", "--am", silent.address(), "--timeout", "0.3"});
  EXPECT_EQ(r.code, kExitUnreachable) << r.err;
  EXPECT_EQ(r.err.rfind("incinctl: DEADLINE_EXCEEDED: ", 0), 0u) << r.err;
  EXPECT_TRUE(Contains(r.err, "timeout 0.3s")) << r.err;
}

}  // namespace
}  // namespace inc::cli
