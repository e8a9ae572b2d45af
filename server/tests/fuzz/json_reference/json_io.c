/* THE REFERENCE: json_io.c's reading (json-c), as it was; its writers,
 * which the fuzz target does not use, are left out. */
#include "common/json_io.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing */

/* Skip the JSON string whose opening quote is at s[i]; the index after its
 * closing quote (json-c has checked that there is one). */
static size_t skip_string(const char *s, size_t len, size_t i)
{
    for (i++; i < len && s[i] != '"'; i++)
        if (s[i] == '\\')
            i++;
    return i + 1;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether some run of digits in the text, strings included, is long enough
 * that it might not fit 64 bits: 18 digits always fit, signed or not. Most
 * requests have none, and this is cheaper than telling strings and
 * fractions apart. */
static int has_long_digit_run(const char *s, size_t len)
{
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        run = is_digit(s[i]) ? run + 1 : 0;
        if (run > 18)
            return 1;
    }
    return 0;
}

/* Whether every integer in the (already parsed, so well-formed) text fits 64
 * bits: json-c clamps larger ones silently. A number with a fraction or an
 * exponent is a double and may be anything. */
static int integers_fit(const char *s, size_t len, char *err, size_t errlen)
{
    if (!has_long_digit_run(s, len))
        return 1;
    for (size_t i = 0; i < len;) {
        if (s[i] == '"') {
            i = skip_string(s, len, i);
            continue;
        }
        if (s[i] != '-' && !is_digit(s[i])) {
            i++;
            continue;
        }
        size_t start = i, digits = i + (s[i] == '-');
        for (i = digits; i < len && is_digit(s[i]); i++)
            ;
        if (i < len && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) {
            while (i < len && (is_digit(s[i]) || strchr(".eE+-", s[i])))
                i++;
            continue;
        }
        const char *limit = s[start] == '-' ? "9223372036854775808" : "18446744073709551615";
        size_t n = i - digits, limit_len = strlen(limit);
        if (n > limit_len || (n == limit_len && memcmp(s + digits, limit, n) > 0)) {
            snprintf(err, errlen, "failed to parse the request JSON buffer: too big integer "
                                  "%.*s%s at %zu (it does not fit 64 bits)",
                     (int)(i - start > 24 ? 24 : i - start), s + start,
                     i - start > 24 ? "..." : "", start);
            return 0;
        }
    }
    return 1;
}

/* Where the first NUL character of the (already parsed, so well-formed)
 * text is, or len: json-c keeps a "\u0000" inside a string, but every reader of
 * a name, key, parameter or object key takes it as a C string, so "a\u0000zz"
 * would register key "a" and an inference naming region "r\u0000junk" would
 * be served from "r". Outside strings a backslash is no JSON, so each one
 * starts an escape here; a raw NUL byte counts as well. */
static size_t first_nul(const char *s, size_t len)
{
    const char *raw = memchr(s, 0, len);
    size_t end = raw ? (size_t)(raw - s) : len;
    for (size_t i = 0; i < end; i++) {
        const char *p = memchr(s + i, '\\', end - i);
        if (!p)
            break;
        i = (size_t)(p - s);
        if (end - i >= 6 && memcmp(p + 1, "u0000", 5) == 0)
            return i;
        i++; /* the escaped character: "\\\\" is one backslash */
    }
    return end;
}

static int free_of_nul(const char *s, size_t len, char *err, size_t errlen)
{
    size_t at = first_nul(s, len);
    if (at == len)
        return 1;
    snprintf(err, errlen, "%s at %zu", JSON_NUL_MESSAGE, at);
    return 0;
}

json_object *json_parse_reusing(struct json_tokener **tok, const char *text, size_t len,
                                char *err, size_t errlen)
{
    if (len > INT_MAX) { /* json-c reads at most INT_MAX bytes at once */
        snprintf(err, errlen, "request JSON size of %zu bytes is more than the JSON parser "
                              "takes (%d)", len, INT_MAX);
        return NULL;
    }
    if (!*tok && (*tok = json_tokener_new()) != NULL)
        json_tokener_set_flags(*tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    if (!*tok) {
        snprintf(err, errlen, "out of memory parsing the request JSON buffer");
        return NULL;
    }
    json_object *j = json_tokener_parse_ex(*tok, text, (int)len);
    enum json_tokener_error e = json_tokener_get_error(*tok);
    size_t end = json_tokener_get_parse_end(*tok);
    if (!j || e != json_tokener_success) {
        /* continue: the text ended inside a value (json-c waits for more) */
        snprintf(err, errlen, "failed to parse the request JSON buffer: %s at %zu",
                 e == json_tokener_continue ? "unexpected end of the text"
                                            : json_tokener_error_desc(e), end);
        json_object_put(j);
        json_parse_tokener_free(tok);
        return NULL;
    }
    json_tokener_reset(*tok);
    if (end < len) {
        snprintf(err, errlen, "failed to parse the request JSON buffer: the document root must "
                              "not be followed by other values at %zu", end);
        json_object_put(j);
        j = NULL;
    } else if (!integers_fit(text, len, err, errlen) || !free_of_nul(text, len, err, errlen)) {
        json_object_put(j);
        j = NULL;
    }
    return j;
}

void json_parse_tokener_free(struct json_tokener **tok)
{
    if (*tok)
        json_tokener_free(*tok);
    *tok = NULL;
}

json_object *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct json_tokener *tok = NULL;
    json_object *j = json_parse_reusing(&tok, text, len, err, errlen);
    json_parse_tokener_free(&tok);
    return j;
}

int json_get_u64(const json_object *v, uint64_t *out)
{
    if (!json_object_is_type(v, json_type_int))
        return -1;
    /* json-c keeps integers as int64 or, above INT64_MAX, uint64: the signed
     * read is negative exactly for the negative ones. */
    if (json_object_get_int64(v) < 0)
        return -2;
    *out = json_object_get_uint64(v);
    return 0;
}
