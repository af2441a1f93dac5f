/* dtrain-shim: the agent's guardian (shim.c) as a tiny program (libc only, linked statically where
 * possible), so that the process that watches the job for its whole life is a small one instead
 * of a second start of the whole dtrain binary. Same protocol as `dtrain __guard`:
 *
 *   dtrain-shim guard       on stdin EOF, SIGKILL every group listed ("+PGID\n", removed by
 *                           "-PGID\n"), and what descends from them (shim.c)
 */
#include <stdio.h>
#include <string.h>

#include "dtrain/common/exit_codes.h"
#include "shim.h"

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "guard") == 0) return dtrain_shim_guard();
  fputs("dtrain-shim: internal helper of dtrain launch, not for direct use\n", stderr);
  return DTRAIN_EXIT_USAGE;
}
