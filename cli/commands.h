// SPDX-License-Identifier: Apache-2.0
// incinctl's commands as a library: Run() parses the arguments and runs one
// command against an AggregationManager stub, writing to the given streams,
// so tests run the CLI in-process against a real AM.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cli/format.h"
#include "inc/v1/inc.grpc.pb.h"

namespace inc::cli {

// What scripts can rely on (documented in --help and docs/operations.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,        // bad command line
  kExitAmError = 2,      // the AM answered with an error other than NOT_FOUND
  kExitUnreachable = 3,  // UNAVAILABLE or DEADLINE_EXCEEDED: no answer in time; retrying may help
  kExitNotFound = 4,     // NOT_FOUND: no such tree, switch or job
};

int ExitCodeFor(grpc::StatusCode code);
// "NOT_FOUND", "UNAVAILABLE", ...
const char* StatusCodeName(grpc::StatusCode code);

using AmStub = v1::AggregationManager::StubInterface;
// Builds the stub for --am ADDRESS with the credentials --cert/--key/--ca
// (or --insecure) chose.
using Connector = std::function<std::unique_ptr<AmStub>(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials)>;
std::unique_ptr<AmStub> ConnectToAm(const std::string& address,
                                    const std::shared_ptr<grpc::ChannelCredentials>& credentials);

constexpr const char* kDefaultAmAddress = "127.0.0.1:50051";

// Everything a command needs besides its own arguments.
struct CommandContext {
  AmStub& stub;
  std::string am_address;  // for messages
  OutputFormat format = OutputFormat::kTable;
  std::chrono::milliseconds timeout{10'000};
  std::ostream& out;
  std::ostream& err;
  // For calls to switch agents (arn status, credit show); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr;
};

int SwitchList(CommandContext& ctx);
int SwitchShow(CommandContext& ctx, const std::string& name);
int TopologyShow(CommandContext& ctx);
int TreeCreate(CommandContext& ctx, const v1::CreateTreeRequest& request);
int TreeList(CommandContext& ctx);
// tree_id 0 and empty job: every tree.
int TreeShow(CommandContext& ctx, uint32_t tree_id, const std::string& job_id);
int TreeDelete(CommandContext& ctx, uint32_t tree_id, const std::string& reason);
int Stats(CommandContext& ctx, uint32_t tree_id, bool all);

struct EventsOptions {
  bool follow = false;  // keep the stream open for new events
  bool replay = false;  // with follow: print the remembered events first
  std::string kind;     // only events of this kind (empty: all)
  uint64_t limit = 0;   // exit after this many printed events (0: no limit)
};
int Events(CommandContext& ctx, const EventsOptions& options);

// ARN and best-path state of one switch (name) or of every switch (empty),
// asked of each switch agent at the address the AM knows for it.
int ArnStatus(CommandContext& ctx, const std::string& switch_name);

int Version(std::ostream& out, OutputFormat format);

// The whole CLI. args excludes the program name. What --am, --cert, --key,
// --ca and --insecure do not give comes from $INCIN_AM, $INCIN_TLS_CERT,
// $INCIN_TLS_KEY, $INCIN_TLS_CA and $INCIN_INSECURE, then from the user's
// and the system's incinctl.json (client_config.h).
int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const Connector& connect = ConnectToAm);

}  // namespace inc::cli
