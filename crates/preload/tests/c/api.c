/* The C API from C90: gcc -std=c90 -pedantic -Werror. Each check prints a line the Rust
 * test reads; the exit summary (stderr) is checked there too. */
#include <stdio.h>
#include <string.h>
#include "tickscope.h"

static volatile unsigned long sink;

static void spin(unsigned long n)
{
    unsigned long i;
    for (i = 0; i < n; i++) {
        sink += i;
    }
}

/* Three return paths: the cleanup attribute ends the scope on each. */
static int parse(int x)
{
    TICKSCOPE_SCOPE("parse");
    spin(1000);
    if (x % 3 == 0) {
        return 0;
    }
    if (x % 3 == 1) {
        return 1;
    }
    return 2;
}

/* Called through a volatile pointer, so that gcc -O2 cannot inline it into main: the
 * profile must have a function named parse for the test to find. */
static int (*volatile parse_call)(int) = parse;

/* An API of two functions, one calling the other: one row, time counted once. */
static void pool_free(void)
{
    TICKSCOPE_API(pool);
    spin(100);
}

static void pool_alloc(void)
{
    TICKSCOPE_API(pool);
    spin(100);
    pool_free();
}

static void named_after_function(void)
{
    TICKSCOPE_FUNCTION();
    spin(10);
}

int main(int argc, char **argv)
{
    int i;
    int rc;
    tickscope_timer timer;
    tickscope_scope scope;
    tickscope_u64 ticks;
    double seconds;
    const char *profile = argc > 1 ? argv[1] : "api.pb.gz";
    const char *capture = argc > 2 ? argv[2] : "api.tscap";

    rc = tickscope_timer_create(&timer);
    printf("timer_create %d\n", rc);
    for (i = 0; i < 300; i++) {
        parse(i);
    }
    for (i = 0; i < 50; i++) {
        pool_alloc();
    }
    for (i = 0; i < 7; i++) {
        named_after_function();
    }
    /* Explicit begin/end over a call site of our own. */
    {
        static tickscope_callsite site = {"manual", __FILE__, 0, __LINE__, TICKSCOPE_KIND_SCOPE, 0};
        rc = tickscope_scope_begin(&site, &scope);
        spin(10);
        printf("begin %d end %d end-again %d\n", rc, tickscope_scope_end(&scope),
               tickscope_scope_end(&scope));
    }

    /* The timer. */
    seconds = tickscope_timer_elapsed(&timer);
    ticks = tickscope_timer_elapsed_ticks(&timer, 1);
    printf("elapsed %s ticks %s rate %s now %s ms %s\n", seconds > 0.0 ? "ok" : "zero",
           ticks > 0 ? "ok" : "zero", tickscope_ticks_per_second() > 1000 ? "ok" : "zero",
           tickscope_ticks() > 0 ? "ok" : "zero",
           tickscope_system_time_ms() > 1600000000000.0 ? "ok" : "bad");
    printf("reset %d\n", tickscope_timer_reset(&timer));

    /* Errors: codes and messages, never a crash. */
    rc = tickscope_scope_begin(0, &scope);
    printf("null site %d %s\n", rc, tickscope_last_error());
    tickscope_scope_end(&scope);
    printf("null timer %d\n", tickscope_timer_create(0));
    rc = tickscope_sampler_stop();
    printf("stop before start %d %s\n", rc, tickscope_last_error());
    rc = tickscope_sampler_start(0, profile);
    printf("bad rate %d %s\n", rc, tickscope_last_error());
    printf("bad sink %d\n", tickscope_capture_start(""));
    printf("capture stop before start %d\n", tickscope_capture_stop());

    /* Sampler and capture. */
    printf("capture start %d\n", tickscope_capture_start(capture));
    rc = tickscope_sampler_start(1000, profile);
    printf("sampler start %d %s\n", rc, rc ? tickscope_last_error() : "");
    printf("sampler start again %d\n", tickscope_sampler_start(1000, profile));
    for (i = 0; i < 20000; i++) {
        parse_call(i);
    }
    printf("flush %d\n", tickscope_sampler_flush());
    for (i = 0; i < 20000; i++) {
        parse_call(i);
    }
    printf("sampler stop %d\n", tickscope_sampler_stop());
    printf("capture stop %d\n", tickscope_capture_stop());
    printf("version %s enabled %d\n", tickscope_version(), tickscope_is_enabled());
    return 0;
}
