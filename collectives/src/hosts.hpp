#pragma once
// Host discovery for a communicator bootstrapped through a caller's store (a framework's own,
// dtrain_comm_init_config), with no launcher to say which ranks share a host: every rank publishes
// its host identity under "<prefix>host/<rank>" and reads every other's; ranks with equal identities
// form a host (any numbers, not necessarily contiguous), named by its lowest rank. The engine then
// follows from the hosts as for a split (engine/factory.cpp): shared memory within a host, TCP
// across hosts, hierarchical when both.
#include <chrono>
#include <string>

#include "dtrain/rendezvous/store/store.hpp"
#include "members.hpp"

namespace dtrain::coll {

// This host's identity: the host name and the kernel's boot id.
std::string default_host_identity();
// The address a rank advertises for TCP when none is configured: DTRAIN_SOCKET_ADDR,
// DTRAIN_LOCAL_ADDR, the local address of a UDP socket connect()ed to MASTER_ADDR (no packet is
// sent), 127.0.0.1 when every rank is on this host, else the address of this host's name.
std::string default_advertise(bool all_local);

struct Hosts {
  Members members;     // every rank with its host; keys of the communicator's instance
  int local_rank = 0;  // this rank among its host's
  int local_size = 0;
};
// Publishes `host` for `rank` of `size` and reads every other rank's, within `timeout`; throws
// CollError (DTRAIN_ERR_TIMEOUT naming the rank that never published).
Hosts discover_hosts(rdzv::Store& store, int rank, int size, const std::string& host,
                     std::chrono::milliseconds timeout);

}  // namespace dtrain::coll
