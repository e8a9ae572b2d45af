/* Differential fuzz target of the server's JSON reader: the same bytes go
 * to the reader (server/src/http/json_doc.cc) and to the reference, the
 * reading it replaced (json_reference/: json-c behind a RapidJSON
 * pre-scan), and the two must agree on every verdict and every value a
 * request's code can ask for. Of the messages, those the server words
 * itself (an integer past 64 bits, a NUL character, the nesting limit, the
 * size limit) must be the same; a text that is not JSON is refused in
 * RapidJSON's words now (Triton's) where json-c had its own, so there both
 * must only be a parse failure. The deliberate differences are let through:
 * see not_rfc_8259. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "http/json_doc.h"
#include "common/utf8.h"
#include "json_reference/common/json_doc.h"
/* The reference is declared under ref_ names; the plain names are the
 * reader's again. */
#undef json_doc
#undef json_val
#undef json_doc_parse
#undef json_doc_free
#undef json_doc_root
#undef jv_get
#undef jv_is_string
#undef jv_is_object
#undef jv_is_array
#undef jv_is_bool
#undef jv_str
#undef jv_true
#undef jv_len
#undef jv_at
#undef jv_u64
#undef jv_i64
#undef jv_number

namespace {

/* The keys a request's code asks for, and a few short ones the fuzzer finds
 * easily; an object is compared through these. */
const char *const KEYS[] = {"inputs", "outputs", "name", "shape", "datatype", "data", "parameters",
                            "id", "key", "offset", "byte_size", "raw_handle", "b64", "device_id",
                            "descriptor", "binary_data", "binary_data_size", "shared_memory_region",
                            "shared_memory_offset", "shared_memory_byte_size", "classification",
                            "a", "b", "", "k"};

[[noreturn]] void differ(const char *what, const uint8_t *data, size_t size)
{
    fprintf(stderr, "the reader and the reference differ: %s\ninput (%zu bytes): %.*s\n", what,
            size, (int)(size > 400 ? 400 : size), (const char *)data);
    abort();
}

bool same_double(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* The code point of the 4-byte UTF-8 form at p, or 0 when p holds none. */
uint32_t four_byte_character(const unsigned char *p)
{
    if (p[0] < 0xf0 || p[0] > 0xf4)
        return 0;
    for (int i = 1; i < 4; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
           (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
}

/* Whether the reference's string is the reader's, but for json-c 0.16's
 * one misreading of a valid escape pair: a character past U+FFFF whose low
 * 16 bits fall in D800-DFFF (U+1D800, U+2DE00, ...) json-c took for a lone
 * surrogate and gave as U+FFFD. The reader keeps the character, as
 * RapidJSON (so Triton) does. */
bool same_string(const char *reader, const char *reference)
{
    const auto *n = reinterpret_cast<const unsigned char *>(reader);
    const auto *r = reinterpret_cast<const unsigned char *>(reference);
    while (*n || *r) {
        uint32_t c;
        if (*n == *r) {
            n++, r++;
        } else if ((c = four_byte_character(n)) != 0 && (c & 0xf800) == 0xd800 &&
                   memcmp(r, "\xef\xbf\xbd", 3) == 0) {
            n += 4, r += 3;
        } else {
            return false;
        }
    }
    return true;
}

struct walk {
    const uint8_t *data;
    size_t size;

    void check(bool same, const char *what) const
    {
        if (!same)
            differ(what, data, size);
    }

    void compare(const json_val *n, const ref_json_val *r) const
    {
        check(!n == !r, "null or absent");
        if (!n)
            return;
        check(jv_is_string(n) == ref_jv_is_string(r), "is string");
        check(jv_is_object(n) == ref_jv_is_object(r), "is object");
        check(jv_is_array(n) == ref_jv_is_array(r), "is array");
        check(jv_is_bool(n) == ref_jv_is_bool(r), "is bool");
        check(jv_true(n) == ref_jv_true(r), "true");
        const char *ns = jv_str(n), *rs = ref_jv_str(r);
        check(!ns == !rs && (!ns || same_string(ns, rs)), "string");
        compare_numbers(n, r);
        check(jv_len(n) == ref_jv_len(r), "array length");
        for (size_t i = 0; i < jv_len(n); i++)
            compare(jv_at(n, i), ref_jv_at(r, i));
        if (jv_is_object(n))
            for (const char *key : KEYS)
                compare(jv_get(n, key), ref_jv_get(r, key));
    }

    void compare_numbers(const json_val *n, const ref_json_val *r) const
    {
        uint64_t nu = 0, ru = 0;
        int64_t ni = 0, ri = 0;
        double nd = 0, rd = 0;
        int a = jv_u64(n, &nu), b = ref_jv_u64(r, &ru);
        check(a == b && (a != 0 || nu == ru), "unsigned integer");
        a = jv_i64(n, &ni), b = ref_jv_i64(r, &ri);
        check(a == b && (a != 0 || ni == ri), "signed integer");
        a = jv_number(n, &nd), b = ref_jv_number(r, &rd);
        check(a == b && (a != 0 || same_double(nd, rd)), "number");
    }
};

/* Whether a refusal's message is one the server words itself (the same
 * from both), rather than a parser's account of a text that is not JSON. */
bool own_words(const char *message)
{
    static const char *const OWN[] = {
        "failed to parse the request JSON buffer: too big integer",
        "failed to parse the request JSON buffer: nesting too deep",
        "the request JSON holds a NUL character",
        "request JSON size of",
    };
    for (const char *own : OWN)
        if (strncmp(message, own, strlen(own)) == 0)
            return true;
    return false;
}

/* The offset a refusal names, or SIZE_MAX when it is not `words`. */
size_t refused_at(const char *message, const char *words)
{
    std::string full = std::string("failed to parse the request JSON buffer: ") + words + " at ";
    if (strncmp(message, full.c_str(), full.size()) != 0)
        return SIZE_MAX;
    return strtoull(message + full.size(), nullptr, 10);
}

/* Whether the characters of a number around `at` (digits, '.', 'e', 'E',
 * '+', '-') break RFC 8259's grammar: json-c took "1.", "-.1", "1.e5",
 * "00", "-01". */
bool malformed_number(const char *text, size_t size, size_t at)
{
    auto part = [](char c) { return (c >= '0' && c <= '9') || strchr(".eE+-", c); };
    size_t start = at < size ? at : size, end = start;
    while (start > 0 && part(text[start - 1]))
        start--;
    while (end < size && part(text[end]))
        end++;
    std::string n(text + start, end - start);
    size_t i = n[0] == '-';
    if (i >= n.size() || !(n[i] >= '0' && n[i] <= '9'))
        return true;
    if (n[i] == '0' && i + 1 < n.size() && n[i + 1] >= '0' && n[i + 1] <= '9')
        return true;
    size_t dot = n.find('.');
    return dot != std::string::npos && (dot + 1 >= n.size() || !(n[dot + 1] >= '0' && n[dot + 1] <= '9'));
}

/* The deliberate differences, where json-c took a text that RFC 8259
 * forbids and RapidJSON (so Triton) refuses it: a raw control character
 * (below 0x20) in a string, a malformed number, a "\ud800"-"\udbff"
 * escape with no low surrogate after it, a byte sequence RFC 3629 forbids
 * (json-c took overlong forms such as 0xc0 0x80 or 0xe0 0x8c 0x96, and
 * encoded surrogates), a string in single quotes. Whether the reader's
 * refusal is one of these. */
bool not_rfc_8259(const char *text, size_t size, const char *message)
{
    size_t at = refused_at(message, "Invalid escape character in string.");
    if (at != SIZE_MAX)
        return at < size && (unsigned char)text[at] < 0x20;
    if (refused_at(message, "The surrogate pair in string is invalid.") != SIZE_MAX)
        return true;
    const char *last_at = strstr(message, " at "); /* the offset follows the last " at " */
    for (const char *next = last_at; next; next = strstr(next + 1, " at "))
        last_at = next;
    size_t where = last_at ? strtoull(last_at + 4, nullptr, 10) : SIZE_MAX;
    if (where < size && text[where] == '\'') /* json-c took a string in single quotes */
        return true;
    if (refused_at(message, "Invalid encoding in string.") != SIZE_MAX) /* not RFC 3629 */
        return !utf8_valid(text, size);
    const char *number_words[] = {"Miss fraction part in number.", "Invalid value.",
                                  "Missing a comma or ']' after an array element.",
                                  "Missing a comma or '}' after an object member.",
                                  "The document root must not be followed by other values."};
    for (const char *words : number_words)
        if ((at = refused_at(message, words)) != SIZE_MAX)
            return malformed_number(text, size, at) ||
                   (at > 0 && malformed_number(text, size, at - 1));
    return false;
}

/* A text that is one scalar (after whitespace) and ends with its last
 * character ("7", "NaN", "false"): json-c waited for more and said the
 * text ended; RapidJSON reads the scalar (and may find a number past 64
 * bits); a text that is null alone json-c refused in the words "success".
 * Every caller refuses a root that is not an object, in its words, so a
 * client is refused either way. */
bool scalar_at_the_end(const char *text, size_t size, const char *reference_message)
{
    char words[128];
    snprintf(words, sizeof words,
             "failed to parse the request JSON buffer: unexpected end of the text at %zu", size);
    if (strncmp(reference_message, "failed to parse the request JSON buffer: success at ", 52) == 0)
        return true; /* a root null, which json-c gave as no object at all */
    if (size == 0 || strcmp(reference_message, words) != 0)
        return false;
    size_t i = 0;
    while (i < size && strchr(" \t\n\r", text[i]) && text[i])
        i++;
    for (; i < size; i++)
        if (!((text[i] >= '0' && text[i] <= '9') || strchr(".eE+-NaIfitytruefalsnul", text[i])) || !text[i])
            return false;
    return true;
}

/* The one difference of words left: where the nesting limit falls on an
 * element that starts with a multi-byte UTF-8 character followed by bytes
 * that do not complete it, json-c named the bad UTF-8 and the reader names
 * the nesting, at the same offset. Both refuse the text with 400. */
bool utf8_at_the_nesting_limit(const char *reader_message, const char *reference_message)
{
    size_t at = refused_at(reader_message, "nesting too deep");
    const char *words = "failed to parse the request JSON buffer: invalid utf-8 string at ";
    return at != SIZE_MAX && strncmp(reference_message, words, strlen(words)) == 0 &&
           strtoull(reference_message + strlen(words), nullptr, 10) == at;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = reinterpret_cast<const char *>(data);
    char nerr[600] = "", rerr[600] = "";
    json_doc *n = json_doc_parse(text, size, nerr, sizeof nerr);
    ref_json_doc *r = ref_json_doc_parse(text, size, nullptr, rerr, sizeof rerr);
    if (!n && not_rfc_8259(text, size, nerr)) { /* whatever the reference said */
        ref_json_doc_free(r);
        return 0;
    }
    if (!r && scalar_at_the_end(text, size, rerr)) {
        json_doc_free(n);
        return 0;
    }
    if (!n != !r) {
        char what[1400];
        snprintf(what, sizeof what, "verdict: reader \"%s\", reference \"%s\"",
                 n ? "parsed" : nerr, r ? "parsed" : rerr);
        differ(what, data, size);
    }
    if (!n) {
        const char *prefix = "failed to parse the request JSON buffer: ";
        bool same = utf8_at_the_nesting_limit(nerr, rerr) ||
                    (own_words(rerr) ? strcmp(nerr, rerr) == 0
                                     : !own_words(nerr) && strncmp(nerr, prefix, strlen(prefix)) == 0);
        if (!same) {
            char what[1400];
            snprintf(what, sizeof what, "message: reader \"%s\", reference \"%s\"", nerr, rerr);
            differ(what, data, size);
        }
        return 0;
    }
    walk{data, size}.compare(json_doc_root(n), ref_json_doc_root(r));
    json_doc_free(n);
    ref_json_doc_free(r);
    return 0;
}
