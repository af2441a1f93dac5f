/* The agent's guardian, written in C (libc only) and linked into both the static `dtrain-shim`
 * program and the dtrain binary (`dtrain __guard`), so that it runs as a small process of its own
 * for the whole job (the agent starts it detached: guardian.hpp):
 *
 *   guard  reads "+PGID\n" / "-PGID\n" lines from stdin (a pipe held by the agent), and "=ID\n", the
 *       DTRAIN_AGENT_ID every worker carries. On EOF, which is also what happens when the agent is
 *       SIGKILLed, it SIGKILLs every group still listed, every descendant of their members, and
 *       every process whose environment holds DTRAIN_AGENT_ID=ID (found through /proc): so
 *       grandchildren of workers die with the agent even when they left the group (setsid) and
 *       their parent died first (the kernel kills workers with the agent: PR_SET_PDEATHSIG).
 *       "/PREFIX\n" names the workers' shared-memory stem (DTRAIN_SHM_PREFIX): at the end it also
 *       removes every /dev/shm entry whose name starts with it (a worker killed during setup
 *       leaves its segment there), and "#PATH\n" names a temporary folder of the agent (its run
 *       folder, its checkpoint folder) to remove with its contents. ".\n" is the agent's word that it
 *       reaped, swept and removed everything itself: at EOF only the groups still listed are
 *       killed, and /proc, /dev/shm and the folders are not touched.
 *       Own session, ignores INT/TERM/HUP/PIPE.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/common/exit_codes.h"

#define GUARD_FOLDERS 4
#define GUARD_LINE 4200 /* a line holds a path */

/* The set of process groups to kill, as a growing array (a '+' adds, a '-' removes one), the
 * "DTRAIN_AGENT_ID=ID" of the agent's workers ('=' sets it), their /dev/shm stem ('/' sets it), the
 * agent's temporary folders ('#' adds one), and whether the agent cleaned up itself ('.'). */
struct groups {
  long* pg;
  size_t count, cap;
  char marker[128];
  char shm_prefix[72];
  char* folders[GUARD_FOLDERS];
  int all_clear;
};

/* A stem as common/shm_names.hpp accepts it: 1 to 64 letters, digits, '-', '_' or '.'. */
static int valid_stem(const char* s, size_t len) {
  if (len == 0 || len > 64) return 0;
  for (size_t i = 0; i < len; ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
          c == '.'))
      return 0;
  }
  return 1;
}

/* Removes every /dev/shm entry whose name starts with the stem. */
static void sweep_shm(const char* stem) {
  size_t len = strlen(stem);
  if (!valid_stem(stem, len)) return;
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return;
  struct dirent* de;
  char path[300];
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, stem, len) == 0 && snprintf(path, sizeof path, "/dev/shm/%s", de->d_name) < (int)sizeof path)
      unlink(path);
  closedir(d);
}

static void groups_add(struct groups* g, long pg) {
  if (g->count == g->cap) {
    size_t cap = g->cap == 0 ? 64 : 2 * g->cap;
    long* bigger = realloc(g->pg, cap * sizeof *bigger);
    if (bigger == NULL) return;
    g->pg = bigger;
    g->cap = cap;
  }
  g->pg[g->count++] = pg;
}

static void groups_remove(struct groups* g, long pg) {
  for (size_t k = 0; k < g->count; ++k)
    if (g->pg[k] == pg) {
      g->pg[k] = g->pg[--g->count];
      return;
    }
}

/* One complete line ("+PGID", "-PGID", "=ID", "/PREFIX" or ".", without its newline). */
static void guard_line(struct groups* g, const char* line, size_t len) {
  static const char kName[] = "DTRAIN_AGENT_ID=";
  if (line[0] == '=' && len > 1 && len - 1 + sizeof kName <= sizeof g->marker) {
    memcpy(g->marker, kName, sizeof kName - 1);
    memcpy(g->marker + sizeof kName - 1, line + 1, len - 1);
    g->marker[sizeof kName - 1 + len - 1] = '\0';
    return;
  }
  if (line[0] == '.') {
    g->all_clear = 1;
    return;
  }
  if (line[0] == '#') {
    for (size_t k = 0; k < GUARD_FOLDERS; ++k)
      if (g->folders[k] == NULL) {
        g->folders[k] = strdup(line + 1);
        return;
      }
    return;
  }
  if (line[0] == '/') {
    if (valid_stem(line + 1, len - 1)) {
      memcpy(g->shm_prefix, line + 1, len - 1);
      g->shm_prefix[len - 1] = '\0';
    }
    return;
  }
  long pg = len > 1 ? strtol(line + 1, NULL, 10) : 0;
  if (pg <= 1) return;
  if (line[0] == '+') groups_add(g, pg);
  else if (line[0] == '-') groups_remove(g, pg);
}

