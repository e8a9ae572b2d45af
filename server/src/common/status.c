/* The server's statuses and the library's errors among them (status.h). */
#include "common/status.h"

#include <stddef.h>
#include <string.h>

_Static_assert(STATUS_OK == 0, "`if (st)` asks whether st failed: OK must be 0");
_Static_assert(STATUS_COUNT <= STATUS_PRIVATE, "the table's rows must stay below the private words");

/* The table's row of e. */
static server_status library_row(shmreg_err e)
{
    switch (e) {
    case SHMREG_OK: return STATUS_OK;
#define STATUS_LIBRARY_CASE(name, http, grpc) \
    case SHMREG_ERR_##name: return STATUS_##name;
        STATUS_LIBRARY_MAP(STATUS_LIBRARY_CASE)
#undef STATUS_LIBRARY_CASE
    }
    return STATUS_INTERNAL;
}

server_status status_from_shmreg(shmreg_err e, const char *message)
{
    /* The library says "limit of" only when a configured limit refused. */
    if (e == SHMREG_ERR_NO_MEMORY && message && strstr(message, "limit of"))
        return STATUS_OVER_LIMIT;
    return library_row(e);
}

const char *status_name(server_status st)
{
    switch (st) {
#define STATUS_NAME_CASE(name, http, grpc) \
    case STATUS_##name: return #name;
        STATUS_MAP(STATUS_NAME_CASE)
#undef STATUS_NAME_CASE
    default: return NULL;
    }
}
