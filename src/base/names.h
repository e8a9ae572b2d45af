/* Validation of region names and shm keys: what any client may send. */
#ifndef SHMREG_NAMES_H
#define SHMREG_NAMES_H

#include <stddef.h>

#include "shmreg/shmreg.h"

#define SHMREG_NAME_MAX 255

/* A region name: 1..255 bytes, no control characters. */
shmreg_err shmreg__check_name(const char *name);

/* An owner tag: NULL (none), or 1..255 bytes without control characters. */
shmreg_err shmreg__check_tag(const char *tag);

/* Copy s into out (cap bytes, NUL-terminated, truncated with "...") with
 * control characters written as \xNN, so that a client's string quoted in a
 * message cannot forge log lines. Returns out. */
const char *shmreg__printable(const char *s, char *out, size_t cap);

/* The key as glibc resolves it: without its leading slashes. */
const char *shmreg__key_body(const char *key);

/* A POSIX shm key that glibc would accept and that does not start (after
 * leading slashes, on both sides) with one of the reserved prefixes.
 * region_name is used in the messages. */
shmreg_err shmreg__check_key(const char *region_name, const char *key,
                             const char *const *reserved_prefixes);

#endif
