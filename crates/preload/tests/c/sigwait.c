/* Signals a program blocks, against a preloaded libtickscope (tests/preload.rs). It blocks
 * SIGTERM (SIGRTMIN+1 with `rt`; threads it starts would inherit the mask), burns 100 ms
 * of CPU time so that the library's threads have started (a thread in creation has every
 * signal blocked until it runs: a signal sent at once could wait for the program's own
 * taker), and sends that signal to itself. Then:
 *
 *   sigwait, rt    takes it with sigtimedwait, as servers that wait for signals in one
 *                  place do: exits 0 once taken, 4 if it did not come within 10 s. A thread
 *                  of the library's that did not block SIGTERM would get it instead, and
 *                  the process would die of it.
 *   ppoll          lets it in only during a ppoll (a handler runs there, then the mask is
 *                  back), then sleeps 10 s and exits 0. With the library's SIGTERM handler
 *                  (TICKSCOPE_CPUPROFILE_SIGNALS=1), the process must die of SIGTERM, the
 *                  profile written, although every program thread blocks it by then.
 *   default        blocks nothing: asks for SIGINT's and SIGTERM's default action (signal,
 *                  sigaction), checks that it is what it is shown (exits 6 or 7 if not),
 *                  and in a fork child too (8); installs a SIGINT handler of its own
 *                  (sysv_signal: one-shot, which the library passes on as glibc would)
 *                  and raises SIGINT: the handler must run and the program go on
 *                  (9). Then it burns 100 ms and sends itself SIGTERM by the system call,
 *                  as another process would (not through kill(), which the library
 *                  interposes). It must die of it, and with TICKSCOPE_CPUPROFILE_SIGNALS=1
 *                  the profile must be written first, as dash's is when it is sent SIGTERM.
 *   default-old    the same, asking for the defaults by the older calls instead: System V's
 *                  sigset and sysv_signal (`__sysv_signal`: what `signal` is in a program
 *                  built with -std=c99), and bsd_signal.
 *
 * Build: gcc -O2. */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "burn.h"

/* BSD's name for signal: declared by glibc's <signal.h> only for old X/Open levels. */
extern __sighandler_t bsd_signal(int, __sighandler_t);

static volatile sig_atomic_t took_int;

static void on_int(int sig)
{
    (void)sig;
    took_int = 1;
}

int main(int argc, char **argv)
{
    sigset_t set, during;
    siginfo_t info;
    struct timespec wait = {10, 0};
    int rt = argc > 1 && strcmp(argv[1], "rt") == 0;
    int sig = rt ? SIGRTMIN + 1 : SIGTERM;
    int old_calls = argc > 1 && strcmp(argv[1], "default-old") == 0;
    if (argc > 1 && (strcmp(argv[1], "default") == 0 || old_calls)) {
        struct sigaction dfl, old;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        if (old_calls) {
            if (sigset(SIGTERM, SIG_DFL) == SIG_ERR || __sysv_signal(SIGINT, SIG_DFL) == SIG_ERR
                || bsd_signal(SIGINT, SIG_DFL) == SIG_ERR)
                return 5;
            if (sigset(SIGTERM, SIG_DFL) != SIG_DFL || sysv_signal(SIGTERM, SIG_DFL) != SIG_DFL)
                return 6;
            if (__sysv_signal(SIGINT, SIG_DFL) != SIG_DFL)
                return 7;
        } else {
            if (sigaction(SIGTERM, &dfl, NULL) != 0 || signal(SIGINT, SIG_DFL) == SIG_ERR)
                return 5;
            if (sigaction(SIGTERM, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
                return 6;
            if (signal(SIGINT, SIG_DFL) != SIG_DFL)
                return 7;
        }
        pid_t child = fork();
        if (child == 0)
            _exit(sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler == SIG_DFL ? 0 : 8);
        int status;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
            return 5;
        if (WEXITSTATUS(status) != 0)
            return WEXITSTATUS(status);
        sysv_signal(SIGINT, on_int);
        raise(SIGINT);
        if (!took_int)
            return 9;
        burn(100000000LL);
        syscall(SYS_kill, getpid(), SIGTERM);
        sleep(10);
        return 0;
    }
    sigemptyset(&set);
    sigaddset(&set, sig);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return 5;
    burn(100000000LL);
    kill(getpid(), sig);
    if (argc > 1 && strcmp(argv[1], "ppoll") == 0) {
        sigemptyset(&during);
        ppoll(NULL, 0, &wait, &during);
        sleep(10);
        return 0;
    }
    if (sigtimedwait(&set, &info, &wait) != sig)
        return 4;
    printf("took %d\n", info.si_signo);
    return 0;
}
