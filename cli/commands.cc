// SPDX-License-Identifier: Apache-2.0
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "cli/client_config.h"
#include "common/settings.h"
#include "common/tls.h"
#include "common/version.h"

namespace inc::cli {
namespace {

// Prints "incinctl: CODE: message" and returns the exit code for it.
int ReportError(CommandContext& ctx, const grpc::Status& status) {
  ctx.err << "incinctl: " << StatusCodeName(status.error_code()) << ": " << status.error_message();
  int code = ExitCodeFor(status.error_code());
  if (code == kExitUnreachable) {
    ctx.err << " (AM at " << ctx.am_address << ", timeout " << ctx.timeout.count() / 1000.0 << "s)";
  }
  ctx.err << '\n';
  return code;
}

void SetDeadline(const CommandContext& ctx, grpc::ClientContext& cc) {
  cc.set_deadline(std::chrono::system_clock::now() + ctx.timeout);
}

// One unary RPC with the context's deadline; errors are reported.
template <typename Req, typename Resp>
int Call(CommandContext& ctx, grpc::Status (AmStub::*method)(grpc::ClientContext*, const Req&, Resp*),
         const Req& request, Resp* response) {
  grpc::ClientContext cc;
  SetDeadline(ctx, cc);
  grpc::Status status = (ctx.stub.*method)(&cc, request, response);
  if (!status.ok()) return ReportError(ctx, status);
  return kExitOk;
}

bool Json(const CommandContext& ctx) {
  return ctx.format == OutputFormat::kJson;
}

// A whole number in [min, max], written in decimal digits only (leading
// zeros are dropped before CLI11 converts it). CLI11's own conversion
// (strtoull, base 0) takes "-5" as 2^64 - 5 and "010" as 8, and its
// PositiveNumber would print its range as a 300-digit double.
CLI::Validator WholeNumber(uint64_t min, uint64_t max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        const std::string bad = "must be a whole number from " + range + ", got '" + value + "'";
        if (value.empty()) return bad;
        uint64_t n = 0;
        for (char c : value) {
          if (c < '0' || c > '9') return bad;
          const uint64_t digit = static_cast<uint64_t>(c - '0');
          if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) return bad;
          n = n * 10 + digit;
        }
        if (n < min || n > max) return bad;
        value = std::to_string(n);
        return "";
      },
      "N in " + std::to_string(min) + ".." + std::to_string(max));
}

// Tree ids and world sizes.
const CLI::Validator kAtLeastOne = WholeNumber(1, std::numeric_limits<uint32_t>::max());
// Other 32-bit counts where 0 means "the default" or "all".
const CLI::Validator kUint32 = WholeNumber(0, std::numeric_limits<uint32_t>::max());

// Seconds: finite and above zero (NaN compares false with everything, so
// CLI11's PositiveNumber lets it through; inf would mean no deadline).
const CLI::Validator kSeconds(
    [](std::string& value) -> std::string {
      double s = 0;
      if (!CLI::detail::lexical_cast(value, s) || !std::isfinite(s) || s <= 0)
        return "must be a finite number of seconds above 0, got '" + value + "'";
      return "";
    },
    "SECONDS>0");

// Lower-case enum value names without the type prefix and without the
// UNSPECIFIED value: the spellings the command line accepts.
std::vector<std::string> EnumChoices(const google::protobuf::EnumDescriptor* d, const std::string& prefix) {
  std::vector<std::string> names;
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() == 0) continue;
    std::string n = d->value(i)->name();
    if (n.rfind(prefix, 0) == 0) n = n.substr(prefix.size());
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names.push_back(n);
  }
  return names;
}

// The enum number of a command-line name (case-insensitive), or 0.
int EnumFromName(const google::protobuf::EnumDescriptor* d, const std::string& prefix, std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const google::protobuf::EnumValueDescriptor* v = d->FindValueByName(prefix + text);
  if (!v) v = d->FindValueByName(text);
  return v ? v->number() : 0;
}

CLI::Validator EnumValidator(const google::protobuf::EnumDescriptor* d, const std::string& prefix) {
  std::vector<std::string> choices = EnumChoices(d, prefix);
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ",") + c;
  return CLI::Validator(
      [d, prefix, list](std::string& value) -> std::string {
        if (EnumFromName(d, prefix, value) != 0) return "";
        return "'" + value + "' is not one of " + list;
      },
      "{" + list + "}");
}

