/*
 * tickscope.h: the C and C++ API of libtickscope (C90 and later, C++98 and later).
 *
 * Link with -ltickscope (libtickscope.so or libtickscope.a, built by
 * `cargo build --release -p tickscope-preload` into target/release/).
 *
 *   #include "tickscope.h"
 *
 *   static void parse(const char *line)
 *   {
 *       TICKSCOPE_SCOPE("parse");      (GCC/Clang C: ends on every return path)
 *       ...
 *   }
 *
 *   void *pool_alloc(size_t n)
 *   {
 *       TICKSCOPE_API(alloc);          (one row for every function of the API)
 *       ...
 *   }
 *
 * At exit a table of every scope appears on stderr by itself (calls, total, self, mean,
 * min, p50, p99, max); TICKSCOPE_INTERVAL=1s adds a line per thread and interval. The
 * TICKSCOPE_* variables of the Rust crate apply unchanged.
 *
 * Errors: functions returning int give TICKSCOPE_OK (0) or a negative TICKSCOPE_E* code,
 * and tickscope_last_error() says why. Functions returning a value return 0 when they
 * cannot. No function lets a Rust panic unwind into C.
 *
 * Threads: a tickscope_scope belongs to the thread that began it; end it on that thread,
 * in reverse order of beginning (the macros do both).
 */
#ifndef TICKSCOPE_H
#define TICKSCOPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* 64-bit counts: C90 has no long long; GCC and Clang accept it with __extension__. */
#if defined(__GNUC__) || defined(__clang__)
__extension__ typedef unsigned long long tickscope_u64;
#elif defined(_MSC_VER)
typedef unsigned __int64 tickscope_u64;
#else
typedef unsigned long tickscope_u64;
#endif

/* Return codes. */
#define TICKSCOPE_OK 0
#define TICKSCOPE_EINVAL (-1)       /* a null pointer, empty string or bad number */
#define TICKSCOPE_ESTATE (-2)       /* already running, or not running */
#define TICKSCOPE_EIO (-3)          /* a file could not be written */
#define TICKSCOPE_EUNSUPPORTED (-4) /* not possible on this system */
#define TICKSCOPE_EPANIC (-5)       /* a bug in the library, caught at the boundary */

/* Why the calling thread's last failing call failed ("" if none). Valid until the
 * thread's next failing call. */
const char *tickscope_last_error(void);

/* The library's version, "0.1.0". */
const char *tickscope_version(void);

/* ---- Scopes ------------------------------------------------------------------------ */

#define TICKSCOPE_KIND_SCOPE 0    /* a row of its own, named `name` */
#define TICKSCOPE_KIND_GROUP 1    /* one row for every call site of the group `name` */
#define TICKSCOPE_KIND_FUNCTION 2 /* a row named after `function` (__PRETTY_FUNCTION__ is
                                     cleaned to ns::Class::method) */

/* A call site. Give it static storage duration: the library keeps a pointer to it and
 * fills in `registered` on first use. */
typedef struct tickscope_callsite {
    const char *name;
    const char *file;
    const char *function;
    int line;
    int kind;
    void *registered; /* 0 at first; written by the library */
} tickscope_callsite;

/* An open scope: storage the library fills in. */
typedef struct tickscope_scope {
    void *opaque_[6];
} tickscope_scope;

/* Opens a scope of `site` on the calling thread. On error `scope` is still valid (ending
 * it does nothing). */
int tickscope_scope_begin(tickscope_callsite *site, tickscope_scope *scope);
/* Closes it; ending a scope twice does nothing the second time. */
int tickscope_scope_end(tickscope_scope *scope);

/* Recording on (1) or off (0) at run time; off, a scope costs a load and a branch. */
int tickscope_set_enabled(int on);
int tickscope_is_enabled(void);
/* Prints the summary now, as at exit. */
int tickscope_report(void);

#define TICKSCOPE_CAT2_(a, b) a##b
#define TICKSCOPE_CAT_(a, b) TICKSCOPE_CAT2_(a, b)
#define TICKSCOPE_SITE_(kind, name, function)                                         \
    static tickscope_callsite TICKSCOPE_CAT_(tickscope_site_, __LINE__) = {           \
        name, __FILE__, function, __LINE__, kind, 0}

#ifdef __cplusplus
} /* extern "C" */

namespace tickscope {
/* RAII: the scope ends when the object goes out of scope. */
class Scope {
  public:
    explicit Scope(tickscope_callsite *site) { tickscope_scope_begin(site, &scope_); }
    ~Scope() { tickscope_scope_end(&scope_); }

  private:
    Scope(const Scope &);
    Scope &operator=(const Scope &);
    tickscope_scope scope_;
};
} /* namespace tickscope */

