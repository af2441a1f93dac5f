// The local ranks' barrier (barrier.hpp).
#include "barrier.hpp"

#include <atomic>

namespace dtrain::coll::shm {

bool Barrier::arrived(int j) const { return reached(seg_.ctl(j).epoch.load(std::memory_order_acquire), epoch_); }

bool Barrier::all_arrived() const {
  for (int j = 0; j < peers_.size(); ++j)
    if (!arrived(j)) return false;
  return true;
}

void Barrier::sync(const OpDesc& d) {
  ++epoch_;
  if (!arrive(seg_.ctl(peers_.me()).epoch, epoch_ - 1, epoch_)) peers_.throw_given_up(d.text());
  if (seg_.header().sleepers.load(std::memory_order_seq_cst) != 0) seg_.wake_collectives();
  auto& h = seg_.header();
  waiter_.wait(h.phase, h.sleepers, [&] { return all_arrived(); }, [&] { check(d); });
  if (checked_ != peers_.calls()) {
    checked_ = peers_.calls();
    peers_.check_fingerprints(d);
  }
}

// Between sleeps: the abort record, a dead or departed peer that has not arrived, a peer in another
// call (which may never arrive here), the deadline. On any of them this rank gives up on the sync
// for every rank (give_up()), records why and throws; unless every rank arrived meanwhile: then the
// sync is complete everywhere and the wait ends as usual.
void Barrier::check(const OpDesc& d) {
  peers_.check_or_give_up(
      [&] {
        if (peers_.aborted()) peers_.throw_abort(d.text());
        for (int j = 0; j < peers_.size(); ++j)
          if (j != peers_.me()) peers_.check_alive(d, j, [&] { return arrived(j); });
        peers_.check_peer_calls(d, [&] { return all_arrived(); });
        if (Clock::now() >= d.deadline) peers_.fail_timeout(d, [&](int j) { return arrived(j); });
      },
      [&] { return give_up(); });
}

bool Barrier::give_up() {
  bool given_up = false;
  for (int j = 0; j < peers_.size(); ++j)
    if (j != peers_.me()) given_up = give_up_on(seg_.ctl(j).epoch, epoch_) || given_up;
  return given_up;
}

}  // namespace dtrain::coll::shm
