/* The request body bytes the HTTP server holds, all connections together,
 * and the most it may (--max-buffered-mb): without it, many unfinished
 * uploads each under --max-body-mb would together take all the memory there
 * is. request.c charges and refunds it; C only (stdatomic.h). */
#ifndef FRONTEND_BODY_BUDGET_H
#define FRONTEND_BODY_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>

struct body_budget {
    atomic_size_t used;
    size_t cap;
};

#endif
