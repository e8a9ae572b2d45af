/* The references a request holds: a growable array, released in one place. */
#include "core/refs.h"

#include <stdlib.h>

int refs_hold(refs *r, shmreg_region *ref)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4;
        shmreg_region **grown = realloc(r->held, cap * sizeof *grown);
        if (!grown) {
            shmreg_release(ref);
            return -1;
        }
        r->held = grown;
        r->cap = cap;
    }
    r->held[r->n++] = ref; /* the request owns this reference now */
    return 0;
}

void refs_release_all(refs *r)
{
    /* The response is on the wire (or the call is gone): nothing reads or
     * writes these regions for this request any more. */
    for (size_t i = 0; i < r->n; i++)
        shmreg_release(r->held[i]);
    free(r->held);
    *r = (refs){0};
}
