/*
 * The GPU model's placement rule (src/models/placement.h) on one case given
 * on the command line, for server/tests/core/test_placement_decision.py:
 *
 *   shmreg-server-placement-test TENSORS INSTANCES START SLOTS
 *
 * TENSORS: the request's tensors' devices, comma-separated, "host" for one
 * not in a CUDA region ("" for none); INSTANCES: DEVICE:LOAD of each
 * instance in order, comma-separated; START: where the round robin begins;
 * SLOTS: the run slots of each instance. Prints "<instance index> <case>";
 * exit 2 on arguments it cannot read.
 * Not installed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/placement.h"

#define MOST 64

typedef struct instance {
    int device;
    unsigned load;
} instance;

static int device_of(const void *ctx, unsigned i)
{
    return ((const instance *)ctx)[i].device;
}

static unsigned load_of(const void *ctx, unsigned i)
{
    return ((const instance *)ctx)[i].load;
}

/* A whole decimal number at *s, which ends at one of the characters in
 * stop; moves *s past it. 0, or -1 where there is none. */
static int number(const char **s, const char *stop, long *v)
{
    char *end;
    errno = 0;
    *v = strtol(*s, &end, 10);
    if (end == *s || errno || !strchr(stop, *end))
        return -1;
    *s = end;
    return 0;
}

static int read_tensors(const char *s, int *devices, unsigned *n)
{
    *n = 0;
    while (*s) {
        long d = PLACEMENT_HOST;
        if (*n == MOST)
            return -1;
        if (!strncmp(s, "host", 4) && (s[4] == ',' || !s[4]))
            s += 4;
        else if (number(&s, ",", &d) != 0 || d < 0)
            return -1;
        devices[(*n)++] = (int)d;
        if (*s == ',')
            s++;
    }
    return 0;
}

static int read_instances(const char *s, instance *inst, unsigned *n)
{
    *n = 0;
    while (*s) {
        long d, load;
        if (*n == MOST || number(&s, ":", &d) != 0 || d < 0 || *s++ != ':')
            return -1;
        if (number(&s, ",", &load) != 0 || load < 0)
            return -1;
        inst[(*n)++] = (instance){(int)d, (unsigned)load};
        if (*s == ',')
            s++;
    }
    return *n ? 0 : -1;
}

int main(int argc, char **argv)
{
    int devices[MOST];
    instance inst[MOST];
    unsigned n_tensors, n_inst;
    const char *start_arg = argc == 5 ? argv[3] : "", *slots_arg = argc == 5 ? argv[4] : "";
    long start, slots;
    if (argc != 5 || read_tensors(argv[1], devices, &n_tensors) != 0 ||
        read_instances(argv[2], inst, &n_inst) != 0 || number(&start_arg, "", &start) != 0 ||
        start < 0 || number(&slots_arg, "", &slots) != 0 || slots < 0) {
        fprintf(stderr, "usage: %s TENSORS INSTANCES START SLOTS (see the source)\n", argv[0]);
        return 2;
    }
    placement_instances in = {.n = n_inst, .slots = (unsigned)slots, .device = device_of,
                              .load = load_of, .ctx = inst};
    placement_case why;
    unsigned i = placement_choose(devices, n_tensors, &in, (unsigned)start, &why);
    printf("%u %s\n", i, placement_case_name(why));
    return 0;
}
