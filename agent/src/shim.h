#ifndef DTRAIN_AGENT_SHIM_H
#define DTRAIN_AGENT_SHIM_H
/* The agent's guardian process (shim.c), in C so that one implementation serves both the static
 * `dtrain-shim` program (shim_main.c) and the hidden `dtrain __guard` entry point of the dtrain
 * binary (agent.hpp: guardian_main). */
#ifdef __cplusplus
extern "C" {
#endif

/* Reads "+PGID\n" / "-PGID\n" lines (and "=ID", "/PREFIX", ".") from stdin; on EOF SIGKILLs every
 * group still listed and, unless told "." (all clear), what descends from them or carries the
 * agent's id, and removes the workers' shared-memory segments. */
int dtrain_shim_guard(void);

#ifdef __cplusplus
}
#endif
#endif