/* One process of /proc: pid, parent, process group; `marked` when it is to be killed. */
struct proc_entry {
  long pid, ppid, pgrp;
  int marked;
};

static int read_stat(const char* pid_dir, struct proc_entry* e) {
  char path[300], buf[512];
  if (strlen(pid_dir) > 32) return 0;
  snprintf(path, sizeof path, "/proc/%s/stat", pid_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* close_paren = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  char state;
  if (close_paren == NULL || sscanf(close_paren + 1, " %c %ld %ld", &state, &e->ppid, &e->pgrp) != 3) return 0;
  e->pid = strtol(buf, NULL, 10);
  e->marked = 0;
  return e->pid > 0;
}

/* Whether /proc/PID/environ holds the entry `marker` ("NAME=VALUE", a whole entry). */
static int has_env(const char* pid_dir, const char* marker) {
  char path[300];
  if (marker[0] == '\0' || strlen(pid_dir) > 32) return 0;
  snprintf(path, sizeof path, "/proc/%s/environ", pid_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t mlen = strlen(marker), cap = 1 << 16, len = 0;
  char* buf = malloc(cap + 1);
  int found = 0, first = 1;
  while (buf != NULL && !found) {
    ssize_t n = read(fd, buf + len, cap - len);
    if (n <= 0) break;
    len += (size_t)n;
    /* entries are NUL-terminated: look for the marker at the start of one */
    for (size_t i = first ? 0 : 1; i + mlen <= len && !found; ++i)
      if (((first && i == 0) || buf[i - 1] == '\0') && memcmp(buf + i, marker, mlen) == 0 &&
          (i + mlen == len || buf[i + mlen] == '\0'))
        found = 1;
    if (len == cap) { /* keep the tail that may hold an entry's start (and the NUL before it) */
      size_t keep = mlen + 1;
      memmove(buf, buf + len - keep, keep);
      len = keep;
      first = 0;
    }
  }
  free(buf);
  close(fd);
  return found;
}

static int listed(const struct groups* g, long pg) {
  for (size_t k = 0; k < g->count; ++k)
    if (g->pg[k] == pg) return 1;
  return 0;
}

/* SIGKILLs the members of the listed groups and all their descendants, also those that left the
 * group with setsid (their parent link still leads to a member), and the processes that carry the
 * agent's marker in their environment (those whose parent died first). */
static void kill_trees(const struct groups* g) {
  DIR* d = opendir("/proc");
  if (d == NULL) return;
  struct proc_entry* all = NULL;
  size_t count = 0, cap = 0;
  struct dirent* de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    if (count == cap) {
      size_t bigger_cap = cap == 0 ? 256 : 2 * cap;
      struct proc_entry* bigger = realloc(all, bigger_cap * sizeof *bigger);
      if (bigger == NULL) break;
      all = bigger;
      cap = bigger_cap;
    }
    if (read_stat(de->d_name, &all[count])) {
      all[count].marked = all[count].pid != (long)getpid() && (listed(g, all[count].pgrp) || has_env(de->d_name, g->marker));
      ++count;
    }
  }
  closedir(d);
  for (int changed = 1; changed;) { /* parents first or not: repeat until nothing new is marked */
    changed = 0;
    for (size_t i = 0; i < count; ++i) {
      if (all[i].marked) continue;
      for (size_t j = 0; j < count; ++j)
        if (all[j].marked && all[j].pid == all[i].ppid) {
          all[i].marked = changed = 1;
          break;
        }
    }
  }
  for (size_t i = 0; i < count; ++i)
    if (all[i].marked) kill((pid_t)all[i].pid, SIGKILL);
  free(all);
}

static int remove_entry(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st;
  (void)ftw;
  if (type == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

/* Removes a temporary folder of the agent with what is in it, without following links; only an
 * absolute path whose last part starts with "dtrain-" (what the agent makes), never "/". */
static void remove_folder(const char* path) {
  const char* last = strrchr(path, '/');
  if (path[0] != '/' || last == NULL || strncmp(last + 1, "dtrain-", 7) != 0) return;
  nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int dtrain_shim_guard(void) {
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  struct groups g = {NULL, 0, 0, "", "", {NULL}, 0};
  static char line[GUARD_LINE];
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
      guard_line(&g, line, len);
      len = 0;
    }
  }
  if (!g.all_clear && (g.count > 0 || g.marker[0] != '\0')) kill_trees(&g);
  for (size_t k = 0; k < g.count; ++k) kill((pid_t)-g.pg[k], SIGKILL);
  if (!g.all_clear && g.shm_prefix[0] != '\0') sweep_shm(g.shm_prefix);
  for (size_t k = 0; k < GUARD_FOLDERS; ++k) {
    if (g.folders[k] != NULL && !g.all_clear) remove_folder(g.folders[k]);
    free(g.folders[k]);
  }
  free(g.pg);
  return DTRAIN_EXIT_OK;
}
