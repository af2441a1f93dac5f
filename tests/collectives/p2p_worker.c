/* A worker for the real-process tests of groups and point-to-point at the C ABI; run it under
 * `dtrain launch`.   p2p_worker MODE [--ignore-sigterm]
 *   groups    the tensor, pipeline and data groups from the environment: sizes and ranks as the
 *             layout says, members (allgathered world ranks) as the mixed radix of
 *             DTRAIN_PARALLEL_ORDER gives them, an allreduce in each, and a pipeline pass forward and
 *             back with sendrecv (DTRAIN_PROC_NULL at the ends)
 *   p2p       every dtype and sizes 0 .. 3 MiB around a ring (sendrecv), send/recv in pairs with
 *             tags, and both neighbours exchanging 4 MiB at once
 *   split     dtrain_comm_split: colors, keys, DTRAIN_UNDEFINED, a split of a split, collectives on
 *             each
 *   mismatch  rank 1 receives rank 0's message with another count: both must fail, naming both
 *   die       rank 1 sends 64 MiB to rank 0 and is SIGKILLed once its send blocks halfway (rank 0 not
 *             receiving yet); rank 0, once rank 1's process is gone, receives and must fail naming it
 *   timeout   rank 0 receives from rank 1, which never sends, with a 1 s deadline: DTRAIN_ERR_TIMEOUT
 *             naming rank 1 (rank 1 waits in a receive from rank 0 until rank 0's failure ends it)
 *   eager     rank 0's 64 KiB send returns before rank 1 receives: rank 1 receives only once rank 0
 *             has created the file $P2P_SYNC_DIR/sent after its send returned
 * Prints "rank R MODE ok" and exits 0, or says what differed and exits 1. */
#define _GNU_SOURCE
#include <dtrain/collectives.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;

static int fail(const char* what, dtrain_status_t st) {
  fprintf(stderr, "rank %d: %s: status %s (%d): %s\n", g_rank, what, dtrain_status_string(st), (int)st,
          dtrain_last_error());
  fflush(stderr);
  return 1;
}
#define CALL(expr, what)                         \
  do {                                           \
    dtrain_status_t st_ = (expr);                \
    if (st_ != DTRAIN_SUCCESS) return fail(what, st_); \
  } while (0)
#define EXPECT(cond, what)                                              \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "rank %d: %s (%s:%d)\n", g_rank, what, __FILE__, __LINE__); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

