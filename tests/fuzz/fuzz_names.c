/* libFuzzer harness: region-name and shm-key validation (src/base/names.h) against
 * an independent statement of the rules (shm_rules.c), and against glibc.
 *
 * The input is split at NUL bytes into a region name, a shm key and up to
 * four reserved prefixes. The rules:
 *  - a name is 1..255 bytes with no control character (0x00-0x1f, 0x7f);
 *  - a key is resolved as glibc resolves it: leading slashes are ignored; what
 *    remains (the body) must be non-empty, not "." or "..", without '/' or a
 *    control character, and short enough for glibc (body + NUL < NAME_MAX);
 *  - a key is reserved when its body starts with a prefix's body (the prefix
 *    without its own leading slashes), so "//triton_x" cannot dodge
 *    "triton_" nor "triton_x" dodge "/triton_".
 * glibc is the second oracle: a key the library accepts must never be one
 * that shm_open refuses as invalid (EINVAL or ENAMETOOLONG). A refusal's
 * message must not carry the input's control characters into a log. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/names.h"
#include "shm_rules.h"

#define MAX_PREFIXES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* glibc's own verdict on the key's name (the object need not exist). */
static bool glibc_refuses(const char *key)
{
    int fd = shm_open(key, O_RDONLY, 0);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == EINVAL || errno == ENAMETOOLONG;
}

static void expect(bool ok, shmreg_err got, const char *what, const char *input)
{
    shmreg_err want = ok ? SHMREG_OK : SHMREG_ERR_INVALID_ARG;
    if (got == SHMREG_ERR_INVALID_ARG && !rule_text_loggable(shmreg_last_error())) {
        fprintf(stderr, "%s: the message carries a control character from the input: \"%s\"\n",
                what, shmreg_last_error());
        abort();
    }
    if (got == want && (ok || shmreg_last_error()[0] != '\0'))
        return;
    fprintf(stderr, "%s of \"%.300s\": got %s (%s), the rules say %s\n", what, input,
            shmreg_err_name(got), shmreg_last_error(), shmreg_err_name(want));
    abort();
}

/* Split data at NULs into at most n strings; missing ones are "". */
static size_t split(const uint8_t *data, size_t size, char *buf, char **parts, size_t n)
{
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t count = 0, at = 0;
    while (count < n && at <= size) {
        parts[count++] = buf + at;
        at += strlen(buf + at) + 1;
    }
    for (size_t i = count; i < n; i++)
        parts[i] = buf + size;
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char buf[4097];
    char *parts[2 + MAX_PREFIXES];
    size_t got = split(data, size, buf, parts, 2 + MAX_PREFIXES);
    const char *name = parts[0], *key = parts[1];
    /* Only the prefixes the input spelt out; a prefix that is empty once its
     * slashes go reserves everything, as the rule says (create refuses it). */
    const char *prefixes[MAX_PREFIXES + 1] = {NULL};
    for (size_t i = 2; i < got; i++)
        prefixes[i - 2] = parts[i];

    expect(rule_name_valid(name), shmreg__check_name(name), "check_name", name);

    if (shmreg__key_body(key) != rule_body(key)) {
        fprintf(stderr, "key_body of \"%.300s\" skips %td bytes, not %td\n", key,
                shmreg__key_body(key) - key, rule_body(key) - key);
        abort();
    }
    bool key_ok = rule_key_valid(key) && !rule_key_reserved(key, prefixes);
    shmreg_err err = shmreg__check_key("fuzz", key, prefixes);
    expect(key_ok, err, "check_key", key);
    if (err == SHMREG_OK && glibc_refuses(key)) {
        fprintf(stderr, "check_key accepts \"%.300s\", which glibc's shm_open refuses\n", key);
        abort();
    }
    return 0;
}
