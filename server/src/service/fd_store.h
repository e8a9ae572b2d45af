/* The registry kept in the service manager's fd store (fd_names.h says
 * under which names), and taken back from it at start.
 *
 * fd_store_restore runs once, before any adapter: it takes the
 * descriptors the manager passed, restores the newest complete state into
 * the registry, and says what it found. fd_store_start then runs the
 * saver: a thread that reads the registry's counters every interval and,
 * when they moved, saves the state and replaces the stored set with it
 * (new regions' descriptors, the new state, then the old state and the
 * descriptors no longer used removed). A crash loses at most the changes
 * of the last interval and of the save under way: the previous state
 * stays stored until the new one is. */
#ifndef SERVER_SERVICE_FD_STORE_H
#define SERVER_SERVICE_FD_STORE_H

#include <shmreg/shmreg.h>

#include "service/fd_names.h"

/* What the start found still stored: the generation of the state restored
 * (0: none), the regions' descriptors' names (sorted), which stay while
 * in use, and every other name of ours, removed once a new state is
 * stored. */
typedef struct fd_store_found {
    unsigned long long gen;
    fd_name_list regions;
    fd_name_list stale;
} fd_store_found;

/* Restore reg from the manager's descriptors, if it passed any, with one
 * line on stderr for the count restored, failed and skipped and one for
 * each region not restored; every descriptor passed is closed. A state
 * that cannot be read restores nothing and is only reported. Fills *found
 * (free with fd_store_found_free); -1 only when out of memory. */
int fd_store_restore(shmreg_registry *reg, fd_store_found *found);
void fd_store_found_free(fd_store_found *found);

typedef struct fd_store fd_store;

/* Start the saver over reg, at most one save every interval_ms (verbose: a
 * line for each state stored); it takes found's lists (left empty). NULL
 * after a message on stderr. */
fd_store *fd_store_start(shmreg_registry *reg, unsigned interval_ms, int verbose, fd_store_found *found);
/* Stop the saver (NULL: no-op). clear: remove everything stored, so that
 * a clean stop is not restored by the next start. */
void fd_store_stop(fd_store *s, int clear);

#endif
