/* The registry handle: what shmreg_registry_create makes and
 * shmreg_registry_destroy frees. It holds the configuration the API verbs
 * apply (busy policy, pinning, key and owner rules) and one reference to the
 * table (table.h), which outlives it for regions still referenced. */
#ifndef SHMREG_REGISTRY_H
#define SHMREG_REGISTRY_H

#include <stdbool.h>

#include "core/table.h"
#include "remote/settings.h"

struct shmreg_registry {
    struct shmreg__table *table;
    shmreg_policy busy_policy;
    shmreg_pin_policy pin_policy;
    char **reserved_prefixes; /* owned, NULL-terminated, or NULL */
    uid_t *allowed_uids;      /* owned, or NULL */
    size_t allowed_uid_count;
    bool accept_unsealed_fds; /* 1.1: SHMREG_SOURCE_FD without F_SEAL_SHRINK */
    struct shmreg__remote_settings remote; /* 1.2: read by the remote backend only */
};

/* ---- shared by the API verbs (register.c, unregister.c, status.c) */

bool shmreg__kind_valid(shmreg_kind kind);
/* The registry's settings for source, which only that source's backend
 * reads (shmreg__open_args.source_settings); NULL for a source without. */
const void *shmreg__source_settings(const shmreg_registry *reg, shmreg_source source);
const char *shmreg__kind_word(shmreg_kind kind); /* "system ", "cuda ", "remote " or "" for ANY */

/* A filter's fields checked (kind in range, tag and name valid when given);
 * f NULL is every region. Fills *out with f's values or the defaults. */
shmreg_err shmreg__filter_check(const shmreg_filter *f, shmreg_filter *out);

struct shmreg_region;
struct shmreg__object_id;

/* shmreg_register for a restore (handover/): the same checks, and a shm key
 * must still be the object `expect` names (NULL: any object). */
shmreg_err shmreg__register_restoring(shmreg_registry *reg, const shmreg_registration *r,
                                      const struct shmreg__object_id *expect);

/* Under the table's lock: the live region called name that passes kind and
 * tag, or NOT_FOUND (absent, or another tag's) or WRONG_KIND, each with its
 * message. */
shmreg_err shmreg__lookup_locked(struct shmreg__table *t, const char *name, shmreg_kind kind, const char *tag,
                                 struct shmreg_region **out);

#endif
