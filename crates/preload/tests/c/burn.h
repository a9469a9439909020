/* Spinning for a known CPU time, for the test programs beside this file. */
#ifndef TICKSCOPE_TEST_BURN_H
#define TICKSCOPE_TEST_BURN_H

#include <time.h>

static volatile unsigned long long sink;

/* The calling thread's CPU time, in ns. */
static long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins until the calling thread has used `ns` more nanoseconds of CPU time. */
static void burn(long long ns)
{
    long long end = cpu_ns() + ns;
    unsigned long long i;
    while (cpu_ns() < end)
        for (i = 0; i < 10000; i++)
            sink += i * 2654435761u;
}

#endif
