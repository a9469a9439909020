/* A workload with a known CPU split, for LD_PRELOAD profiling and the gperftools comparison:
 *   main thread: work_a 40%, then work_e 5%
 *   thread 1:    work_b 25%
 *   thread 2:    work_c 20%, then work_d 10%
 * Each work_* spins until its thread's CPU clock has advanced by its share, so the split
 * holds whatever the machine. Build: gcc -O2 -fno-omit-frame-pointer -pthread.
 *
 * usage: workload TOTAL_MS [--exit N] [--underscore-exit N] [--fork] [--exec] [--sigprof] [--wait] [--closefds]
 *                         [--short-threads N] [--list-threads] [--end-now] [--clearenv]
 *                         [--list-cpus] [--list-cpus-once-started] [--library-code]
 * --library-code: prints "library_code present=N outside=M windows=W": N pages of
 * libtickscope's code are mapped in this process, M of them in W 64 KiB windows (a page
 * fault's reach) outside those that hold its `.text.tickscope_start` and `.plt` sections;
 * or "library_code none: WHY".
 * --list-cpus: prints "cpus NAME=CPUS..." (each thread's name and Cpus_allowed_list, from
 * /proc, main's first); --list-cpus-once-started: the same once the sampler's drain thread
 * ("tickscope-sampl") is there and the thread that started it ("tickscope-start") is gone
 * (10 s at most).
 * --list-threads: prints "threads NAME..." (the process's threads, from /proc, once those
 * not main's have named themselves "tickscope-...", 10 s at most) and
 * "perf_events N" (its perf event descriptors) when it comes to that argument; --end-now: exit(0) there.
 * --clearenv: empties the program's environment there (clearenv), as some programs do.
 * --exit N: ends by exit(N) after its work; --underscore-exit N: by _exit(N) (dash's way,
 * and Python's os._exit: no exit handlers run).
 * --short-threads N: main also starts N threads one after another, each spending 1% in
 * work_f and ending (threads shorter than a sampler's poll of /proc/self/task).
 * Prints "cpu_ns N" (getrusage, all threads) and "wall_ns N" (CLOCK_MONOTONIC since main
 * began) on stdout at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static long long total_ns;
static struct timespec main_began;
static volatile unsigned long long sink;
static volatile long sigprof_count;

static long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins for `ns` of this thread's CPU time; the clock (a system call) is read every ~250 µs
 * of work, so under 1% of the time is spent in it. Inlined
 * into each work_* function, so the samples land in them (flat time); each has its own
 * constant, so the compiler cannot fold them into one function. */
static inline __attribute__((always_inline)) void spin(long long ns, unsigned long long salt)
{
    long long end = thread_cpu_ns() + ns;
    unsigned long long x = sink;
    while (thread_cpu_ns() < end) {
        int i;
        for (i = 0; i < 200000; i++) {
            x = x * 6364136223846793005ULL + salt;
        }
        sink = x;
    }
}

#define WORK(name, salt)                                                               \
    static void __attribute__((noinline, noclone)) name(int percent)                          \
    {                                                                                  \
        spin(total_ns / 100 * percent, salt);                                          \
        __asm__ volatile("" ::: "memory");                                             \
    }
WORK(work_a, 1442695040888963407ULL)
WORK(work_b, 1442695040888963409ULL)
WORK(work_c, 1442695040888963411ULL)
WORK(work_d, 1442695040888963413ULL)
WORK(work_e, 1442695040888963415ULL)
WORK(work_f, 1442695040888963417ULL)

static void *thread1(void *arg)
{
    (void)arg;
    work_b(25);
    return 0;
}

static void *thread2(void *arg)
{
    (void)arg;
    work_c(20);
    work_d(10);
    return 0;
}

static void *short_thread(void *arg)
{
    (void)arg;
    work_f(1);
    return 0;
}

static void on_sigprof(int sig)
{
    (void)sig;
    sigprof_count++;
}

static long long rusage_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

/* The next thread of the process listed in `d` (/proc/self/task): its id, with its /proc
 * file `file` open in `*f` (NULL if it could not be opened); 0 after the last. */
static int next_task(DIR *d, const char *file, FILE **f)
{
    char path[300];
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/%s", e->d_name, file);
        *f = fopen(path, "r");
        return atoi(e->d_name);
    }
    return 0;
}

static void append(char *out, size_t size, const char *text)
{
    strncat(out, text, size - strlen(out) - 1);
}

/* The names of the process's threads into `out` (main's first), space-separated; returns
 * how many of the others do not yet have a name of tickscope's ("tickscope-..."): a thread
 * names itself as it starts. */
