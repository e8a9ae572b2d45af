/* A byte budget shared by every protocol (byte_budget.h). */
#include "common/byte_budget.h"

#include <stdatomic.h>
#include <stdlib.h>

struct byte_budget {
    atomic_size_t used;
    size_t cap;
};

byte_budget *byte_budget_new(size_t cap)
{
    byte_budget *b = malloc(sizeof *b);
    if (b) {
        atomic_init(&b->used, 0);
        b->cap = cap;
    }
    return b;
}

void byte_budget_free(byte_budget *b)
{
    free(b);
}

int byte_budget_take(byte_budget *b, size_t len)
{
    /* relaxed: the count orders no other memory; it only bounds it */
    size_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    do {
        if (len > b->cap - used)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&b->used, &used, used + len,
                                                    memory_order_relaxed, memory_order_relaxed));
    return 1;
}

void byte_budget_give(byte_budget *b, size_t len)
{
    atomic_fetch_sub_explicit(&b->used, len, memory_order_relaxed);
}

int byte_budget_fits(const byte_budget *b, size_t len)
{
    return len <= b->cap - atomic_load_explicit(&b->used, memory_order_relaxed);
}

size_t byte_budget_cap(const byte_budget *b)
{
    return b->cap;
}
