/* cleanup.h: _cleanup_ handlers for the libc resources (file descriptors, FILE, DIR).
 *
 * Apart from macro.h so that the pure core, which includes macro.h, sees no I/O calls. */
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "util/macro.h"

/* Hand a file descriptor to the caller: returns it and leaves -1 behind for _cleanup_close_. */
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _fd_ = (fd);                                                                           \
        (fd) = -1;                                                                                 \
        _fd_;                                                                                      \
    })

static inline void closep(int *fd) {
    if (*fd >= 0)
        (void)close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose)
#define _cleanup_fclose_ _cleanup_(fclosep)
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)
#define _cleanup_closedir_ _cleanup_(closedirp)