std::string VersionLine() {
  return std::string("incinctl ") + kVersion + " (API inc.v1)";
}

// The names of a command group's commands, "a, b, c".
std::string CommandNames(CLI::App* group) {
  std::string names;
  for (const CLI::App* sub : group->get_subcommands({}))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// A parse that failed because a command group (incinctl itself, "tree", ...)
// got no command or a word that is none of its commands: says which, and
// what the group's commands are. Empty for any other parse error.
std::string UnknownCommandMessage(CLI::App& app, const std::vector<std::string>& args) {
  std::string path;
  CLI::App* group = &app;
  for (;;) {
    std::vector<CLI::App*> chosen = group->get_subcommands();
    if (chosen.empty()) break;
    group = chosen.front();
    path += group->get_name() + " ";
  }
  if (group->get_subcommands({}).empty()) return "";  // a command, not a group
  // The word given instead of a command: the first leftover argument that
  // is not an option.
  std::string word;
  std::vector<std::string> left = app.remaining();
  for (const std::string& a : args) {
    if (a.empty() || a[0] == '-') continue;
    if (std::find(left.begin(), left.end(), a) != left.end()) {
      word = a;
      break;
    }
  }
  const std::string where = path.empty() ? "" : " (" + path.substr(0, path.size() - 1) + ")";
  if (word.empty())
    return "no command given" + where + "; commands: " + CommandNames(group) + " (see --help)";
  return "unknown command '" + path + word + "'; commands" + where + ": " + CommandNames(group) +
         " (see --help)";
}

// Subcommand help does not list the parent's options; say they exist.
std::string WithGlobals(const std::string& footer) {
  return footer +
         "\n\nGlobal options, before or after the command: --am ADDR, -o table|json,\n"
         "--timeout SECONDS, --cert FILE --key FILE --ca FILE (or --insecure).\n"
         "Exit codes: see incinctl --help.";
}

}  // namespace

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return kExitOk;
    case grpc::StatusCode::NOT_FOUND: return kExitNotFound;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return kExitUnreachable;
    default: return kExitAmError;
  }
}

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

std::unique_ptr<AmStub> ConnectToAm(const std::string& address,
                                    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  return v1::AggregationManager::NewStub(grpc::CreateChannel(address, credentials));
}