static int thread_names(char *out, size_t size)
{
    char name[64];
    int unnamed = 0, tid;
    FILE *f;
    DIR *d = opendir("/proc/self/task");
    out[0] = 0;
    while ((tid = next_task(d, "comm", &f))) {
        if (f && fgets(name, sizeof name, f)) {
            name[strcspn(name, "\n")] = 0;
            append(out, size, " ");
            append(out, size, name);
            unnamed += tid != getpid() && strncmp(name, "tickscope-", 10) != 0;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return unnamed;
}

/* Each thread's name and the CPUs it may run on, into `out`: " NAME=CPUS..." (main's
 * first, as /proc lists them). Returns whether the drain thread is there and the starter
 * gone. */
static int thread_cpus(char *out, size_t size)
{
    char line[256], name[64];
    int drain = 0, starter = 0;
    FILE *f;
    DIR *d = opendir("/proc/self/task");
    out[0] = 0;
    while (next_task(d, "status", &f)) {
        name[0] = 0;
        while (f && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            if (!strncmp(line, "Name:\t", 6)) {
                snprintf(name, sizeof name, "%.63s", line + 6);
                drain |= !strcmp(name, "tickscope-sampl");
                starter |= !strcmp(name, "tickscope-start");
            } else if (!strncmp(line, "Cpus_allowed_list:\t", 19)) {
                append(out, size, " ");
                append(out, size, name);
                append(out, size, "=");
                append(out, size, line + 19);
            }
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return drain && !starter;
}

static void list_cpus(int once_started)
{
    char cpus[2048];
    int i;
    for (i = 0; !thread_cpus(cpus, sizeof cpus) && once_started && i < 10000; i++)
        usleep(1000);
    printf("cpus%s\n", cpus);
    fflush(stdout);
}

static void list_threads(void)
{
    char path[300], name[64], names[1024];
    struct dirent *e;
    int i;
    DIR *d;
    /* The library's threads, once they have named themselves (10 s at most). */
    for (i = 0; i < 10000 && thread_names(names, sizeof names) > 0; i++)
        usleep(1000);
    printf("threads%s\n", names);
    /* The perf events open (a sampler's timers). */
    d = opendir("/proc/self/fd");
    i = 0;
    while (d && (e = readdir(d))) {
        ssize_t n;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        n = readlink(path, name, sizeof name - 1);
        if (n > 0) {
            name[n] = 0;
            i += strstr(name, "perf_event") != 0;
        }
    }
    if (d)
        closedir(d);
    printf("perf_events %d\n", i);
    fflush(stdout);
}

/* The start and end (run-time addresses) of the section `want` of the ELF file at `path`
 * loaded at `base`; 0 if it has none. */
static int elf_section(const char *path, unsigned long base, const char *want,
                       unsigned long *lo, unsigned long *hi)
{
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = 0;
    char *names = 0;
    int i, found = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || pread(fd, &eh, sizeof eh, 0) != sizeof eh || eh.e_shstrndx >= eh.e_shnum)
        goto out;
    sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || pread(fd, sh, eh.e_shnum * sizeof *sh, eh.e_shoff) != (ssize_t)(eh.e_shnum * sizeof *sh))
        goto out;
    names = calloc(1, sh[eh.e_shstrndx].sh_size + 1);
    if (!names || pread(fd, names, sh[eh.e_shstrndx].sh_size, sh[eh.e_shstrndx].sh_offset) < 0)
        goto out;
    for (i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_name < sh[eh.e_shstrndx].sh_size && !strcmp(names + sh[i].sh_name, want)) {
            *lo = base + sh[i].sh_addr;
            *hi = *lo + sh[i].sh_size;
            found = 1;
        }
    }
out:
    free(sh);
    free(names);
    if (fd >= 0)
        close(fd);
    return found;
}

/* --library-code (see the top). */
static void library_code(void)
{
    enum { WINDOW = 64 << 10 };
    char line[4096], path[4096] = "", perms[8], file[4096];
    unsigned long lo[16], hi[16], base = 0, a, b, off, start_lo, start_hi, plt_lo, plt_hi;
    long page = sysconf(_SC_PAGESIZE), present = 0, outside = 0, windows = 0;
    unsigned long last_window = 0;
    int i, n = 0, pagemap;
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps)) {
        file[0] = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &a, &b, perms, &off, file) < 5 ||
            !strstr(file, "libtickscope"))
            continue;
        if (off == 0 && !base) {
            base = a;
            snprintf(path, sizeof path, "%s", file);
        }
        if (perms[2] == 'x' && n < 16) {
            lo[n] = a;
            hi[n++] = b;
        }
    }
    if (maps)
        fclose(maps);
    if (!base || !n) {
        printf("library_code none: libtickscope is not loaded\n");
        return;
    }
    if (!elf_section(path, base, ".text.tickscope_start", &start_lo, &start_hi) ||
        !elf_section(path, base, ".plt", &plt_lo, &plt_hi)) {
        printf("library_code none: %s has no .text.tickscope_start or .plt\n", path);
        return;
    }
    pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    for (i = 0; i < n && pagemap >= 0; i++) {
        for (a = lo[i]; a < hi[i]; a += page) {
            uint64_t entry = 0;
            if (pread(pagemap, &entry, sizeof entry, (a / page) * sizeof entry) != sizeof entry)
                continue;
            if (!(entry >> 63))
                continue;
            present++;
            /* In a window that holds part of either section: a fault there maps it. */
            if (!((a / WINDOW >= start_lo / WINDOW && a / WINDOW <= (start_hi - 1) / WINDOW) ||
                  (a / WINDOW >= plt_lo / WINDOW && a / WINDOW <= (plt_hi - 1) / WINDOW))) {
                outside++;
                /* Pages come in address order: a new window is one not seen last. */
                windows += !windows || a / WINDOW != last_window;
                last_window = a / WINDOW;
            }
        }
    }
    if (pagemap >= 0)
        close(pagemap);
    printf("library_code present=%ld outside=%ld windows=%ld\n", present, outside, windows);
    fflush(stdout);
}