static int env_int(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : -1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const size_t kSize[] = {1, 1, 4, 8, 2, 2, 4, 8};

static unsigned char pattern(int from, int to, int seq, size_t i) {
  return (unsigned char)((i * 131u + (size_t)from * 7u + (size_t)to * 13u + (size_t)seq * 29u) >> 1);
}

/* ---- groups ---- */

/* The world ranks of this rank's group of `kind` (0 tp, 1 pp, 2 dp), by the mixed-radix rule. */
static int expected_members(int kind, int* out) {
  const char* sizes[3] = {"DTRAIN_TP_SIZE", "DTRAIN_PP_SIZE", "DTRAIN_DP_SIZE"};
  const char* ranks[3] = {"DTRAIN_TP_RANK", "DTRAIN_PP_RANK", "DTRAIN_DP_RANK"};
  const char* names[3] = {"tp", "pp", "dp"};
  const char* order = getenv("DTRAIN_PARALLEL_ORDER");
  int size[3], coord[3], stride[3] = {0, 0, 0}, place = 1;
  for (int k = 0; k < 3; ++k) {
    size[k] = env_int(sizes[k]);
    coord[k] = env_int(ranks[k]);
  }
  for (int i = 0; i < 3 && order; ++i)
    for (int k = 0; k < 3; ++k)
      if (strncmp(order + 3 * i, names[k], 2) == 0) {
        stride[k] = place;
        place *= size[k];
      }
  int base = 0;
  for (int k = 0; k < 3; ++k)
    if (k != kind) base += coord[k] * stride[k];
  for (int j = 0; j < size[kind]; ++j) out[j] = base + j * stride[kind];
  return size[kind];
}

static int mode_groups(void) {
  const dtrain_group_kind_t kinds[3] = {DTRAIN_GROUP_TENSOR, DTRAIN_GROUP_PIPELINE, DTRAIN_GROUP_DATA};
  const char* ranks[3] = {"DTRAIN_TP_RANK", "DTRAIN_PP_RANK", "DTRAIN_DP_RANK"};
  dtrain_comm_t g[3];
  for (int k = 0; k < 3; ++k) {
    int members[256], got[256], r = -1, n = -1;
    CALL(dtrain_comm_init_group_from_env(kinds[k], &g[k]), "init group");
    CALL(dtrain_comm_rank(g[k], &r), "rank");
    CALL(dtrain_comm_size(g[k], &n), "size");
    EXPECT(n == expected_members(k, members), "group size");
    EXPECT(r == env_int(ranks[k]), "group rank is not the coordinate");
    CALL(dtrain_allgather(g[k], &g_rank, got, 1, DTRAIN_INT32, NULL), "allgather");
    EXPECT(memcmp(got, members, (size_t)n * sizeof(int)) == 0, "group members");
    double x = g_rank, sum = 0;
    CALL(dtrain_allreduce(g[k], &x, &x, 1, DTRAIN_FLOAT64, DTRAIN_SUM, NULL), "allreduce");
    for (int j = 0; j < n; ++j) sum += members[j];
    EXPECT(x == sum, "group allreduce");
  }
  /* Forward: each stage adds its world rank to what the previous one sent; back: the total. */
  int r = -1, n = -1;
  dtrain_comm_rank(g[1], &r);
  dtrain_comm_size(g[1], &n);
  const int prev = r > 0 ? r - 1 : DTRAIN_PROC_NULL, next = r + 1 < n ? r + 1 : DTRAIN_PROC_NULL;
  int64_t act = 0, grad = 0;
  CALL(dtrain_recv(g[1], &act, 1, DTRAIN_INT64, prev, 1, NULL), "recv forward");
  act += g_rank;
  CALL(dtrain_sendrecv(g[1], &act, 1, DTRAIN_INT64, next, 1, &grad, 1, DTRAIN_INT64, next, 2, NULL), "1F1B step");
  if (next == DTRAIN_PROC_NULL) grad = act;
  CALL(dtrain_send(g[1], &grad, 1, DTRAIN_INT64, prev, 2, NULL), "send backward");
  int members[256];
  int64_t total = 0;
  for (int j = 0, m = expected_members(1, members); j < m; ++j) total += members[j];
  EXPECT(grad == total, "pipeline pass");
  for (int k = 0; k < 3; ++k) CALL(dtrain_comm_destroy(g[k]), "destroy");
  return 0;
}

/* ---- p2p ---- */

static int ring_all_dtypes(dtrain_comm_t c, int r, int n) {
  const size_t counts[] = {0, 1, 3, 1000, 65537, (3u << 20) + 5};
  int seq = 0;
  for (int t = DTRAIN_INT8; t <= DTRAIN_FLOAT64; ++t)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
      const size_t count = k == 5 ? counts[k] / kSize[t] : counts[k], bytes = count * kSize[t];
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      unsigned char* out = malloc(bytes + 1);
      unsigned char* in = malloc(bytes + 1);
      ++seq;
      for (size_t i = 0; i < bytes; ++i) out[i] = pattern(r, next, seq, i);
      in[bytes] = 0xee;
      CALL(dtrain_sendrecv(c, out, count, (dtrain_dtype_t)t, next, seq, in, count, (dtrain_dtype_t)t, prev, seq, NULL),
           "ring sendrecv");
      for (size_t i = 0; i < bytes; ++i) EXPECT(in[i] == pattern(prev, r, seq, i), "ring data");
      EXPECT(in[bytes] == 0xee, "ring wrote past the buffer");
      free(out);
      free(in);
    }
  return 0;
}

static int mode_p2p(dtrain_comm_t c, int r, int n) {
  if (ring_all_dtypes(c, r, n)) return 1;
  /* Pairs: the even rank sends tags 1..3 first, the odd one receives them, then the other way. */
  const int partner = r ^ 1;
  if (partner < n) {
    for (int tag = 1; tag <= 3; ++tag) {
      float v[100];
      if (r % 2 == 0) {
        for (int i = 0; i < 100; ++i) v[i] = (float)(tag * 1000 + i);
        CALL(dtrain_send(c, v, 100, DTRAIN_FLOAT32, partner, tag, NULL), "pair send");
      } else {
        CALL(dtrain_recv(c, v, 100, DTRAIN_FLOAT32, partner, tag, NULL), "pair recv");
        EXPECT(v[99] == (float)(tag * 1000 + 99), "pair data");
      }
    }
  }
  /* Both neighbours at once: 4 MiB each way with the next rank (a 1F1B step). */
  const size_t count = (4u << 20) / sizeof(double);
  double* a = malloc(count * sizeof(double));
  double* b = malloc(count * sizeof(double));
  for (size_t i = 0; i < count; ++i) a[i] = r + (double)i;
  const int next = r + 1 < n ? r + 1 : DTRAIN_PROC_NULL, prev = r > 0 ? r - 1 : DTRAIN_PROC_NULL;
  CALL(dtrain_sendrecv(c, a, count, DTRAIN_FLOAT64, next, 7, b, count, DTRAIN_FLOAT64, next, 8, NULL), "forward");
  if (next != DTRAIN_PROC_NULL) EXPECT(b[count - 1] == -(next + (double)(count - 1)), "gradient");
  for (size_t i = 0; i < count; ++i) a[i] = -(r + (double)i);
  CALL(dtrain_sendrecv(c, a, count, DTRAIN_FLOAT64, prev, 8, b, count, DTRAIN_FLOAT64, prev, 7, NULL), "backward");
  if (prev != DTRAIN_PROC_NULL) EXPECT(b[count - 1] == prev + (double)(count - 1), "activation");
  free(a);
  free(b);
  return 0;
}

