/*
 * Bytes held at once, all connections of a protocol together, against a cap
 * (--max-buffered-mb; main.c gives each protocol its own): HTTP charges a
 * request body as it arrives, gRPC a ModelInfer message when it is handed
 * over, and both give the bytes back when the request is done. Without it, many requests each under
 * --max-body-mb would together take all the memory there is. Thread-safe;
 * callable from C and C++ (the count is C11 atomics inside byte_budget.c).
 */
#ifndef SERVER_BYTE_BUDGET_H
#define SERVER_BYTE_BUDGET_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct byte_budget byte_budget;

/* A budget of cap bytes, none used; NULL when out of memory. */
byte_budget *byte_budget_new(size_t cap);
/* NULL is a no-op. */
void byte_budget_free(byte_budget *b);
/* Charge len bytes: 1, or 0 (nothing charged) when they would pass the cap. */
int byte_budget_take(byte_budget *b, size_t len);
/* Give back len bytes charged earlier. */
void byte_budget_give(byte_budget *b, size_t len);
/* Whether len more bytes would fit now (a hint: others race). */
int byte_budget_fits(const byte_budget *b, size_t len);
size_t byte_budget_cap(const byte_budget *b);

#ifdef __cplusplus
}
#endif

#endif
