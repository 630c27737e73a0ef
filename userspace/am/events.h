// SPDX-License-Identifier: Apache-2.0
// The AM's event log: what happened to switches and trees, kept (up to a
// bound) for operators who watch it, with the last events replayed to a new
// watcher. Thread-safe; its lock is a leaf (callers may hold their own).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"

namespace inc::am {

struct Event {
  uint64_t unix_ms = 0;
  std::string kind;  // "switch_registered", "tree_active", "tree_failed", ...
  std::string message;
  uint32_t tree_id = 0;
  std::string switch_name;
  std::string job;
};

class EventLog {
 public:
  explicit EventLog(size_t capacity) : capacity_(capacity) {}

  // Logs the event (at info; in JSON logs with the fields event, tree,
  // switch, job and rank, those that are set) and wakes watchers; the
  // oldest events beyond the capacity are forgotten. `rank`: the member's
  // rank in its job, for events about one member (logged, not kept).
  void Append(const std::string& kind, const std::string& message, uint32_t tree_id = 0,
              const std::string& switch_name = "", const std::string& job = "",
              std::optional<uint32_t> rank = std::nullopt);

  struct WatchOptions {
    bool replay = false;             // first the events still kept
    bool stop_after_replay = false;  // then return instead of following
  };
  // Sends events to `sink` until cancelled (CANCELLED), Close() or a false
  // return from sink (both OK).
  Status Watch(const WatchOptions& options, const std::function<bool()>& cancelled,
               const std::function<bool(const Event&)>& sink);

  // Ends every Watch.
  void Close();

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  std::deque<std::pair<uint64_t, Event>> events_;  // (sequence number, event)
  uint64_t next_seq_ = 1;
};

}  // namespace inc::am
