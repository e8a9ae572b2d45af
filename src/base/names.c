/* Region names and shm keys come from clients; nothing reaches shm_open or
 * the table before passing these checks. */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/names.h"

static int has_control_char(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

shmreg_err shmreg__check_name(const char *name)
{
    if (!name)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "region name is NULL");
    /* strnlen: never read past the longest valid name and its terminator. */
    size_t len = strnlen(name, SHMREG_NAME_MAX + 1);
    if (len == 0 || len > SHMREG_NAME_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "invalid region name: it must be 1..%d bytes long, not %s%zu",
                            SHMREG_NAME_MAX, len > SHMREG_NAME_MAX ? "more than " : "",
                            len > SHMREG_NAME_MAX ? (size_t)SHMREG_NAME_MAX : len);
    /* Control characters would forge lines in logs and status listings. */
    if (has_control_char(name))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "invalid region name: it contains a control character");
    return SHMREG_OK;
}

shmreg_err shmreg__check_tag(const char *tag)
{
    if (!tag)
        return SHMREG_OK;
    shmreg_err err = shmreg__check_name(tag);
    if (err != SHMREG_OK)
        shmreg__error_prefix("invalid owner tag");
    return err;
}

const char *shmreg__printable(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 5 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    if (*s)
        snprintf(out + (o + 4 <= cap ? o : cap - 4), 4, "...");
    else
        out[o] = '\0';
    return out;
}

const char *shmreg__key_body(const char *key)
{
    return key + strspn(key, "/");
}

/* What glibc's shm_open refuses (it maps the body to /dev/shm/<body>):
 * empty, ".", "..", an inner slash, or a name too long for the file system. */
static int key_body_valid(const char *body)
{
    size_t len = strnlen(body, SHMREG_NAME_MAX);
    if (len == 0 || len >= SHMREG_NAME_MAX - 1)
        return 0;
    if (strcmp(body, ".") == 0 || strcmp(body, "..") == 0)
        return 0;
    return strchr(body, '/') == NULL && !has_control_char(body);
}

shmreg_err shmreg__check_key(const char *region_name, const char *key,
                             const char *const *reserved_prefixes)
{
    if (!key)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s' - shm key is NULL",
                            region_name);
    const char *body = shmreg__key_body(key);
    if (!key_body_valid(body)) {
        char shown[320];
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s' - invalid shm key '%s'", region_name,
                            shmreg__printable(key, shown, sizeof shown));
    }
    for (const char *const *p = reserved_prefixes; p && *p; p++) {
        const char *prefix = shmreg__key_body(*p);
        if (strncmp(body, prefix, strlen(prefix)) == 0)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "cannot register shared memory region '%s' with key '%s' as the "
                                "key contains the reserved prefix '%s'",
                                region_name, key, *p);
    }
    return SHMREG_OK;
}
