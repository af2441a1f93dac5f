#pragma once
// The request handlers, one per wire operation (dispatch.cpp maps ops to them), and the answers to
// parked requests whose timeout passed (wait_list.cpp). A handler throws Refused for a refusal
// (answered as ERROR, connection kept) and wire::ProtocolError for a malformed request (dropped).
#include <string>

#include "connection.hpp"
#include "event_log.hpp"
#include "dtrain/rendezvous/membership/join_barrier.hpp"

namespace dtrain::rdzv::srv {

struct Scope;

// store_ops.cpp
void on_set(Conn& c, const wire::Frame& f);
void on_get(Conn& c, const wire::Frame& f);
void on_add(Conn& c, const wire::Frame& f);
void on_compare_set(Conn& c, const wire::Frame& f);
void on_check(Conn& c, const wire::Frame& f);
void on_erase(Conn& c, const wire::Frame& f);
void on_barrier(Conn& c, const wire::Frame& f);
void get_timed_out(Conn& c);
void barrier_timed_out(Conn& c);

// join_ops.cpp
void on_join(Conn& c, const wire::Frame& f);
void on_table(Conn& c, const wire::Frame& f);
void join_timed_out(Conn& c);
// Closes an elastic barrier whose last call is over (from the tick).
void close_if_ready(Scope& s, Clock::time_point now);
// Tells the parked joiners of s how far the barrier is (about once a second, from the tick).
void send_join_progress(Scope& s, Clock::time_point now);

// node_ops.cpp: heartbeats, events, exit barrier, status
void on_heartbeat(Conn& c, const wire::Frame& f);
void on_report(Conn& c, const wire::Frame& f);
void on_watch(Conn& c, const wire::Frame& f);
void on_leave(Conn& c, const wire::Frame& f);
void on_status(Conn& c, const wire::Frame& f);
void on_list_runs(Conn& c, const wire::Frame& f);
void watch_timed_out(Conn& c);
void leave_timed_out(Conn& c);
// Appends an event, wakes every watcher with it; a lost node also fails the exit barrier's waiters.
void publish_event(Scope& s, EventKind kind, Event e);
void declare_lost(Scope& s, Node& n, const std::string& why);
// Declares lost the first node silent past the heartbeat timeout (from the tick).
void check_heartbeats(Scope& s, Clock::time_point now);

}  // namespace dtrain::rdzv::srv
