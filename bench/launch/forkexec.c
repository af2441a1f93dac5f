/* The floor under any launcher: fork N children, each exec'ing PROG, then wait for all of them.
 * bench/run-all.sh times this process from the outside exactly as it times `dtrain launch` and
 * mpirun, so its wall time is the fork + exec + exit + reap cost of N workers and nothing else.
 *
 *   bench_forkexec N PROG [ARGS...]      exit status: 0, 1 when a child failed, 2 on bad usage */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int n = argc >= 3 ? atoi(argv[1]) : 0;
  if (n <= 0 || n > 4096) {
    fprintf(stderr, "usage: bench_forkexec N PROG [ARGS...]  (N in 1..4096)\n");
    return 2;
  }
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("bench_forkexec: fork");
      return 1;
    }
    if (pid == 0) {
      execv(argv[2], argv + 2);
      _exit(127);
    }
  }
  int failed = 0, st;
  while (wait(&st) > 0) failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  return failed;
}
