#ifndef DTRAIN_AGENT_SHIM_H
#define DTRAIN_AGENT_SHIM_H
/* The agent's two helper processes (shim.c), in C so that one implementation serves both the
 * static `dtrain-shim` program (shim_main.c) and the hidden `dtrain __exec` / `dtrain __guard`
 * entry points of the dtrain binary (agent.hpp: exec_shim_main, guardian_main). */
#ifdef __cplusplus
extern "C" {
#endif

/* argv: PROGRAM WORD AGENT_PID -- COMMAND [ARGS...]. Sets PR_SET_PDEATHSIG(SIGKILL), checks the
 * agent is still the parent, then execvp()s COMMAND; never returns on success. `who` names the
 * helper in the usage message ("dtrain-shim", "dtrain __exec"). */
int dtrain_shim_exec(int argc, char** argv, const char* who);

/* Reads "+PGID\n" / "-PGID\n" lines from stdin; on EOF SIGKILLs every group still listed. */
int dtrain_shim_guard(void);

#ifdef __cplusplus
}
#endif
#endif
