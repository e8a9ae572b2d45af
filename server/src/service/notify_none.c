/* service/notify.h in a build without libsystemd: there is never a
 * manager, so nothing is stored and nothing restored (crash_survival.c
 * says so at start under one). */
#include "service/notify.h"

#include <stdlib.h>

int service_notify_built(void)
{
    return 0;
}

int service_notify(const char *state, const int *fds, size_t n)
{
    return 0;
}

int service_listen_fds(char ***names)
{
    *names = NULL;
    return 0;
}

void service_names_free(char **names)
{
    free(names);
}
