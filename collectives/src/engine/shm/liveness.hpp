#pragma once
// Whether a local rank's process is still there, independent of pids: every rank holds an open file
// description lock (F_OFD_SETLK) on its own byte of the segment's file for as long as it has the
// segment open, and a peer asks the kernel whether that byte is still locked (F_OFD_GETLK). The
// kernel drops the lock when the last descriptor of the rank's open file description closes: when
// the rank closes the segment, or when its process exits, is killed, or becomes a zombie. Locks are
// on the file, not on a pid, so ranks in different PID namespaces sharing /dev/shm (containers of
// one pod sharing an emptyDir) see each other right, and a reused pid never hides a death.
//
// A child the rank forks would inherit the description and keep the lock alive after the rank
// died; the segment's descriptor is therefore closed in every forked child (pthread_atfork), and
// close-on-exec covers the children that exec.
namespace dtrain::coll::shm::liveness {

// Locks byte `slot` of the file behind fd (a descriptor of its own open file description) and
// registers fd, for `owner`, to be closed in forked children; throws CollError when the lock cannot
// be taken.
void hold(int fd, int slot, const void* owner);
// Whether some open file description holds byte `slot` of the file behind fd locked.
bool held(int fd, int slot);
// Closes owner's fd (dropping its lock) unless a fork already closed it in this process.
void release(int fd, const void* owner) noexcept;

}  // namespace dtrain::coll::shm::liveness
