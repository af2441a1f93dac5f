#pragma once
// The TCP engine's sockets (Gloo's Pairs): one connected, authenticated socket to every other rank
// of a group (bootstrap.hpp makes them), each with what messages say about the peer: its advertised
// host, numeric address and port. Ranks are group ranks; messages name world ranks (members).
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::tcp {

struct Options {
  std::vector<int> members;        // world rank of each group rank (the group's size)
  int rank = 0;                    // this process's group rank
  rdzv::Store* store = nullptr;
  std::string key_prefix;          // store keys of this communicator
  std::string advertise_host;      // address to listen on and advertise
  std::chrono::milliseconds timeout{300000};
  std::size_t chunk_bytes = 1 << 20;
  int spin_us = 0;                 // poll() without sleeping this long first (0: sleep at once)
};

class Links {
 public:
  struct Peer {
    int fd = -1;
    std::string host;  // advertised name or address
    std::string addr;  // numeric address
    int port = 0;
  };

  Links(std::vector<int> members, int rank);
  ~Links();
  Links(Links&& other) noexcept;
  Links& operator=(Links&&) = delete;
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // The world rank of group rank r.
  int world(int r) const { return members_[static_cast<std::size_t>(r)]; }
  Peer& peer(int r) { return peers_[static_cast<std::size_t>(r)]; }
  const Peer& peer(int r) const { return peers_[static_cast<std::size_t>(r)]; }
  int fd(int r) const { return peer(r).fd; }
  // "rank 3 (host h, address 10.0.0.3, port 4711)", or without the host when it is the address.
  std::string text(int r) const;
  // Shuts every socket down: peers reading from or writing to this rank see the connection end.
  void shutdown() noexcept;

 private:
  std::vector<int> members_;
  int rank_;
  std::vector<Peer> peers_;
};

}  // namespace dtrain::coll::tcp
