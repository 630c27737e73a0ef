// SPDX-License-Identifier: Apache-2.0
#include "am/events.h"

#include <chrono>
#include <vector>

#include "common/log.h"

namespace inc::am {

void EventLog::Append(const std::string& kind, const std::string& message, uint32_t tree_id,
                      const std::string& switch_name, const std::string& job, std::optional<uint32_t> rank) {
  Event e;
  e.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  e.kind = kind;
  e.message = message;
  e.tree_id = tree_id;
  e.switch_name = switch_name;
  e.job = job;
  if (GetLogLevel() <= LogLevel::kInfo) {
    LogFields fields = {{"event", kind}};
    if (tree_id) fields.emplace_back("tree", tree_id);
    if (!job.empty()) fields.emplace_back("job", job);
    if (!switch_name.empty()) fields.emplace_back("switch", switch_name);
    if (rank) fields.emplace_back("rank", *rank);
    LogLine(LogLevel::kInfo, kind + ": " + message, fields);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.emplace_back(next_seq_++, std::move(e));
    while (events_.size() > capacity_) events_.pop_front();
  }
  cv_.notify_all();
}

Status EventLog::Watch(const WatchOptions& options, const std::function<bool()>& cancelled,
                       const std::function<bool(const Event&)>& sink) {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t next = options.replay && !events_.empty() ? events_.front().first : next_seq_;
  for (;;) {
    std::vector<Event> batch;
    for (const auto& [seq, e] : events_)
      if (seq >= next) batch.push_back(e);
    next = next_seq_;
    lk.unlock();
    for (const auto& e : batch)
      if (!sink(e)) return Status::Ok();
    if (options.stop_after_replay) return Status::Ok();
    lk.lock();
    if (closed_) return Status::Ok();
    if (cancelled && cancelled()) return Status(Code::kCancelled, "watcher went away");
    // New events notify; the timed wake only notices watchers that went away.
    if (next_seq_ == next) cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
}

void EventLog::Close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace inc::am
