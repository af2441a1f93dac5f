// GenerationWatch (generation_watch.hpp): job events, done keys and lost nodes of a generation.
#include "generation_watch.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <exception>

namespace dtrain::etcd {
namespace {
constexpr std::chrono::milliseconds kWatchSlice{1000};
}  // namespace

void GenerationWatch::start(const Table& t, std::int64_t g, std::int64_t table_revision,
                            std::chrono::milliseconds heartbeat_timeout) {
  stop();
  watch_ = std::make_unique<Watch>(client_, keys_.generation(g), prefix_end(keys_.generation(g)), table_revision + 1);
  table_ = t;
  generation_ = g;
  heartbeat_timeout_ = heartbeat_timeout;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void GenerationWatch::stop() {
  stopping_ = true;
  if (watch_) watch_->close();
  if (thread_.joinable()) thread_.join();
  watch_.reset();
}

void GenerationWatch::loop() {
  for (;;) {
    try {
      auto evs = watch_->next(kWatchSlice);
      if (stopping_) return;
      on_events(evs);
    } catch (const std::exception& e) {
      if (stopping_) return;
      events_.deliver(rdzv::rendezvous_lost("etcd " + client_.endpoint(),
                                            fmt::format("the watch of the job's keys broke: {}", e.what())));
      return;
    }
  }
}

void GenerationWatch::on_events(const std::vector<WatchEvent>& evs) {
  for (const auto& ev : evs) {
    const std::string& key = ev.kv.key;
    bool put = ev.type == WatchEvent::Type::put;
    if (put && key.rfind(keys_.events(generation_), 0) == 0) events_.deliver(decode_event(ev.kv.value, ev.kv.mod_revision));
    else if (put && key.rfind(keys_.done(generation_), 0) == 0) done_.mark(std::atoi(last_part(key).c_str()));
    else if (!put && key.rfind(keys_.nodes(generation_), 0) == 0) node_gone(key, ev.kv.mod_revision);
  }
}

// A table node's key deleted without its done key: etcd ended its lease.
void GenerationWatch::node_gone(const std::string& key, std::int64_t revision) {
  const Table::Row* row = table_.find(last_part(key));
  if (row == nullptr || done_.done(row->entry.node_rank)) return;
  rdzv::Event lost;
  lost.kind = "lost";
  lost.node = row->entry.node_rank;
  lost.host = row->entry.host;
  lost.seq = revision;
  lost.generation = generation_;
  lost.message = fmt::format("its lease in etcd ended: the agent stopped renewing it for {:g} s (killed, hung or cut off)",
                             double(heartbeat_timeout_.count()) / 1000.0);
  events_.deliver(lost);
}

}  // namespace dtrain::etcd
