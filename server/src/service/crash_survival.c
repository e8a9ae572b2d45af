/* Crash survival (crash_survival.h): the start-up line, and the saver
 * started only under a manager. */
#include "service/crash_survival.h"

#include <stdio.h>
#include <stdlib.h>

#include "service/fd_store.h"
#include "service/notify.h"

struct crash_survival {
    fd_store *saver;
};

int crash_survival_start(const crash_survival_config *cfg, shmreg_registry *reg, crash_survival **out)
{
    *out = NULL;
    int managed = getenv("NOTIFY_SOCKET") != NULL;
    if (!service_notify_built()) {
        if (managed)
            fprintf(stderr, "crash survival: not compiled in (built without libsystemd): "
                            "no region survives a crash of this server\n");
        return 0;
    }
    fd_store_found found;
    if (fd_store_restore(reg, &found) != 0)
        return -1;
    crash_survival *c = managed ? calloc(1, sizeof *c) : NULL;
    if (c)
        c->saver = fd_store_start(reg, cfg->save_ms, cfg->verbose, &found);
    fd_store_found_free(&found);
    if (managed && (!c || !c->saver)) {
        if (!c)
            fprintf(stderr, "error: crash survival: out of memory\n");
        free(c);
        return -1;
    }
    if (c)
        fprintf(stderr, "crash survival: regions kept in the service manager's fd store, "
                        "saved at most every %u ms\n", cfg->save_ms);
    *out = c;
    return 0;
}

void crash_survival_ready(crash_survival *c)
{
    if (c)
        service_notify("READY=1", NULL, 0);
}

void crash_survival_stop(crash_survival *c, int clean)
{
    if (!c)
        return;
    if (clean)
        service_notify("STOPPING=1", NULL, 0);
    fd_store_stop(c->saver, clean);
    free(c);
}
