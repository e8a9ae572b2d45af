/* JSON out, written as text into one buffer: json_write.h says why. */
#include "http/json_write.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- writing */

void jbuf_reserve(jbuf *b, size_t more)
{
    if (b->failed || more <= b->cap - b->len)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return;
        }
        cap *= 2;
    }
    char *grown = realloc(b->text, cap);
    if (!grown) {
        b->failed = 1;
        return;
    }
    b->text = grown;
    b->cap = cap;
}

void jbuf_raw(jbuf *b, const char *s, size_t len)
{
    jbuf_reserve(b, len + 1); /* + 1: jbuf_take's NUL */
    if (b->failed)
        return;
    memcpy(b->text + b->len, s, len);
    b->len += len;
}

void jbuf_lit(jbuf *b, const char *s)
{
    jbuf_raw(b, s, strlen(s));
}

/* One character that JSON needs escaped, or a byte that is not UTF-8. */
static void escape_one(jbuf *b, unsigned char c, int invalid)
{
    char esc[8];
    if (invalid)
        jbuf_lit(b, "\\ufffd");
    else if (c == '"' || c == '\\')
        jbuf_raw(b, (const char[]){'\\', (char)c}, 2);
    else {
        snprintf(esc, sizeof esc, "\\u%04x", c);
        jbuf_raw(b, esc, 6);
    }
}

void jbuf_str(jbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), run = 0; /* bytes at p[i - run] that need no escape */
    jbuf_raw(b, "\"", 1);
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq_len(p + i, len - i);
        if (n == 1 && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\') {
            i++, run++;
            continue;
        }
        if (n > 1) {
            i += n, run += n;
            continue;
        }
        jbuf_raw(b, (const char *)p + i - run, run);
        run = 0;
        escape_one(b, p[i], n == 0);
        i++;
    }
    jbuf_raw(b, (const char *)p + len - run, run);
    jbuf_raw(b, "\"", 1);
}

void jbuf_u64(jbuf *b, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do
        digits[sizeof digits - ++n] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    jbuf_raw(b, digits + sizeof digits - n, n);
}

void jbuf_i64(jbuf *b, int64_t v)
{
    if (v < 0) {
        jbuf_raw(b, "-", 1);
        jbuf_u64(b, (uint64_t)0 - (uint64_t)v); /* INT64_MIN too */
    } else {
        jbuf_u64(b, (uint64_t)v);
    }
}

void jbuf_double(jbuf *b, double v)
{
    if (isnan(v)) {
        jbuf_lit(b, "NaN");
        return;
    }
    if (isinf(v)) {
        jbuf_lit(b, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    /* The fewest of 15, 16 or 17 significant digits that read back as v:
     * 0.1 rather than 0.10000000000000001; 17 always do. */
    char text[32];
    int n = 0;
    for (int digits = 15; digits <= 17; digits++) {
        n = snprintf(text, sizeof text, "%.*g", digits, v);
        if (digits == 17 || strtod(text, NULL) == v)
            break;
    }
    jbuf_raw(b, text, (size_t)n);
    if (!strpbrk(text, ".eE")) /* a real stays a real: 1.0, not 1 */
        jbuf_raw(b, ".0", 2);
}

char *jbuf_take(jbuf *b, size_t *len)
{
    jbuf_reserve(b, 1);
    if (b->failed) {
        jbuf_free(b);
        return NULL;
    }
    char *text = b->text;
    text[b->len] = 0;
    *len = b->len;
    *b = (jbuf){0};
    return text;
}

void jbuf_free(jbuf *b)
{
    free(b->text);
    *b = (jbuf){0};
}
