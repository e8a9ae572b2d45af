/* The registry's settings for its remote regions, which only the remote
 * backend reads (remote/backend.c). A registry holds one
 * (core/registry.h) and hands it to the backend with each remote
 * registration (shmreg__open_args.source_settings, backends/backend.h),
 * so that the arguments every backend gets carry nothing of one source. */
#ifndef SHMREG_REMOTE_SETTINGS_H
#define SHMREG_REMOTE_SETTINGS_H

#include "shmreg/shmreg.h"

struct shmreg__remote_settings {
    /* The registry itself: with a registration's tag, the tenant the region
     * belongs to (shmreg_remote_invite). */
    shmreg_registry *registry;
    unsigned timeout_ms; /* one copy's bound (shmreg_config.remote_timeout_ms) */
};

#endif
