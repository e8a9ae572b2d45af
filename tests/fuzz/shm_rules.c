/* See shm_rules.h; written from the specification (the public header and
 * glibc's shm_open), not from src/base/names.c. */
#include "shm_rules.h"

#include <string.h>

#define GLIBC_NAME_MAX 255

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

bool rule_name_valid(const char *name)
{
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++, len++)
        if (is_control(*p))
            return false;
    return len >= 1 && len <= 255;
}

const char *rule_body(const char *key)
{
    while (*key == '/')
        key++;
    return key;
}

bool rule_key_valid(const char *key)
{
    const char *body = rule_body(key);
    size_t len = strlen(body);
    if (len == 0 || len + 1 >= GLIBC_NAME_MAX)
        return false;
    if (!strcmp(body, ".") || !strcmp(body, ".."))
        return false;
    for (size_t i = 0; i < len; i++)
        if (body[i] == '/' || is_control((unsigned char)body[i]))
            return false;
    return true;
}

bool rule_text_loggable(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (is_control(*p))
            return false;
    return true;
}

bool rule_key_reserved(const char *key, const char *const *prefixes)
{
    const char *body = rule_body(key);
    for (size_t i = 0; prefixes && prefixes[i]; i++) {
        const char *want = rule_body(prefixes[i]);
        size_t n = strlen(want);
        if (strlen(body) >= n && memcmp(body, want, n) == 0)
            return true;
    }
    return false;
}
