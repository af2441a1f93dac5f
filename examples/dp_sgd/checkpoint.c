/* The demo worker's checkpoint files (checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char kMagic[] = "dtrain-demo-worker checkpoint 1";

static int fail(char* err, size_t errlen, const char* what, const char* path, const char* why) {
  snprintf(err, errlen, "%s %s: %s", what, path, why);
  return -1;
}

/* The k of a name "step-<k>.ckpt" (k >= 0, plain decimal), or -1 for any other name. */
static long step_of(const char* name) {
  if (strncmp(name, "step-", 5) != 0 || name[5] < '0' || name[5] > '9') return -1;
  char* end = NULL;
  errno = 0;
  const long k = strtol(name + 5, &end, 10);
  if (errno != 0 || strcmp(end, ".ckpt") != 0) return -1;
  return k;
}

/* The whole file, then fsync and close; 0 or an errno value. */
static int write_file(const char* path, const ckpt_state_t* s) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  FILE* f = fdopen(fd, "w");
  if (f == NULL) {
    const int e = errno;
    close(fd);
    return e;
  }
  int ok = fprintf(f, "%s\nstep %ld\ndim %d\nfloat64 %d\n", kMagic, s->step, s->dim, s->f64) > 0;
  for (int j = 0; ok && j <= s->dim; ++j) ok = fprintf(f, "%a\n", s->params[j]) > 0;
  ok = ok && fflush(f) == 0 && fsync(fd) == 0;
  int e = ok ? 0 : errno;
  if (fclose(f) != 0 && e == 0) e = errno;
  return e != 0 ? e : (ok ? 0 : EIO);
}

int ckpt_save(const char* dir, const ckpt_state_t* s, long drop, char* err, size_t errlen) {
  char tmp[CKPT_PATH_MAX], path[CKPT_PATH_MAX];
  if (snprintf(path, sizeof path, "%s/step-%ld.ckpt", dir, s->step) >= (int)sizeof path ||
      snprintf(tmp, sizeof tmp, "%s/.step-%ld.ckpt.%ld.tmp", dir, s->step, (long)getpid()) >= (int)sizeof tmp)
    return fail(err, errlen, "cannot write a checkpoint in", dir, "the path is too long");
  int e = write_file(tmp, s);
  if (e == 0 && rename(tmp, path) != 0) e = errno;
  if (e != 0) {
    unlink(tmp);
    return fail(err, errlen, "cannot write the checkpoint", path, strerror(e));
  }
  const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);  /* the rename itself made durable */
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  if (drop > 0 && snprintf(path, sizeof path, "%s/step-%ld.ckpt", dir, drop) < (int)sizeof path) (void)unlink(path);
  return 0;
}

int ckpt_find_newest(const char* dir, char* path, size_t pathlen, long* step, char* err, size_t errlen) {
  DIR* d = opendir(dir);
  if (d == NULL) return errno == ENOENT ? 0 : fail(err, errlen, "cannot read the checkpoint folder", dir, strerror(errno));
  long best = -1;
  for (struct dirent* e = readdir(d); e != NULL; e = readdir(d)) {
    const long k = step_of(e->d_name);
    if (k > best) best = k;
  }
  closedir(d);
  if (best < 0) return 0;
  if (snprintf(path, pathlen, "%s/step-%ld.ckpt", dir, best) >= (int)pathlen)
    return fail(err, errlen, "cannot read a checkpoint in", dir, "the path is too long");
  *step = best;
  return 1;
}

/* Reads the header lines into s; 0, or -1 with the reason in err. */
static int read_header(FILE* f, const char* path, ckpt_state_t* s, char* err, size_t errlen) {
  char line[256];
  if (fgets(line, sizeof line, f) == NULL || strncmp(line, kMagic, sizeof kMagic - 1) != 0 ||
      (line[sizeof kMagic - 1] != '\n' && line[sizeof kMagic - 1] != '\0'))
    return fail(err, errlen, "not a dtrain-demo-worker checkpoint:", path, "the first line is not the format's");
  if (fgets(line, sizeof line, f) == NULL || sscanf(line, "step %ld", &s->step) != 1 || s->step < 0 ||
      fgets(line, sizeof line, f) == NULL || sscanf(line, "dim %d", &s->dim) != 1 || s->dim < 1 ||
      fgets(line, sizeof line, f) == NULL || sscanf(line, "float64 %d", &s->f64) != 1 || (s->f64 != 0 && s->f64 != 1))
    return fail(err, errlen, "a bad checkpoint header in", path, "expected the lines step K, dim N, float64 0|1");
  return 0;
}

int ckpt_load(const char* path, ckpt_state_t* s, double* out, int max_params, char* err, size_t errlen) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return fail(err, errlen, "cannot read the checkpoint", path, strerror(errno));
  int rc = read_header(f, path, s, err, errlen);
  if (rc == 0 && s->dim + 1 > max_params) rc = fail(err, errlen, "too many parameters in", path, "dim is out of range");
  char line[256];
  for (int j = 0; rc == 0 && j <= s->dim; ++j) {
    char* end = NULL;
    if (fgets(line, sizeof line, f) != NULL) out[j] = strtod(line, &end);
    if (end == NULL || end == line || (*end != '\n' && *end != '\0'))
      rc = fail(err, errlen, "a bad or missing parameter line in", path, "expected one %a hex float per line");
  }
  if (rc == 0 && fgets(line, sizeof line, f) != NULL) rc = fail(err, errlen, "extra lines at the end of", path, "the file is longer than its dim says");
  fclose(f);
  s->params = out;
  return rc;
}
