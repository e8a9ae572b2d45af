/*
 * Which regions a request may see: with --tenants, only its tenant's.
 *
 * Each tenant has its own namespace: the library's owner tag (a tag
 * is a namespace, shmreg.h). Every registration carries the tenant as
 * its tag, and every lookup, listing and unregister filters by it, with the
 * client's own names: nothing is prefixed, and the library's messages are
 * passed on as they are. Two tenants may hold the same name without knowing
 * of each other, so another tenant's region answers exactly like an absent
 * one, registering its name included (no "already in manager" oracle).
 *
 * Without --tenants the scope is the whole registry, and these calls are
 * the plain ones (no tag), so the server behaves as before.
 */
#ifndef SERVER_REGION_SCOPE_H
#define SERVER_REGION_SCOPE_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct region_scope {
    int per_tenant;     /* --tenants was given */
    const char *tenant; /* the caller's tenant (the tenants table's string);
                           NULL with per_tenant: no known token, refused */
    size_t tenant_no;   /* with tenant: its number (tenants_find) */
} region_scope;

/* The refusal of a request that names regions without a known token
 * (STATUS_UNAUTHENTICATED). */
#define SCOPE_NO_TOKEN_MESSAGE                                                              \
    "this server keeps shared memory per tenant: send a known token as "                   \
    "'Authorization: Bearer <token>'"

/* 1 when s must be refused (per tenant, and no known token). */
int scope_refused(const region_scope *s);

/* The book of the models' statistics (models.h) that counts s's requests
 * and that s may read: its tenant's own, so that no tenant learns another's
 * counts or timings; 0, the server's, without --tenants (and, under it, for
 * requests with no known token, whose book no caller may read). */
size_t scope_stats_book(const region_scope *s);

/* The calls the endpoints make, within s. Each returns the library's code,
 * with its message in shmreg_last_error(). */
shmreg_err scope_register(shmreg_registry *reg, const region_scope *s, shmreg_registration *r);
shmreg_err scope_acquire(shmreg_registry *reg, const region_scope *s, const char *name,
                         size_t offset, size_t byte_size, shmreg_region **out, shmreg_view *view);
/* shmreg_register_system and shmreg_register_cuda_ipc (no flags), within s. */
shmreg_err scope_register_system(shmreg_registry *reg, const region_scope *s, const char *name,
                                 const char *key, size_t offset, size_t byte_size);
shmreg_err scope_register_cuda_ipc(shmreg_registry *reg, const region_scope *s, const char *name,
                                   const void *handle, size_t handle_size, int device_id,
                                   size_t byte_size);
/* shmreg_remote_invite for s's tenant: the secret lets in one remote
 * client connection, whose windows only registrations within s may name. */
shmreg_err scope_remote_invite(shmreg_registry *reg, const region_scope *s,
                               unsigned char secret[SHMREG_REMOTE_SECRET_SIZE]);
/* name NULL: every region of kind in s. */
shmreg_err scope_status(shmreg_registry *reg, const region_scope *s, const char *name,
                        shmreg_kind kind, shmreg_region_status **out, size_t *count);
shmreg_err scope_unregister(shmreg_registry *reg, const region_scope *s, const char *name,
                            shmreg_kind kind);

#ifdef __cplusplus
}
#endif

#endif
