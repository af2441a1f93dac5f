/* dtrain-shim: the agent's two helper processes (shim.c) as a tiny program (libc only, linked
 * statically where possible), so that starting a worker costs one small exec instead of a second
 * start of the whole dtrain binary. Same protocol as `dtrain __exec` / `dtrain __guard`:
 *
 *   dtrain-shim exec AGENT_PID -- COMMAND...   PR_SET_PDEATHSIG(SIGKILL), check the parent, execvp;
 *                                              on failure {pid, errno} to fd 3, exit 127 or 126
 *   dtrain-shim guard                          on stdin EOF, SIGKILL every group listed ("+PGID\n",
 *                                              removed by "-PGID\n")
 */
#include <stdio.h>
#include <string.h>

#include "dtrain/common/exit_codes.h"
#include "shim.h"

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "exec") == 0) return dtrain_shim_exec(argc, argv, "dtrain-shim");
  if (argc >= 2 && strcmp(argv[1], "guard") == 0) return dtrain_shim_guard();
  fputs("dtrain-shim: internal helper of dtrain launch, not for direct use\n", stderr);
  return DTRAIN_EXIT_USAGE;
}