static int underscore = 0;

static void __attribute__((noinline)) leave(int status)
{
    if (underscore) {
        _exit(status);
    }
    exit(status);
}

int main(int argc, char **argv)
{
    pthread_t t1, t2;
    int i, exit_status = -1, do_fork = 0, do_exec = 0, do_sigprof = 0, do_wait = 0;
    int do_closefds = 0, files[16], short_threads = 0;
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s TOTAL_MS [--exit N] [--underscore-exit N] [--fork] [--exec] [--sigprof] [--wait] [--closefds] "
                "[--short-threads N] [--list-threads] [--end-now] [--clearenv] "
                "[--list-cpus] [--list-cpus-once-started]\n",
                argv[0]);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &main_began);
    total_ns = atoll(argv[1]) * 1000000LL;
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--exit") && i + 1 < argc) {
            exit_status = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--underscore-exit") && i + 1 < argc) {
            exit_status = atoi(argv[++i]);
            underscore = 1;
        } else if (!strcmp(argv[i], "--fork")) {
            do_fork = 1;
        } else if (!strcmp(argv[i], "--exec")) {
            do_exec = 1;
        } else if (!strcmp(argv[i], "--sigprof")) {
            do_sigprof = 1;
        } else if (!strcmp(argv[i], "--wait")) {
            do_wait = 1;
        } else if (!strcmp(argv[i], "--closefds")) {
            do_closefds = 1;
        } else if (!strcmp(argv[i], "--list-threads")) {
            /* The names of the process's threads as main starts (the library's, before any
             * of the program's), then on. */
            list_threads();
        } else if (!strcmp(argv[i], "--list-cpus")) {
            list_cpus(0);
        } else if (!strcmp(argv[i], "--list-cpus-once-started")) {
            list_cpus(1);
        } else if (!strcmp(argv[i], "--library-code")) {
            library_code();
        } else if (!strcmp(argv[i], "--end-now")) {
            exit(0);
        } else if (!strcmp(argv[i], "--clearenv")) {
            clearenv();
        } else if (!strcmp(argv[i], "--short-threads") && i + 1 < argc) {
            short_threads = atoi(argv[++i]);
        }
    }
    if (do_sigprof) {
        /* The program's own SIGPROF profiler: it must keep receiving its signals. */
        struct itimerval it;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigprof;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGPROF, &sa, 0);
        memset(&it, 0, sizeof it);
        it.it_interval.tv_usec = 10000;
        it.it_value.tv_usec = 10000;
        setitimer(ITIMER_PROF, &it, 0);
    }
    if (do_fork || do_exec) {
        pid_t child = fork();
        if (child == 0) {
            if (do_exec) {
                execl("/proc/self/exe", argv[0], "100", (char *)0);
                _exit(127);
            }
            work_f(10);
            exit(0);
        }
        {
            int st = 0;
            waitpid(child, &st, 0);
            printf("child %d status %d\n", (int)child, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        }
    }
    pthread_create(&t1, 0, thread1, 0);
    pthread_create(&t2, 0, thread2, 0);
    if (do_closefds) {
        /* A program that closes every descriptor it did not open (as daemons do), once the
         * profiler has found its threads, then opens files that reuse the numbers. Those must
         * stay open while the threads end and the profiler lets go of their timers. */
        usleep(50000);
        for (i = 3; i < 1024; i++) {
            close(i);
        }
        for (i = 0; i < 16; i++) {
            files[i] = open("/dev/null", O_RDONLY);
        }
    }
    work_a(40);
    for (i = 0; i < short_threads; i++) {
        pthread_t t;
        pthread_create(&t, 0, short_thread, 0);
        pthread_join(t, 0);
    }
    pthread_join(t1, 0);
    pthread_join(t2, 0);
    if (do_closefds) {
        int closed = 0;
        usleep(50000);
        for (i = 0; i < 16; i++) {
            closed += fcntl(files[i], F_GETFD) < 0;
        }
        printf("files closed by someone else %d\n", closed);
    }
    work_e(5);
    printf("cpu_ns %lld\n", rusage_cpu_ns());
    {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        printf("wall_ns %lld\n", (now.tv_sec - main_began.tv_sec) * 1000000000LL +
                                     (now.tv_nsec - main_began.tv_nsec));
    }
    if (do_sigprof) {
        printf("sigprof %ld\n", sigprof_count);
    }
    fflush(stdout);
    if (do_wait) {
        printf("ready\n");
        fflush(stdout);
        for (;;) {
            pause();
        }
    }
    if (exit_status >= 0) {
        leave(exit_status);
    }
    return 0;
}
