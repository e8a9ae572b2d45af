/* service/notify.h through libsystemd (sd-daemon.h). */
#include "service/notify.h"

#include <errno.h>
#include <stdlib.h>

#include <systemd/sd-daemon.h>

int service_notify_built(void)
{
    return 1;
}

int service_notify(const char *state, const int *fds, size_t n)
{
    if (n > SERVICE_FDS_PER_MESSAGE)
        return -EINVAL;
    /* pid 0: this process, as the main process the manager watches. */
    return n ? sd_pid_notify_with_fds(0, 0, state, fds, (unsigned)n) : sd_notify(0, state);
}

int service_listen_fds(char ***names)
{
    *names = NULL;
    /* 1: unset the variables, so that nothing started later takes them. */
    int n = sd_listen_fds_with_names(1, names);
    if (n <= 0) {
        service_names_free(*names);
        *names = NULL;
    }
    return n;
}

void service_names_free(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}
