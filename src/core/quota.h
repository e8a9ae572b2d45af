/* Quotas per owner tag (1.2): what the regions of each tag hold, against
 * that tag's limits, beside the registry's global limits (table.h).
 *
 * A tag is a tenant's namespace. The global limits alone let one
 * tenant fill the registry and make every other tenant's registration
 * fail; a quota per tag, with the global limits sized to hold every
 * tenant's quota, cannot. A tag's account counts a region from its
 * reservation until its teardown (the deleter's retire), so a pending or
 * detached region still counts, as it does globally; a cached mapping
 * counts against no tag (it belongs to nobody until reused). Untagged
 * regions are counted only globally.
 *
 * Everything here is under the table's lock: the table (table.h) embeds
 * the quotas, and each call takes them alone. Accounts live in a short list:
 * a registry has as many as tags with regions or an explicit quota, and the
 * list is walked only by register and by a region's teardown, never by
 * acquire. */
#ifndef SHMREG_QUOTA_H
#define SHMREG_QUOTA_H

#include <stdbool.h>
#include <stddef.h>

#include "core/usage.h"
#include "shmreg/shmreg.h"

struct shmreg__tag_account;

struct shmreg__quotas {
    struct shmreg__tag_account *accounts;
    size_t default_regions, default_mapped_bytes, default_pinned_bytes; /* 0 = unlimited */
};

/* Free every account (the table is being freed). */
void shmreg__quotas_fini(struct shmreg__quotas *q);

/* Take `want` against tag's quota, or fail with NO_MEMORY naming the limit,
 * the region `name` and the tag's own usage only, and take nothing. tag
 * NULL: nothing to take, OK. NO_MEMORY too when the account cannot be
 * allocated. */
shmreg_err shmreg__quota_take_locked(struct shmreg__quotas *q, const char *tag, const char *name,
                                     const struct shmreg__usage *want);

/* shmreg__quota_take_locked's check alone: nothing taken, nothing allocated. */
shmreg_err shmreg__quota_check_locked(struct shmreg__quotas *q, const char *tag, const char *name,
                                      const struct shmreg__usage *want);

/* Give back what shmreg__quota_take_locked took (tag NULL: nothing). */
void shmreg__quota_give_back_locked(struct shmreg__quotas *q, const char *tag, const struct shmreg__usage *u);

/* Whether `bytes` more pinned bytes fit tag's pinned quota (AUTO pinning
 * drops an optional pin that does not, as it does past its budget). */
bool shmreg__quota_pin_fits_locked(struct shmreg__quotas *q, const char *tag, size_t bytes);

/* Set tag's limits (lim NULL: back to the default share). */
shmreg_err shmreg__quota_set_locked(struct shmreg__quotas *q, const char *tag, const shmreg_quota *lim);

/* tag's usage and the limits in force for it. */
void shmreg__quota_stats_locked(struct shmreg__quotas *q, const char *tag, shmreg_tag_stats *out);

#endif