int SwitchList(CommandContext& ctx) {
  v1::ListSwitchesResponse response;
  if (int rc = Call(ctx, &AmStub::ListSwitches, v1::ListSwitchesRequest(), &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    PrintSwitchList(response, ctx.out);
  return kExitOk;
}

// Asks every registered switch (or the one named) for a report over the
// SwitchAgent service, then prints the reports as JSON or with `print`.
template <typename Request, typename Report>
int EverySwitch(CommandContext& ctx, const std::string& switch_name,
                grpc::Status (v1::SwitchAgent::Stub::*rpc)(grpc::ClientContext*, const Request&, Report*),
                void (*print)(const Report&, std::ostream&)) {
  v1::ListSwitchesResponse switches;
  if (int rc = Call(ctx, &AmStub::ListSwitches, v1::ListSwitchesRequest(), &switches)) return rc;
  std::vector<Report> reports;
  bool found = false;
  int rc = kExitOk;
  for (const auto& sw : switches.switches()) {
    if (!switch_name.empty() && sw.name() != switch_name) continue;
    found = true;
    auto agent = v1::SwitchAgent::NewStub(grpc::CreateChannel(
        sw.agent_address(), ctx.credentials ? ctx.credentials : grpc::InsecureChannelCredentials()));
    grpc::ClientContext cc;
    SetDeadline(ctx, cc);
    Report report;
    grpc::Status status = ((*agent).*rpc)(&cc, Request(), &report);
    if (!status.ok()) {
      ctx.err << "incinctl: switch " << sw.name() << " (" << sw.agent_address()
              << "): " << StatusCodeName(status.error_code()) << ": " << status.error_message() << '\n';
      rc = ExitCodeFor(status.error_code());
      continue;
    }
    reports.push_back(std::move(report));
  }
  if (!found) {
    ctx.err << "incinctl: NOT_FOUND: "
            << (switch_name.empty() ? "no switch registered" : "no switch " + switch_name) << " at the AM\n";
    return kExitNotFound;
  }
  if (Json(ctx)) {
    ctx.out << "[";
    for (size_t i = 0; i < reports.size(); i++) ctx.out << (i ? ",\n" : "\n") << ToJson(reports[i], true);
    ctx.out << "]\n";
  } else {
    for (const auto& r : reports) print(r, ctx.out);
  }
  return rc;
}

int ArnStatus(CommandContext& ctx, const std::string& switch_name) {
  return EverySwitch(ctx, switch_name, &v1::SwitchAgent::Stub::GetArnStatus, &PrintArnStatus);
}

int CreditShow(CommandContext& ctx, const std::string& switch_name) {
  return EverySwitch(ctx, switch_name, &v1::SwitchAgent::Stub::GetCreditStatus, &PrintCreditStatus);
}

int SwitchShow(CommandContext& ctx, const std::string& name) {
  v1::GetSwitchRequest request;
  request.set_name(name);
  v1::GetSwitchResponse response;
  if (int rc = Call(ctx, &AmStub::GetSwitch, request, &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    PrintSwitch(response.switch_summary(), ctx.out);
  return kExitOk;
}

int TopologyShow(CommandContext& ctx) {
  v1::GetTopologyResponse response;
  if (int rc = Call(ctx, &AmStub::GetTopology, v1::GetTopologyRequest(), &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    PrintTopology(response, ctx.out);
  return kExitOk;
}

int TreeCreate(CommandContext& ctx, const v1::CreateTreeRequest& request) {
  v1::CreateTreeResponse response;
  if (int rc = Call(ctx, &AmStub::CreateTree, request, &response)) return rc;
  if (Json(ctx)) {
    ctx.out << ToJson(response, true);
  } else {
    ctx.out << "created ";
    PrintTree(response.tree(), ctx.out);
  }
  return kExitOk;
}

int TreeList(CommandContext& ctx) {
  v1::ListTreesResponse response;
  if (int rc = Call(ctx, &AmStub::ListTrees, v1::ListTreesRequest(), &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    PrintTreeList(response, ctx.out);
  return kExitOk;
}

int TreeShow(CommandContext& ctx, uint32_t tree_id, const std::string& job_id) {
  if (tree_id == 0 && job_id.empty()) {
    v1::ListTreesResponse response;
    if (int rc = Call(ctx, &AmStub::ListTrees, v1::ListTreesRequest(), &response)) return rc;
    if (Json(ctx)) {
      ctx.out << ToJson(response, true);
    } else if (response.trees().empty()) {
      ctx.out << "no trees\n";
    } else {
      for (int i = 0; i < response.trees_size(); ++i) {
        if (i > 0) ctx.out << '\n';
        PrintTree(response.trees(i), ctx.out);
      }
    }
    return kExitOk;
  }
  v1::GetTreeRequest request;
  request.set_tree_id(tree_id);
  request.set_job_id(job_id);
  v1::GetTreeResponse response;
  if (int rc = Call(ctx, &AmStub::GetTree, request, &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    PrintTree(response.tree(), ctx.out);
  return kExitOk;
}

int TreeDelete(CommandContext& ctx, uint32_t tree_id, const std::string& reason) {
  v1::DestroyTreeRequest request;
  request.set_tree_id(tree_id);
  request.set_reason(reason);
  v1::DestroyTreeResponse response;
  if (int rc = Call(ctx, &AmStub::DestroyTree, request, &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    ctx.out << "tree " << tree_id << " deleted\n";
  return kExitOk;
}

int JobCredential(CommandContext& ctx, const std::string& job_id, bool export_line, uint32_t ttl_seconds,
                  const std::vector<std::string>& hosts) {
  v1::IssueJobCredentialRequest request;
  request.set_job_id(job_id);
  request.set_ttl_seconds(ttl_seconds);
  for (const auto& h : hosts) request.add_hosts(h);
  v1::IssueJobCredentialResponse response;
  if (int rc = Call(ctx, &AmStub::IssueJobCredential, request, &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else if (export_line)
    ctx.out << "export INCIN_JOB_CREDENTIAL='" << response.credential() << "'\n";
  else
    ctx.out << response.credential() << '\n';
  return kExitOk;
}

int JobRevoke(CommandContext& ctx, const std::string& job_id) {
  v1::RevokeJobCredentialsRequest request;
  request.set_job_id(job_id);
  v1::RevokeJobCredentialsResponse response;
  if (int rc = Call(ctx, &AmStub::RevokeJobCredentials, request, &response)) return rc;
  if (Json(ctx))
    ctx.out << ToJson(response, true);
  else
    ctx.out << "job " << job_id << ": every credential issued until now is refused at JoinGroup\n";
  return kExitOk;
}

int Stats(CommandContext& ctx, uint32_t tree_id, bool all) {
  v1::AmGetStatsRequest request;
  request.set_tree_id(tree_id);
  v1::AmGetStatsResponse response;
  if (int rc = Call(ctx, &AmStub::GetStats, request, &response)) return rc;
  if (Json(ctx)) {
    ctx.out << ToJson(response, true);
    // The table lists them; a script reading stdout should not miss them in a log.
    for (const std::string& e : response.errors()) ctx.err << "incinctl: warning: " << e << '\n';
  } else {
    PrintStats(response, all, ctx.out);
  }
  return kExitOk;
}

int Events(CommandContext& ctx, const EventsOptions& options) {
  grpc::ClientContext cc;
  // Following has no end, so only a one-shot history read gets a deadline.
  if (!options.follow) SetDeadline(ctx, cc);
  v1::WatchEventsRequest request;
  request.set_replay(options.follow ? options.replay : true);
  request.set_stop_after_replay(!options.follow);
  std::unique_ptr<grpc::ClientReaderInterface<v1::Event>> reader = ctx.stub.WatchEvents(&cc, request);
  v1::Event event;
  uint64_t printed = 0;
  bool limit_reached = false;
  while (reader->Read(&event)) {
    if (!options.kind.empty() && event.kind() != options.kind) continue;
    if (Json(ctx))
      ctx.out << ToJson(event, false);
    else
      PrintEvent(event, ctx.out);
    ctx.out.flush();
    if (options.limit != 0 && ++printed >= options.limit) {
      limit_reached = true;
      cc.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (limit_reached) return kExitOk;
  // A followed stream only ends when the AM goes away (it ends watchers when
  // it shuts down); a script waiting for an event must not take that as done.
  if (status.ok() && options.follow)
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the AM ended the event stream (shutting down?)");
  if (status.ok()) return kExitOk;
  return ReportError(ctx, status);
}

int Version(std::ostream& out, OutputFormat format) {
  if (format == OutputFormat::kJson)
    out << "{\n  \"incinctl\": \"" << kVersion << "\",\n  \"api\": \"inc.v1\"\n}\n";
  else
    out << VersionLine() << '\n';
  return kExitOk;
}

int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        const Connector& connect) {
  CLI::App app{"incinctl: operator CLI of incin's aggregation manager (incamd).", "incinctl"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  app.set_help_all_flag("--help-all", "Print help for every command and exit");
  app.footer(
      "Global options may come before or after the command.\n"
      "\n"
      "Exit codes:\n"
      "  0  success\n"
      "  1  usage error (bad command line)\n"
      "  2  the AM answered with an error (code and message on stderr), except:\n"
      "  3  the AM could not be reached or did not answer in time (UNAVAILABLE,\n"
      "     DEADLINE_EXCEEDED); retrying may help\n"
      "  4  not found (NOT_FOUND: no such tree, switch or job)\n"
      "\n"
      "Examples:\n"
      "  incinctl switch list\n"
      "  incinctl --am 10.0.0.1:50051 tree list -o json\n"
      "  incinctl tree create --job train-7 --world 4 --host h1,h2,h3,h4\n"
      "  incinctl tree show 3\n"
      "  incinctl stats --tree 3 --all\n"
      "  incinctl events --follow --replay");

  std::string am;
  std::string output = "table";
  double timeout_s = 10;
  // Unset flags come from the environment, then the user's and the
  // system's incinctl.json (client_config.h).
  CLI::Option* am_opt = app.add_option(
      "--am", am,
      std::string("AggregationManager address (else $INCIN_AM, else \"am\" of incinctl.json, else ") +
          kDefaultAmAddress + ")");
  TlsFiles tls;
  bool insecure = false;
  CLI::Option* cert_opt = app.add_option("--cert", tls.cert,
                                         "PEM certificate (OU=operator) to present to the AM and switches "
                                         "(else $INCIN_TLS_CERT, else \"cert\" of "
                                         "incinctl.json)");
  CLI::Option* key_opt =
      app.add_option("--key", tls.key, "PEM private key of --cert (else $INCIN_TLS_KEY, ...)");
  CLI::Option* ca_opt = app.add_option(
      "--ca", tls.ca,
      "PEM CA bundle that the AM's and switches' certificates chain to (else $INCIN_TLS_CA, ...)");
  CLI::Option* insecure_opt =
      app.add_flag("--insecure", insecure,
                   "plaintext gRPC (only against an AM started with insecure; else $INCIN_INSECURE, ...)");
  app.add_option("-o,--output", output, "Output format: table (for people) or json (protobuf JSON)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--timeout", timeout_s, "Seconds to wait for the AM's answer")
      ->check(kSeconds)
      ->capture_default_str();

  // The chosen command; set by the subcommand's callback after parsing.
  std::function<int(CommandContext&)> action;
  bool needs_am = true;

  // ---- switch
  CLI::App* sw = app.add_subcommand("switch", "Switches registered with the AM");
  sw->require_subcommand(1);
  sw->footer(WithGlobals("Examples:\n  incinctl switch list\n  incinctl switch show leaf1 -o json"));
  CLI::App* sw_list = sw->add_subcommand("list", "One line per switch: liveness, free slots, trees");
  sw_list->footer(WithGlobals("Example:\n  incinctl switch list -o json"));
  sw_list->callback([&] { action = [](CommandContext& c) { return SwitchList(c); }; });
  std::string switch_name;
  CLI::App* sw_show = sw->add_subcommand("show", "One switch: capabilities, ports, trees");
  sw_show->add_option("name", switch_name, "Switch name")->required();
  sw_show->footer(WithGlobals("Example:\n  incinctl switch show leaf1"));
  sw_show->callback([&] { action = [&](CommandContext& c) { return SwitchShow(c, switch_name); }; });

  // ---- topology
  CLI::App* arn = app.add_subcommand("arn", "Adaptive routing: link conditions, notices, best-path routes");
  arn->require_subcommand(1);
  std::string arn_switch;
  CLI::App* arn_status =
      arn->add_subcommand("status", "Per switch: its links, what others reported, routes with marks, events");
  arn_status->add_option("--switch", arn_switch, "Only this switch (default: every registered switch)");
  arn_status->callback([&] { action = [&](CommandContext& c) { return ArnStatus(c, arn_switch); }; });

  CLI::App* credit =
      app.add_subcommand("credit", "Credit-based flow control: per flow its next hops, credit and queue");
  credit->require_subcommand(1);
  std::string credit_switch;
  CLI::App* credit_show = credit->add_subcommand(
      "show", "Per switch: each credit flow's role, next hops (primary/backup/failed) with credit, queue");
  credit_show->add_option("--switch", credit_switch, "Only this switch (default: every registered switch)");
  credit_show->footer(
      WithGlobals("Examples:\n"
                  "  incinctl credit show\n"
                  "  incinctl credit show --switch gwa -o json"));
  credit_show->callback([&] { action = [&](CommandContext& c) { return CreditShow(c, credit_switch); }; });

  CLI::App* topo = app.add_subcommand("topology", "The AM's view of nodes and links");
  topo->require_subcommand(1);
  topo->footer(WithGlobals("Example:\n  incinctl topology show"));
  CLI::App* topo_show =
      topo->add_subcommand("show", "Nodes (hosts, leaves, spines) and links with their state");
  topo_show->footer(WithGlobals("Example:\n  incinctl topology show -o json"));
  topo_show->callback([&] { action = [](CommandContext& c) { return TopologyShow(c); }; });

  // ---- tree
  CLI::App* tree = app.add_subcommand("tree", "Aggregation trees");
  tree->require_subcommand(1);
  tree->footer(
      WithGlobals("Examples:\n"
                  "  incinctl tree create --job train-7 --world 2 --host h1 --host h2\n"
                  "  incinctl tree list\n"
                  "  incinctl tree show 3\n"
                  "  incinctl tree show --job train-7\n"
                  "  incinctl tree delete 3 --reason maintenance"));
  v1::CreateTreeRequest create;
  std::string create_job;
  uint32_t create_world = 0;
  std::vector<std::string> create_hosts;
  uint32_t create_pool = 0;
  uint32_t create_elems = 0;
  CLI::App* tree_create = tree->add_subcommand("create", "Build a tree for a job before its members join");
  tree_create->add_option("--job", create_job, "Job id")->required();
  tree_create->add_option("--world", create_world, "Number of ranks")->required()->transform(kAtLeastOne);
  tree_create
      ->add_option("--host", create_hosts, "Host of each rank, in rank order (repeat or comma-separate)")
      ->required()
      ->delimiter(',');
  tree_create->add_option("--pool-size", create_pool, "Aggregation slots (0: the AM's default)")
      ->transform(kUint32);
  tree_create->add_option("--elems", create_elems, "Four-byte elements per packet (0: the AM's default)")
      ->transform(kUint32);
  std::vector<std::string> create_dtypes, create_ops, create_collectives;
  tree_create
      ->add_option("--dtype", create_dtypes,
                   "Data types the tree must support (default: what its switches support)")
      ->delimiter(',')
      ->check(EnumValidator(v1::DataType_descriptor(), ""));
  tree_create->add_option("--op", create_ops, "Reduce operations the tree must support")
      ->delimiter(',')
      ->check(EnumValidator(v1::ReduceOp_descriptor(), ""));
  tree_create->add_option("--collective", create_collectives, "Collectives the tree must support")
      ->delimiter(',')
      ->check(EnumValidator(v1::Collective_descriptor(), ""));
  tree_create->footer(WithGlobals(
      "Rank i runs on the i-th --host. Examples:\n"
      "  incinctl tree create --job train-7 --world 4 --host h1,h2,h3,h4\n"
      "  incinctl tree create --job j --world 2 --host h1 --host h2 --pool-size 64 --elems 256\n"
      "  incinctl tree create --job j --world 2 --host h1,h2 --dtype fp32 --op sum --collective allreduce"));
  tree_create->callback([&] {
    action = [&](CommandContext& c) {
      v1::CreateTreeRequest request;
      request.set_job_id(create_job);
      request.set_world_size(create_world);
      for (const std::string& h : create_hosts) request.add_hosts(h);
      request.set_pool_size(create_pool);
      request.set_elems_per_packet(create_elems);
      for (const std::string& d : create_dtypes)
        request.add_dtypes(static_cast<v1::DataType>(EnumFromName(v1::DataType_descriptor(), "", d)));
      for (const std::string& o : create_ops)
        request.add_ops(static_cast<v1::ReduceOp>(EnumFromName(v1::ReduceOp_descriptor(), "", o)));
      for (const std::string& c : create_collectives)
        request.add_collectives(
            static_cast<v1::Collective>(EnumFromName(v1::Collective_descriptor(), "", c)));
      return TreeCreate(c, request);
    };
  });
  CLI::App* tree_list = tree->add_subcommand("list", "One line per tree");
  tree_list->footer(WithGlobals("Example:\n  incinctl tree list -o json"));
  tree_list->callback([&] { action = [](CommandContext& c) { return TreeList(c); }; });
  uint32_t show_id = 0;
  std::string show_job;
  CLI::App* tree_show = tree->add_subcommand("show", "Trees in detail: switches and members");
  CLI::Option* show_id_opt =
      tree_show->add_option("id", show_id, "Tree id (default: every tree)")->transform(kAtLeastOne);
  tree_show->add_option("--job", show_job, "The tree of this job")->excludes(show_id_opt);
  tree_show->footer(
      WithGlobals("Without an id or --job, every tree is shown. Examples:\n"
                  "  incinctl tree show 3\n"
                  "  incinctl tree show --job train-7 -o json"));
  tree_show->callback([&] { action = [&](CommandContext& c) { return TreeShow(c, show_id, show_job); }; });
  uint32_t delete_id = 0;
  std::string delete_reason = "deleted by operator (incinctl)";
  CLI::App* tree_delete = tree->add_subcommand("delete", "Dismantle a tree on every switch");
  tree_delete->add_option("id", delete_id, "Tree id")->required()->transform(kAtLeastOne);
  tree_delete->add_option("--reason", delete_reason, "Why (kept in the tree's record and events)")
      ->capture_default_str();
  tree_delete->footer(WithGlobals("Example:\n  incinctl tree delete 3 --reason \"job cancelled\""));
  tree_delete->callback(
      [&] { action = [&](CommandContext& c) { return TreeDelete(c, delete_id, delete_reason); }; });

  // ---- job
  std::string credential_job, revoke_job;
  bool credential_export = false;
  uint32_t credential_ttl = 0;
  std::vector<std::string> credential_hosts;
  CLI::App* job = app.add_subcommand("job", "Jobs: what their launcher needs");
  job->require_subcommand(1);
  job->footer(WithGlobals("Example:\n  incinctl job credential train-7"));
  CLI::App* job_credential = job->add_subcommand(
      "credential", "Get the credential a job's ranks present to join it (INCIN_JOB_CREDENTIAL)");
  job_credential
      ->add_option("job", credential_job, "Job id, as the ranks give it (inc-perf --job, INCIN_JOB_ID)")
      ->required();
  job_credential->add_flag("--export", credential_export, "Print a shell export line");
  job_credential->add_option("--ttl", credential_ttl, "Seconds it stays good (default 86400, at most 604800)")
      ->transform(kUint32);
  job_credential
      ->add_option("--hosts", credential_hosts,
                   "Topology hosts whose member certificates may join with it (default: any host)")
      ->delimiter(',');
  job_credential->footer(WithGlobals(
      "The AM issues it to operators only (an operator bound to tenants: for jobs TENANT/... only);\n"
      "it is good for that job id, until it expires, from the hosts given, until `job revoke`.\n"
      "Keep it out of command lines (every user reads them in /proc): pass it in the environment.\n"
      "Examples:\n"
      "  export INCIN_JOB_CREDENTIAL=$(incinctl job credential train-7 --hosts w0,w1 --ttl 7200)\n"
      "  eval \"$(incinctl job credential train-7 --export)\"\n"
      "  mpirun -x INCIN_JOB_CREDENTIAL ... (libincmpi then joins as job train-7)"));
  job_credential->callback([&] {
    action = [&](CommandContext& c) {
      return JobCredential(c, credential_job, credential_export, credential_ttl, credential_hosts);
    };
  });
  CLI::App* job_revoke =
      job->add_subcommand("revoke", "Refuse every credential of a job issued until now (JoinGroup)");
  job_revoke->add_option("job", revoke_job, "Job id")->required();
  job_revoke->footer(
      WithGlobals("Running members are not affected (incinctl tree delete ends them). Example:\n"
                  "  incinctl job revoke train-7"));
  job_revoke->callback([&] { action = [&](CommandContext& c) { return JobRevoke(c, revoke_job); }; });

  // ---- stats
  uint32_t stats_tree = 0;
  bool stats_all = false;
  CLI::App* stats = app.add_subcommand(
      "stats", "Data-path counters per switch: global, drops by reason, per tree, per member QP");
  stats->add_option("--tree", stats_tree, "Only this tree's counters (0: all)")->transform(kUint32);
  stats->add_flag("--all", stats_all, "Tables: show zero counters too (JSON always has every counter)");
  stats->footer(
      WithGlobals("Examples:\n"
                  "  incinctl stats\n"
                  "  incinctl stats --tree 3 --all\n"
                  "  incinctl stats -o json"));
  stats->callback([&] { action = [&](CommandContext& c) { return Stats(c, stats_tree, stats_all); }; });

  // ---- events
  EventsOptions events_options;
  CLI::App* events = app.add_subcommand("events", "The AM's event log (switches, trees, members)");
  events->add_flag("-f,--follow", events_options.follow, "Keep printing new events until interrupted");
  events->add_flag(
      "--replay", events_options.replay,
      "With --follow: print the remembered events first (without --follow they are always printed)");
  events->add_option("--kind", events_options.kind, "Only events of this kind (e.g. tree_active)");
  events->add_option("--limit", events_options.limit, "Exit after printing this many events (0: no limit)")
      ->transform(WholeNumber(0, std::numeric_limits<uint64_t>::max()));
  events->footer(
      WithGlobals("Without --follow, prints the events the AM remembers and exits. With -o json,\n"
                  "one JSON object per line. Examples:\n"
                  "  incinctl events\n"
                  "  incinctl events --follow --replay\n"
                  "  incinctl events --follow --replay --kind tree_active --limit 1 -o json\n"
                  "With --follow, the AM ending the stream (shutdown) exits 3."));
  events->callback([&] { action = [&](CommandContext& c) { return Events(c, events_options); }; });

  // ---- version
  CLI::App* version = app.add_subcommand("version", "Print incinctl's version");
  version->footer(WithGlobals("Example:\n  incinctl version -o json"));
  version->callback([&] {
    needs_am = false;
    action = [](CommandContext&) { return kExitOk; };
  });

  app.set_version_flag("--version", VersionLine(), "Print incinctl's version and exit");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "A subcommand is required" both for no command and for a
    // word that is not one; say which.
    if (e.get_name() == "RequiredError" && std::string(e.what()).find("subcommand") != std::string::npos) {
      if (std::string message = UnknownCommandMessage(app, args); !message.empty()) {
        err << "incinctl: " << message << '\n';
        return kExitUsage;
      }
    }
    int rc = app.exit(e, out, err);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (!action) {  // require_subcommand makes this unreachable; keep the promise anyway
    err << "incinctl: no command given; see --help\n";
    return kExitUsage;
  }
  // Far beyond any sensible deadline, but keeps the conversion defined.
  double timeout_ms = std::min(timeout_s * 1000.0, 1e12);
  OutputFormat format = output == "json" ? OutputFormat::kJson : OutputFormat::kTable;

  if (!needs_am) return Version(out, format);
  {
    // Precedence: flags > environment > user file > system file.
    ClientConfig flags;
    if (am_opt->count()) flags.am = am;
    if (cert_opt->count()) flags.cert = tls.cert;
    if (key_opt->count()) flags.key = tls.key;
    if (ca_opt->count()) flags.ca = tls.ca;
    if (insecure_opt->count()) flags.insecure = insecure;
    auto env = ClientConfigFromEnv(settings::Env());
    const UserConfigPath user_path =
        FindUserConfig([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
    auto user = LoadClientConfigFile(user_path.path, user_path.must_exist);
    auto system = LoadClientConfigFile(kSystemConfigPath, false);
    for (const Status& s : {env.status(), user.status(), system.status()}) {
      if (!s.ok()) {
        err << "incinctl: " << s.message() << '\n';
        return kExitUsage;
      }
    }
    const ClientConfig c = Resolve({flags, *env, *user, *system});
    am = c.am.value_or("");
    tls.cert = c.cert.value_or("");
    tls.key = c.key.value_or("");
    tls.ca = c.ca.value_or("");
    insecure = c.insecure.value_or(false);
  }
  if (am.empty()) am = kDefaultAmAddress;
  auto security = ChooseTransportSecurity(
      tls, insecure,
      "--cert, --key and --ca (or INCIN_TLS_CERT, INCIN_TLS_KEY, INCIN_TLS_CA, or incinctl.json's cert, key "
      "and ca), or --insecure");
  auto credentials = security ? MakeChannelCredentials(*security) : security.status();
  if (!credentials) {
    err << "incinctl: " << credentials.status().message() << '\n';
    return kExitUsage;
  }
  std::unique_ptr<AmStub> stub = connect(am, *credentials);
  if (!stub) {
    err << "incinctl: cannot create a channel to " << am << '\n';
    return kExitUnreachable;
  }
  CommandContext ctx{
      *stub, am,  format,      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_ms))),
      out,   err, *credentials};
  return action(ctx);
}

}  // namespace inc::cli
