// SPDX-License-Identifier: Apache-2.0
// What incamd and incswitchd share around signals and configuration: the
// signals they take synchronously, their log settings, and which fields of
// a re-read config file changed (for SIGHUP). Part of the inc_daemon
// library with grpc_log.h: inc_common itself has no protobuf or gRPC.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/server_interceptor.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace inc {

// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR2 in the calling thread and so in
// every thread it starts afterwards (gRPC's included): they then reach the
// process only through WaitForDaemonSignal, never as the default action
// (SIGHUP's and SIGUSR2's is to terminate). SIGUSR2 is the restart signal
// of the systemd units (RestartKillSignal=): stop, but leave what the next
// instance takes over. Every other signal whose default action terminates
// the process (IgnoredDaemonSignals) is blocked the same way and only
// logged, and SIGPIPE, SIGXFSZ and the job-control stops (SIGTSTP, SIGTTIN,
// SIGTTOU) are set to SIG_IGN: no signal but SIGKILL, SIGSTOP and the
// core-dump ones (SIGQUIT, asked for on purpose; SIGXCPU, the
// administrator's CPU limit; the faults the kernel sends) ends or stops a
// daemon. Call first thing in main, before any thread starts.
void BlockDaemonSignals();
// Waits for SIGTERM, SIGINT, SIGHUP or SIGUSR2; returns its number. Ignored
// signals that arrive meanwhile are logged (info) and waited past.
int WaitForDaemonSignal();
// The signals a daemon ignores: SIGUSR1, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
// SIGPWR, SIGSTKFLT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGXFSZ,
// SIGRTMIN..SIGRTMAX (tests send each).
std::vector<int> IgnoredDaemonSignals();
// "SIGTERM", "SIGUSR1", "SIGRTMIN", "SIGRTMIN+3", "SIGRTMAX", ..., else
// "signal N".
std::string SignalName(int sig);

// Counts the calls a gRPC server is running (install Factory() with
// ServerBuilder::experimental().SetInterceptorCreators), so that a daemon
// can let the calls in flight finish when it stops. Server::Shutdown(deadline)
// alone waits for every connected client to hang up, idle ones included,
// until the deadline.
class CallCounter {
 public:
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> Factory();
  int InFlight() const { return *in_flight_; }
  // Waits until no call is running or until the deadline; true if none is.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;

 private:
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
};

// Applies a --log-format flag before the config is read, so that errors in
// the config come out in that format too; a bad value is left for the
// config's validation to report.
void ApplyLogFormatFlag(const std::string& log_format);

// Sets the log level and format from their config spellings (and gRPC's
// verbosity to match); INVALID_ARGUMENT naming the field otherwise, with
// nothing changed.
Status ApplyLogSettings(const std::string& log_level, const std::string& log_format);
// Checks them without applying.
Status ValidateLogSettings(const std::string& log_level, const std::string& log_format);

// One top-level field whose value differs between two configs.
struct FieldChange {
  std::string field;   // the proto field name
  std::string before;  // scalar fields: the value ("" shown as ""), else "(...)"
  std::string after;
  // "log_level info -> debug", "ports changed".
  std::string ToString() const;
};

// The fields (top level, proto names, in field-number order) that differ.
std::vector<FieldChange> ChangedFields(const google::protobuf::Message& before,
                                       const google::protobuf::Message& after);

// A re-read config split into what a running daemon takes (fields named in
// `live`) and what only a restart would apply. A changed message field named
// in `nested` is compared field by field, its fields named "arn.hold_ms".
struct ReloadPlan {
  std::vector<FieldChange> applied;
  std::vector<FieldChange> refused;
};
ReloadPlan PlanReload(const google::protobuf::Message& running, const google::protobuf::Message& reread,
                      const std::set<std::string>& live, const std::set<std::string>& nested = {});

// Copies one field, top level ("join_timeout_ms") or inside a message field
// ("arn.hold_ms"), from `from` into *to (same message type). False if the
// path names no field.
bool CopyFieldPath(const google::protobuf::Message& from, const std::string& path,
                   google::protobuf::Message* to);

// What a daemon takes at run time besides log_level and log_format (which
// both take: both config messages have them).
struct LiveFields {
  std::set<std::string> fields;  // field paths as in PlanReload
  std::set<std::string> nested;  // message fields compared field by field
  // Checks the config that would be in force: the running one with every
  // live change of the re-read file. Fields checked against each other may
  // be split across the two (a live timeout against an interval that needs
  // a restart), so the file's own checks are not enough.
  std::function<Status(const google::protobuf::Message& next)> check;
  // Puts the live fields of `next` into effect (not the log settings).
  std::function<Status(const google::protobuf::Message& next)> apply;
};

// The SIGHUP step both daemons share once a re-read config is valid. Every
// changed live field is logged ("applied"), the log settings are set and
// `live.apply` is called; then *running becomes the config in force. A
// failed `live.check` or `live.apply` is logged as an error and applies
// nothing. Every other changed field is logged as not applied because it
// needs a restart of `daemon`. Returns the number of changed fields.
size_t ApplyReload(const google::protobuf::Message& reread, const std::string& daemon,
                   google::protobuf::Message* running, const LiveFields& live = {});

// A command-line flag that overrides a config field.
struct FlagOverride {
  std::string flag;   // "--log-level"
  std::string field;  // "log_level"
  std::string value;  // as given on the command line
};
// Logs one line for each flag whose value differs from the field's in the
// file as read without flags: the command line keeps precedence on a
// reload, and the operator who edited the file should learn why nothing
// changed.
void LogFlagOverrides(const google::protobuf::Message& file_only, const std::vector<FlagOverride>& overrides,
                      const std::string& path);

}  // namespace inc
