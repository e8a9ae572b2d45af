/*
 * The table of server/src/common/status.h as the adapters read it: for each
 * status, its name, the HTTP status http/reply.c answers and the gRPC code
 * grpc/convert.cc answers; then the status each library error gets. One line
 * each,
 *
 *   status <NAME> <HTTP status> <gRPC code number>
 *   library <SHMREG_ERR_NAME or SHMREG_OK> <NAME>
 *   limit <NAME>                     (NO_MEMORY with a configured limit's message)
 *   unknown <HTTP status> <gRPC code number> <NAME>  (a value of no row)
 *
 * for server/tests/core/test_status_table.py to compare with the table's
 * text and with Triton's answers. Not installed.
 */
#include <cstdio>
#include <cstring>

#include "common/status.h"
#include "grpc/convert.h"
#include "http/reply.h"

int main()
{
    for (int i = 0; i < STATUS_COUNT; i++) {
        auto st = static_cast<server_status>(i);
        std::printf("status %s %u %d\n", status_name(st), http_status_of(st),
                    static_cast<int>(grpc_service::grpc_code_of(st)));
    }
    /* Every library error, up to the first code the library does not name. */
    for (int e = SHMREG_OK;; e++) {
        auto err = static_cast<shmreg_err>(e);
        if (std::strcmp(shmreg_err_name(err), "SHMREG_ERR_UNKNOWN") == 0)
            break;
        std::printf("library %s %s\n", shmreg_err_name(err), status_name(status_from_shmreg(err, "")));
    }
    std::printf("limit %s\n",
                status_name(status_from_shmreg(SHMREG_ERR_NO_MEMORY,
                                               "registration would pass the limit of 4096 regions")));
    server_status none = STATUS_PRIVATE_WORD(1);
    const char *name = status_name(status_from_shmreg(static_cast<shmreg_err>(1000), ""));
    std::printf("unknown %u %d %s\n", http_status_of(none),
                static_cast<int>(grpc_service::grpc_code_of(none)), name);
    return 0;
}
