/* A known heap for LD_PRELOAD=libtickscope.so with TICKSCOPE_HEAPPROFILE (tests/heap.rs):
 * heap_keep() keeps 1,000 blocks of 64 KiB, heap_churn() allocates and frees 200,000 of
 * 64 B, heap_leak() leaks 1,000 of 10 KiB (calloc). Around them, every other function of
 * the family once, a fork child that allocates and exits, threads that allocate and free,
 * and a free of a block of another allocator's (mmap): none of it may harm the program. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *held[1000];

__attribute__((noinline)) static void heap_keep(void) {
    for (int i = 0; i < 1000; i++) {
        held[i] = malloc(64 << 10);
        memset(held[i], 1, 64);
    }
}

__attribute__((noinline)) static void heap_churn(void) {
    for (int i = 0; i < 200000; i++) {
        volatile char *p = malloc(64);
        p[0] = (char)i;
        free((void *)p);
    }
}

__attribute__((noinline)) static void heap_leak(void) {
    for (int i = 0; i < 1000; i++) {
        char *p = calloc(10, 1024);
        if (p[5000] != 0) abort();
    }
}

/* Every other function of the family: each result used, each freed. */
__attribute__((noinline)) static int family(void) {
    int bad = 0;
    char *p = malloc(10);
    strcpy(p, "tickscope");
    p = realloc(p, 100000);
    bad |= strcmp(p, "tickscope") != 0;
    p = reallocarray(p, 10, 1000);
    bad |= strcmp(p, "tickscope") != 0;
    bad |= malloc_usable_size(p) < 10000;
    free(p);
    void *a = NULL;
    bad |= posix_memalign(&a, 256, 1000) != 0 || ((size_t)a & 255) != 0;
    free(a);
    a = aligned_alloc(64, 640);
    bad |= ((size_t)a & 63) != 0;
    free(a);
    a = memalign(128, 100);
    bad |= ((size_t)a & 127) != 0;
    free(a);
    a = valloc(100);
    bad |= ((size_t)a & 4095) != 0;
    free(a);
    free(NULL);
    volatile size_t huge = (size_t)-1;
    bad |= reallocarray(NULL, huge, 16) != NULL;
    return bad;
}

/* Each thread's allocations: used, so that the compiler keeps them. */
__attribute__((noinline)) static void heap_threads(void) {
    for (int i = 0; i < 20000; i++) {
        volatile char *p = malloc(100 + i % 1000);
        p[0] = (char)i;
        free((void *)p);
    }
}

static void *worker(void *arg) {
    (void)arg;
    heap_threads();
    return NULL;
}

/* One of many threads: a few blocks, the last one freed by the thread that joins it. */
static void *light_worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        volatile char *p = malloc(1000 + i);
        p[0] = 1;
        free((void *)p);
    }
    return calloc(1, 4096);
}

/* --threads N: N threads, 250 at a time, each allocating and freeing. */
static int many_threads(int n) {
    for (int done = 0; done < n; done += 250) {
        pthread_t t[250];
        int k = n - done < 250 ? n - done : 250;
        for (int i = 0; i < k; i++)
            if (pthread_create(&t[i], NULL, light_worker, NULL) != 0) return 1;
        for (int i = 0; i < k; i++) {
            void *last = NULL;
            pthread_join(t[i], &last);
            free(last);
        }
    }
    printf("heap: %d threads done\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--threads") == 0) return many_threads(atoi(argv[2]));
    if (argc > 1 && strcmp(argv[1], "--bad-free") == 0) {
        /* A pointer malloc never gave: what glibc's free does with it (abort), it does. */
        char buf[64];
        volatile char *bad = buf + 16;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
        free((void *)bad);
#pragma GCC diagnostic pop
        printf("heap: the bad free returned\n");
        return 0;
    }
    /* --no-fork: the benchmark's run (heaptrack waited for ever on a fork child once). */
    int forks = !(argc > 1 && strcmp(argv[1], "--no-fork") == 0);
    heap_keep();
    heap_churn();
    heap_leak();
    if (family()) {
        fprintf(stderr, "heap: a function of the malloc family misbehaved\n");
        return 1;
    }
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    pid_t child = forks ? fork() : -1;
    if (child == 0) {
        /* The child allocates and exits: it writes no profile over its parent's. */
        for (int i = 0; i < 1000; i++) {
            volatile char *p = malloc(1 << 16);
            p[0] = 1;
            free((void *)p);
        }
        exit(0);
    }
    int status = 0;
    if (forks && (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
        return 1;
    /* A block from elsewhere, freed as the program's own free would see it: mmap'd memory
     * is not the allocator's, so it is given back with munmap, never free; the profiler
     * only looks at what passes through free. */
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(m, 4096);
    printf("heap: done\n");
    return 0;
}