/* ---- split ---- */

static int check_group(dtrain_comm_t g, int want_size, int want_rank) {
  int r = -1, n = -1;
  CALL(dtrain_comm_rank(g, &r), "split rank");
  CALL(dtrain_comm_size(g, &n), "split size");
  EXPECT(r == want_rank && n == want_size, "split rank/size");
  double x = 1.5, y = 0;
  CALL(dtrain_allreduce(g, &x, &y, 1, DTRAIN_FLOAT64, DTRAIN_SUM, NULL), "split allreduce");
  EXPECT(y == 1.5 * n, "split allreduce result");
  return 0;
}

static int mode_split(dtrain_comm_t c, int r, int n) {
  dtrain_comm_t odd = NULL, none = NULL, quarter = NULL;
  /* By parity, keys reversing the order; the last rank joins none. */
  const int color = r == n - 1 ? DTRAIN_UNDEFINED : r % 2;
  CALL(dtrain_comm_split(c, color, -r, &odd), "split");
  if (r == n - 1) {
    EXPECT(odd == NULL, "undefined color gave a communicator");
  } else {
    const int members = ((n - 1) - (r % 2) + 1) / 2; /* ranks of this parity below n-1 */
    const int pos = (r / 2);                          /* among them, ascending */
    if (check_group(odd, members, members - 1 - pos)) return 1;
    /* A split of the split: halves of it. */
    int gr = -1, gn = -1;
    dtrain_comm_rank(odd, &gr);
    dtrain_comm_size(odd, &gn);
    CALL(dtrain_comm_split(odd, gr < gn / 2, gr, &quarter), "split of split");
    if (check_group(quarter, gr < gn / 2 ? gn / 2 : gn - gn / 2, gr < gn / 2 ? gr : gr - gn / 2)) return 1;
  }
  CALL(dtrain_comm_split(c, DTRAIN_UNDEFINED, 0, &none), "split undefined");
  EXPECT(none == NULL, "all undefined");
  CALL(dtrain_barrier(c), "parent barrier");
  dtrain_comm_destroy(quarter);
  dtrain_comm_destroy(odd);
  return 0;
}

/* ---- failures ---- */

static int mode_mismatch(dtrain_comm_t c, int r) {
  int32_t v[1000] = {0};
  dtrain_status_t st;
  if (r == 0) {
    CALL(dtrain_send(c, v, 1000, DTRAIN_INT32, 1, 4, NULL), "send");
    st = dtrain_recv(c, v, 1, DTRAIN_INT32, 1, 0, NULL); /* learns of rank 1's failure */
  } else if (r == 1) {
    st = dtrain_recv(c, v, 999, DTRAIN_INT32, 0, 4, NULL);
  } else {
    return 0;
  }
  fprintf(stderr, "rank %d: %s: %s\n", r, dtrain_status_string(st), dtrain_last_error());
  EXPECT(st == DTRAIN_ERR_MISMATCH, "want a mismatch");
  EXPECT(strstr(dtrain_last_error(), "count 999") && strstr(dtrain_last_error(), "count 1000"), "both counts named");
  return 0;
}

/* The state letter of a thread of this process in /proc (R, S, D, ...), '?' when unreadable. */
static char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')'); /* the state follows the command name in parentheses */
  return close != NULL && close[1] == ' ' ? close[2] : '?';
}

/* Whether process pid is gone: no such process, or a zombie waiting for its parent. */
static int process_gone(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  return close == NULL || close[2] == 'Z' || close[2] == 'X';
}

static pid_t g_sender_tid;

/* SIGKILLs this process once the sending thread sleeps in its send (the ring or the socket full). */
static void* kill_when_blocked(void* arg) {
  (void)arg;
  for (int i = 0; i < 60000; ++i) { /* at most a minute of 1 ms polls */
    if (thread_state(g_sender_tid) == 'S') raise(SIGKILL);
    usleep(1000);
  }
  return NULL;
}

