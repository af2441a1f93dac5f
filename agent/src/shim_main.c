/* dtrain-shim: the agent's two helper processes as a tiny C program (libc only, linked statically
 * where possible), so that starting a worker costs one small exec instead of a second start of the
 * whole dtrain binary. Same protocol as `dtrain __exec` / `dtrain __guard` (agent/src/shim.cpp):
 *
 *   dtrain-shim exec AGENT_PID -- COMMAND...   PR_SET_PDEATHSIG(SIGKILL), check the parent, execvp;
 *                                              on failure {pid, errno} to fd 3, exit 127 or 126
 *   dtrain-shim guard                          on stdin EOF, SIGKILL every group listed ("+PGID\n",
 *                                              removed by "-PGID\n")
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int do_exec(int argc, char** argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fputs("dtrain-shim: internal helper of dtrain launch, not for direct use\n", stderr);
    return 2;
  }
  long agent = strtol(argv[2], NULL, 10);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(125);
  if ((long)getppid() != agent) _exit(128 + SIGKILL);
  fcntl(3, F_SETFD, FD_CLOEXEC);
  execvp(argv[4], argv + 4);
  int err = errno;
  int32_t rec[2] = {(int32_t)getpid(), (int32_t)err};
  ssize_t n = write(3, rec, sizeof rec);
  (void)n;
  _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

static int do_guard(void) {
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  size_t cap = 64, count = 0;
  long* groups = malloc(cap * sizeof *groups);
  char line[64];
  size_t len = 0;
  char buf[4096];
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (len + 1 < sizeof line) line[len++] = buf[i];
        continue;
      }
      line[len] = '\0';
      long pg = len > 1 ? strtol(line + 1, NULL, 10) : 0;
      if (pg > 1 && line[0] == '+') {
        if (count == cap) {
          long* bigger = realloc(groups, 2 * cap * sizeof *groups);
          if (bigger != NULL) {
            groups = bigger;
            cap *= 2;
          }
        }
        if (count < cap && groups != NULL) groups[count++] = pg;
      } else if (pg > 1 && line[0] == '-') {
        for (size_t k = 0; k < count; ++k)
          if (groups[k] == pg) {
            groups[k] = groups[--count];
            break;
          }
      }
      len = 0;
    }
  }
  for (size_t k = 0; k < count; ++k) kill((pid_t)-groups[k], SIGKILL);
  free(groups);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "exec") == 0) return do_exec(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "guard") == 0) return do_guard();
  fputs("dtrain-shim: internal helper of dtrain launch, not for direct use\n", stderr);
  return 2;
}
