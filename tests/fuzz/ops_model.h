/* A simple model of what a registry should hold, for the operations fuzzer:
 * which names are registered, pending or detached, with which owner tag, how
 * many references each region has, what the limits leave room for, and which
 * error code each call must return. It follows the public header's contract,
 * not the library's code; where several checks could fail at once it takes
 * the library's documented order (arguments, name taken, limits, then the
 * object: existence, owner, bounds, pinning). System regions only. */
#ifndef SHMREG_TESTS_OPS_MODEL_H
#define SHMREG_TESTS_OPS_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "shmreg/shmreg.h"

#define MODEL_MAX_REGIONS 128

enum model_state {
    MODEL_REGISTERED, /* listed, acquirable */
    MODEL_PENDING,    /* DEFER-unregistered while in use: listed, acquirable */
    MODEL_DETACHED,   /* DETACH-unregistered while in use: name free, mapped */
    MODEL_ORPHANED,   /* its registry was destroyed while it was in use */
    MODEL_GONE        /* unmapped */
};

struct model_region {
    char name[256];
    char tag[256];   /* owner tag ("" with tagged false: none) */
    bool tagged;
    unsigned registry; /* which registry (incarnation) it belongs to */
    char key[300];   /* as registered ("" for a descriptor region) */
    bool from_fd;    /* SHMREG_SOURCE_FD: a descriptor of the object, status key NULL */
    int object;      /* which of the harness's shm objects */
    size_t offset, size;
    unsigned flags;
    enum model_state state;
    unsigned refs; /* references held by the harness */
};

struct model {
    shmreg_policy policy;
    const char *const *reserved_prefixes;
    size_t max_regions, max_mapped_bytes; /* 0: unlimited */
    bool owner_accepted; /* the owner allow-list (if any) accepts the objects' owner */
    bool accept_unsealed_fds; /* the harness's objects are shm, never sealed */
    unsigned registry;   /* incarnation of the current registry */
    struct model_region regions[MODEL_MAX_REGIONS];
    size_t nregions;
};

/* What register_system is given; object is -1 for a key naming no object. */
struct model_register_args {
    const char *name, *key, *tag;
    int object;
    size_t object_size;
    size_t offset, size;
    unsigned flags;
    bool pin_usable; /* CUDA pinning works in this process */
    /* SHMREG_SOURCE_FD: the object is passed as a descriptor (object -1: a
     * negative descriptor) and key is not given. */
    bool via_fd;
};

/* What a registry is created with. */
struct model_config {
    shmreg_policy policy;
    const char *const *reserved_prefixes;
    size_t max_regions, max_mapped_bytes;
    bool owner_accepted;
    bool accept_unsealed_fds;
};

/* Forget every region (a new input). */
void model_reset(struct model *m);

/* A new registry replaces the current one (after model_destroy). */
void model_create(struct model *m, const struct model_config *cfg);

/* The registered or pending region called name with exactly this tag
 * (NULL: the untagged one), or NULL. */
struct model_region *model_find_exact(struct model *m, const char *name, const char *tag);

/* The registered or pending region a caller with this tag (NULL: untagged)
 * finds by name, or NULL: a tag is a namespace (ops_model.c). */
struct model_region *model_lookup(struct model *m, const char *name, const char *tag);

/* Each returns the code the call must return and applies its effect;
 * *out is the region concerned when the call succeeds. */
shmreg_err model_register(struct model *m, const struct model_register_args *a,
                          struct model_region **out);
/* A CUDA registration whose memory cannot be opened (no CUDA here, or a
 * handle no driver accepts): SHMREG_ERR_UNSUPPORTED stands for "the open
 * fails", after the arguments, the name and the limits have passed.
 * bad_source: a NULL or wrong-sized IPC handle, or a negative descriptor,
 * refused before the name and limits in every build. */
shmreg_err model_register_cuda(struct model *m, const char *name, size_t size, unsigned flags,
                               const char *tag, bool bad_source);
shmreg_err model_acquire(struct model *m, const char *name, size_t offset, size_t size,
                         struct model_region **out);
/* tag NULL: no restriction; otherwise only regions registered with it. */
shmreg_err model_unregister(struct model *m, const char *name, shmreg_kind kind, const char *tag);
shmreg_err model_unregister_all(struct model *m, shmreg_kind kind, const char *tag);
shmreg_err model_status(struct model *m, const char *name, shmreg_kind kind, const char *tag,
                        size_t *count);

/* Whether r passes the tag filter. */
bool model_tag_matches(const struct model_region *r, const char *tag);

/* A held reference taken (retain) or dropped (release). */
void model_retain(struct model_region *r);
void model_release(struct model_region *r);

/* The registry is destroyed: idle regions go, regions in use stay mapped
 * until their last release. */
void model_destroy(struct model *m);

/* Regions still mapped (every state but GONE). */
/* Regions of registry incarnation `registry` still mapped. */
size_t model_mapped_in(const struct model *m, unsigned registry);

size_t model_mapped(const struct model *m);

/* Whether the region is listed by status (registered or pending). */
bool model_listed(const struct model_region *r);

#endif
