/* What the limits count: the registry's usage against its limits (table.h)
 * and each owner tag's against its quota (quota.h). */
#ifndef SHMREG_USAGE_H
#define SHMREG_USAGE_H

#include <stddef.h>

struct shmreg__usage {
    size_t regions;
    size_t mapped_bytes;
    size_t pinned_bytes;
};

#endif