#define TICKSCOPE_OPEN_(kind, name, function)                                         \
    TICKSCOPE_SITE_(kind, name, function);                                            \
    ::tickscope::Scope TICKSCOPE_CAT_(tickscope_scope_, __LINE__)(                    \
        &TICKSCOPE_CAT_(tickscope_site_, __LINE__))
#define TICKSCOPE_SCOPE(name) TICKSCOPE_OPEN_(TICKSCOPE_KIND_SCOPE, name, __func__)
#define TICKSCOPE_FUNCTION() TICKSCOPE_OPEN_(TICKSCOPE_KIND_FUNCTION, 0, __PRETTY_FUNCTION__)
#define TICKSCOPE_API(group) TICKSCOPE_OPEN_(TICKSCOPE_KIND_GROUP, #group, __func__)

extern "C" {
#elif defined(__GNUC__) || defined(__clang__)

/* C with GCC or Clang: the scope ends on every path out of the block (cleanup
 * attribute). These are declarations: in C90 put them before the block's statements. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define TICKSCOPE_FUNC_ __func__
#else
#define TICKSCOPE_FUNC_ (__extension__ __FUNCTION__)
#endif
#define TICKSCOPE_OPEN_(kind, name, function)                                         \
    TICKSCOPE_SITE_(kind, name, function);                                            \
    tickscope_scope TICKSCOPE_CAT_(tickscope_scope_, __LINE__)                        \
        __attribute__((cleanup(tickscope_scope_cleanup_)));                           \
    int TICKSCOPE_CAT_(tickscope_begun_, __LINE__) __attribute__((unused)) =          \
        tickscope_scope_begin(&TICKSCOPE_CAT_(tickscope_site_, __LINE__),            \
                              &TICKSCOPE_CAT_(tickscope_scope_, __LINE__))
#define TICKSCOPE_SCOPE(name) TICKSCOPE_OPEN_(TICKSCOPE_KIND_SCOPE, name, TICKSCOPE_FUNC_)
#define TICKSCOPE_FUNCTION()                                                          \
    TICKSCOPE_OPEN_(TICKSCOPE_KIND_FUNCTION, 0, TICKSCOPE_FUNC_)
#define TICKSCOPE_API(group) TICKSCOPE_OPEN_(TICKSCOPE_KIND_GROUP, #group, TICKSCOPE_FUNC_)

#endif

/* What the cleanup attribute calls: tickscope_scope_end. */
void tickscope_scope_cleanup_(tickscope_scope *scope);

/* ---- Timer ------------------------------------------------------------------------- */

/* A timer over the CPU's counter, calibrated, guarded against jumps and backward steps. */
typedef struct tickscope_timer {
    tickscope_u64 opaque_[3];
} tickscope_timer;

/* Starts `timer` now (create), or restarts it (reset). */
int tickscope_timer_create(tickscope_timer *timer);
int tickscope_timer_reset(tickscope_timer *timer);
/* Seconds since the start or last reset. */
double tickscope_timer_elapsed(const tickscope_timer *timer);
/* Ticks since the start; with `reset` nonzero the timer restarts at the same reading, so
 * consecutive calls partition time with nothing lost between them. */
tickscope_u64 tickscope_timer_elapsed_ticks(tickscope_timer *timer, int reset);
/* The calibrated tick rate, the counter now, and the time of day in ms since 1970. */
tickscope_u64 tickscope_ticks_per_second(void);
tickscope_u64 tickscope_ticks(void);
tickscope_u64 tickscope_system_time_ms(void);

/* ---- Sampler ----------------------------------------------------------------------- */

#define TICKSCOPE_MODE_CPU 0
#define TICKSCOPE_MODE_WALL 1

/* Starts sampling every thread, `hz` samples per second of CPU time each; the profile goes
 * to `path` (pprof, gzipped) at stop, at flush, and at exit if still running. */
int tickscope_sampler_start(unsigned hz, const char *path);
int tickscope_sampler_start_mode(unsigned hz, const char *path, int mode);
/* Stops and writes the profile. */
int tickscope_sampler_stop(void);
/* Writes everything sampled so far; sampling goes on. */
int tickscope_sampler_flush(void);

/* ---- Capture ----------------------------------------------------------------------- */

/* Streams every scope begin and end to `sink`, as TICKSCOPE_CAPTURE takes it: a file path
 * (.tscap; read it with `tickscope report`), tcp://HOST:PORT (`tickscope capture listen`),
 * or flight:DURATION[:PATH] (a flight recorder of the last DURATION, e.g. flight:10s). */
int tickscope_capture_start(const char *sink);
int tickscope_capture_stop(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TICKSCOPE_H */
