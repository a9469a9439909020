/* Reaping children against a preloaded libtickscope (tests/preload.rs): the library's
 * wait4, waitpid, wait and wait3 must behave as libc's.
 *
 * Sleeps 200 ms (a sampler whose start waits has started by then), then forks four
 * children, each spinning for 5 ms of CPU time then exiting with 11, 12, 13 and 14, and
 * reaps them in turn with wait4 (status and rusage asked for), waitpid (no status
 * asked for), wait, and wait3 (rusage asked for); then asks once more (ECHILD). The last
 * child starts its work only once `wait` has returned (a byte on a pipe), so that `wait`,
 * which takes any child, takes the third: on a loaded machine the fourth ended first. Prints a
 * line per child, `reaped PID by CALL status S cpu-us U` (S: its exit status, -1 where
 * none was asked for; U: the CPU time wait4 or wait3 gave, -1 for the others), and
 * `echild 1` if the last call failed with ECHILD. Build: gcc -O2. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "burn.h"

static long us(struct rusage *r)
{
    return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1000000L + r->ru_utime.tv_usec +
           r->ru_stime.tv_usec;
}

int main(void)
{
    pid_t pids[4];
    int i, st, go[2];
    char c = 0;
    struct rusage ru;
    usleep(200000);
    if (pipe(go) != 0)
        return 2;
    for (i = 0; i < 4; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            return 2;
        if (pids[i] == 0) {
            if (i == 3 && read(go[0], &c, 1) != 1)
                exit(2);
            burn(5000000);
            exit(11 + i);
        }
    }
    pid_t p = wait4(pids[0], &st, 0, &ru);
    printf("reaped %d by wait4 status %d cpu-us %ld\n", p, WEXITSTATUS(st), us(&ru));
    p = waitpid(pids[1], NULL, 0);
    printf("reaped %d by waitpid status -1 cpu-us -1\n", p);
    p = wait(&st);
    printf("reaped %d by wait status %d cpu-us -1\n", p, WEXITSTATUS(st));
    if (write(go[1], &c, 1) != 1)
        return 2;
    p = wait3(&st, 0, &ru);
    printf("reaped %d by wait3 status %d cpu-us %ld\n", p, WEXITSTATUS(st), us(&ru));
    if (wait(NULL) == -1 && errno == ECHILD)
        printf("echild 1\n");
    return 0;
}
