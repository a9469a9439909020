/* Standard descriptors against a preloaded libtickscope (tests/preload.rs).
 *
 *   fds closed FILE   started with descriptors 0-2 closed: opens FILE three times and
 *                     exits 0 if it got 0, 1 and 2 (the library took none), else 10 + the
 *                     first descriptor it got instead
 *   fds reopen FILE   closes descriptor 2 and opens FILE there, as a program that sends its
 *                     own errors to a log does
 *
 * Either then spins for 200 ms of CPU time and returns from main (the library writes its
 * profile, and says so, at exit). Build: gcc -O2. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "burn.h"

int main(int argc, char **argv)
{
    int i;
    if (argc != 3)
        return 2;
    if (strcmp(argv[1], "closed") == 0) {
        for (i = 0; i < 3; i++) {
            int fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0644);
            if (fd != i)
                return 10 + fd;
        }
    } else if (strcmp(argv[1], "reopen") == 0) {
        close(2);
        if (open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0644) != 2)
            return 3;
    } else {
        return 2;
    }
    burn(200000000LL);
    return 0;
}
