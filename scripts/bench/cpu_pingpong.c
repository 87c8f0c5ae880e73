// Round-trip latency of a cache line bounced between CPU 0 and CPU 1, in nanoseconds.
//
// vhost-user forwarding is bound by exactly this: the guest and the host poll lines the other
// side writes. On this VM kind the two vCPUs sometimes share a last-level cache (~100 ns) and
// sometimes do not (~400 ns), and move between the two: pvp.sh probes before and after each run
// and compares backends only within one placement.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn __attribute__((aligned(64)));
static long rounds = 200000;

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void* responder(void* unused) {
  (void)unused;
  pin(1);
  for (long i = 0; i < rounds; ++i) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) rounds = atol(argv[1]);
  pthread_t thread;
  pthread_create(&thread, NULL, responder, NULL);
  pin(0);
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < rounds; ++i) {
    atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  pthread_join(thread, NULL);
  const double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
  printf("%.0f\n", ns / rounds);
  return 0;
}
