/*
 * --tenants FILE: bearer tokens -> tenant names.
 *
 * The file (README, "Tenants") has one token per line, "TOKEN TENANT", then
 * optionally the tenant's own quota as max-regions=N, max-mapped-bytes=N,
 * max-pinned-bytes=N (else it gets the default share), with '#'
 * comment lines and blank lines. A tenant may have several tokens; its
 * lines then give the same quota. It holds secrets, so it must be a
 * regular file that other users can neither read nor write; anything wrong
 * with it stops the server at start-up with the file, the line and the
 * reason.
 */
#ifndef SERVER_TENANTS_H
#define SERVER_TENANTS_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tenants tenants; /* opaque */

/* Longest tenant name (the library's owner tag allows 255). */
#define TENANT_NAME_MAX 64

/* Load and check path. NULL after printing the reason on stderr. */
tenants *tenants_load(const char *path);
/* Wipe the tokens and free t. NULL is a no-op. */
void tenants_free(tenants *t);

/* The tenant whose token is token[0, len), or NULL; *no (when no is not
 * NULL) its number, below tenants_count, the same for each of its tokens.
 * Every token of the file is compared, each in time that depends on its own
 * length only, so the answer's timing says nothing of how much of a guess
 * was right. */
const char *tenants_find(const tenants *t, const char *token, size_t len, size_t *no);
/* How many tenants (not tokens) the file names; 0 for NULL. */
size_t tenants_count(const tenants *t);

/* Which fields of its quota a tenant's lines give. */
#define TENANT_QUOTA_REGIONS 0x1
#define TENANT_QUOTA_MAPPED 0x2
#define TENANT_QUOTA_PINNED 0x4

/* Call fn once per tenant (not per token), with the TENANT_QUOTA_* bits its
 * lines give and those values (the others 0). */
void tenants_each(const tenants *t,
                  void (*fn)(void *ctx, const char *tenant, int given, const shmreg_quota *own), void *ctx);

/* want[0, want_len) == given[0, given_len), in time that depends on
 * want_len only. */
int tokens_equal(const char *want, size_t want_len, const char *given, size_t given_len);

#ifdef __cplusplus
}
#endif

#endif
