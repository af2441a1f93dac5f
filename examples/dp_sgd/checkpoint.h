/* The demo worker's checkpoint files (checkpoint.c): <dir>/step-<k>.ckpt, k the SGD steps completed
 * since the start of training. A file is text:
 *
 *   dtrain-demo-worker checkpoint 1
 *   step <k>
 *   dim <dim>
 *   float64 <0|1>
 *   <dim + 1 parameters, one C99 %a hex float per line: the weights, then the bias>
 *
 * so a round trip is bit-exact. Plain file I/O only; the worker decides who reads and writes. */
#ifndef DTRAIN_DEMO_CHECKPOINT_H
#define DTRAIN_DEMO_CHECKPOINT_H

#include <stddef.h>

#define CKPT_PATH_MAX 4096

typedef struct {
  long step;   /* k */
  int dim;     /* weights; the file holds dim + 1 parameters */
  int f64;     /* 1: float64 training, 0: float32 values held in doubles */
  const double* params;
} ckpt_state_t;

/* Writes <dir>/step-<k>.ckpt atomically (a hidden temp file in dir, fsync, rename), then removes
 * <dir>/step-<drop>.ckpt when drop > 0 (an older one this run wrote). 0, or -1 with the reason in
 * err (errno's text, naming the file). */
int ckpt_save(const char* dir, const ckpt_state_t* s, long drop, char* err, size_t errlen);

/* The newest checkpoint in dir: its path into path and its k; 0 when there is none (or no dir),
 * 1 when found, -1 with the reason in err when dir cannot be read. Names other than step-<k>.ckpt
 * (temp files, anything else) are ignored. */
int ckpt_find_newest(const char* dir, char* path, size_t pathlen, long* step, char* err, size_t errlen);

/* Reads path into *s (s->params points at out, which holds max_params values). 0, or -1 with the
 * reason in err (cannot open, not a checkpoint, a bad line, too many parameters). */
int ckpt_load(const char* path, ckpt_state_t* s, double* out, int max_params, char* err, size_t errlen);

#endif