static int mode_die(dtrain_comm_t c, int r) {
  const size_t count = 64u << 20;
  int64_t mine = (int64_t)getpid(), pids[64] = {0};
  CALL(dtrain_allgather(c, &mine, pids, 1, DTRAIN_INT64, NULL), "allgather of the pids");
  unsigned char* buf = calloc(count, 1);
  if (r == 1) {
    g_sender_tid = (pid_t)gettid();
    pthread_t t;
    pthread_create(&t, NULL, kill_when_blocked, NULL);
    dtrain_send(c, buf, count, DTRAIN_UINT8, 0, 0, NULL); /* blocks: rank 0 is not receiving yet */
    fprintf(stderr, "rank 1: the send finished before the kill\n");
    return 1;
  }
  if (r != 0) return 0;
  for (int i = 0; i < 60000 && !process_gone((pid_t)pids[1]); ++i) usleep(1000);
  const double t0 = now_s();
  dtrain_status_t st = dtrain_recv(c, buf, count, DTRAIN_UINT8, 1, 0, NULL);
  fprintf(stderr, "rank 0: %s after %.1f s: %s\n", dtrain_status_string(st), now_s() - t0, dtrain_last_error());
  EXPECT(st == DTRAIN_ERR_PEER, "want a peer failure");
  EXPECT(strstr(dtrain_last_error(), "rank 1"), "rank 1 named");
  free(buf);
  return 0;
}

static int mode_timeout(dtrain_comm_t c, int r) {
  double x[4];
  if (r == 1) { /* alive, never sends: waits for rank 0, whose failure ends this receive */
    dtrain_recv(c, x, 4, DTRAIN_FLOAT64, 0, 7, NULL);
    return 0;
  }
  if (r != 0) return 0;
  CALL(dtrain_comm_set_timeout(c, 1), "set_timeout");
  dtrain_status_t st = dtrain_recv(c, x, 4, DTRAIN_FLOAT64, 1, 2, NULL);
  fprintf(stderr, "rank 0: %s: %s\n", dtrain_status_string(st), dtrain_last_error());
  EXPECT(st == DTRAIN_ERR_TIMEOUT, "want a timeout");
  EXPECT(strstr(dtrain_last_error(), "from rank 1 timed out after 1 s"), "rank 1 named");
  return 0;
}

static int mode_eager(dtrain_comm_t c, int r) {
  static unsigned char buf[64 << 10];
  const char* dir = getenv("P2P_SYNC_DIR");
  EXPECT(dir != NULL, "P2P_SYNC_DIR is not set");
  char sent[4096];
  snprintf(sent, sizeof sent, "%s/sent", dir);
  if (r == 0) {
    CALL(dtrain_send(c, buf, sizeof buf, DTRAIN_UINT8, 1, 0, NULL), "eager send");
    FILE* f = fopen(sent, "w");
    EXPECT(f != NULL, "cannot create the sync file");
    fclose(f);
  } else if (r == 1) {
    /* Up to a minute: a send that waited for this receive never returns, and the file never comes. */
    int i = 0;
    for (; i < 60000 && access(sent, F_OK) != 0; ++i) usleep(1000);
    EXPECT(i < 60000, "rank 0's send did not return before its receiver arrived");
    CALL(dtrain_recv(c, buf, sizeof buf, DTRAIN_UINT8, 0, 0, NULL), "eager recv");
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s groups|p2p|split|mismatch|die|timeout|eager [--ignore-sigterm]\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  if (argc > 2 && strcmp(argv[2], "--ignore-sigterm") == 0) signal(SIGTERM, SIG_IGN);
  g_rank = env_int("RANK");
  int rc;
  if (strcmp(mode, "groups") == 0) {
    rc = mode_groups();
  } else {
    dtrain_comm_t c = NULL;
    int r = -1, n = -1;
    CALL(dtrain_comm_init_from_env(&c), "init");
    dtrain_comm_rank(c, &r);
    dtrain_comm_size(c, &n);
    if (strcmp(mode, "p2p") == 0) rc = mode_p2p(c, r, n);
    else if (strcmp(mode, "split") == 0) rc = mode_split(c, r, n);
    else if (strcmp(mode, "mismatch") == 0) rc = mode_mismatch(c, r);
    else if (strcmp(mode, "die") == 0) rc = mode_die(c, r);
    else if (strcmp(mode, "timeout") == 0) rc = mode_timeout(c, r);
    else if (strcmp(mode, "eager") == 0) rc = mode_eager(c, r);
    else rc = 2;
    if (rc == 0 && strcmp(mode, "mismatch") != 0 && strcmp(mode, "die") != 0 && strcmp(mode, "timeout") != 0)
      CALL(dtrain_barrier(c), "final barrier");
    dtrain_comm_destroy(c);
  }
  if (rc == 0) printf("rank %d %s ok\n", g_rank, mode);
  return rc;
}
