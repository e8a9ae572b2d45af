/* A request body in a RapidJSON document, read as json_doc.h says. */
#include "http/json_doc.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include <cmath>
#include <cstring>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>


namespace {

/* malloc that throws: RapidJSON does not check what its allocator returns,
 * so a failed allocation leaves the parse as an exception, caught below. */
class throwing_allocator {
public:
    static const bool kNeedFree = true;
    void *Malloc(size_t size)
    {
        if (size == 0)
            return nullptr;
        void *p = std::malloc(size);
        if (!p)
            throw std::bad_alloc();
        return p;
    }
    void *Realloc(void *old, size_t, size_t size)
    {
        if (size == 0) {
            std::free(old);
            return nullptr;
        }
        void *p = std::realloc(old, size);
        if (!p)
            throw std::bad_alloc();
        return p;
    }
    static void Free(void *p) { std::free(p); }
};

using pool = rapidjson::MemoryPoolAllocator<throwing_allocator>;
/* The parse stack grows by realloc, which a pool could only do by leaving
 * each outgrown copy behind: a large array is on the stack whole before it
 * is copied into the pool. */
using document = rapidjson::GenericDocument<rapidjson::UTF8<>, pool, throwing_allocator>;
using value = document::ValueType;

/* A short inference's header (`simple`: two inputs of 16 elements and two
 * outputs) takes about 1.5 KiB of values, which start inside the document:
 * only a larger header takes chunks of CHUNK bytes (or its size) from
 * malloc. Its parse stack takes a few hundred bytes. */
constexpr size_t VALUES_INLINE = 4096, STACK_FIRST = 1024;
constexpr size_t CHUNK = 64 * 1024;

/* json-c's nesting limit, which clients have met since the server began:
 * 32 containers one in another (the root's level is 0, the innermost's 31),
 * and nothing inside the innermost, refused at the first character of what
 * is. RapidJSON has no limit of its own and reads nesting recursively, so a
 * deeper text is refused before it can exhaust the thread's stack. */
constexpr int LAST_LEVEL = 31;

/* RFC 8259 plus Triton's NaN, Infinity and -Infinity; strings checked to be
 * UTF-8; numbers handed over as text, read below with strtoull/strtoll/strtod
 * (RapidJSON 1.1's own reading misreads some exponents: 0e-79 as 7e100, an
 * overflow as NaN; and reads an integer past 64 bits as a double). */
constexpr unsigned FLAGS = rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNanAndInfFlag |
                           rapidjson::kParseNumbersAsStringsFlag;

/* The bytes as they are: RapidJSON's encoded stream would skip a byte order
 * mark, and any one of its three bytes alone, before the text. */
using stream = rapidjson::MemoryStream;

/* A lone "\udc00"-"\udfff" escape, which RapidJSON 1.1 writes as the
 * surrogate's own three bytes (no UTF-8), becomes U+FFFD (three bytes too),
 * as json-c wrote it: a string the server holds is always UTF-8. */
void replace_surrogates(char *s, size_t len)
{
    for (size_t i = 0; i + 2 < len; i++)
        if ((unsigned char)s[i] == 0xed && (unsigned char)s[i + 1] >= 0xa0)
            memcpy(s + i, "\xef\xbf\xbd", 3), i += 2;
}

/* The document's handler, with json_io's rules on top: the nesting limit, a
 * number read as json-c read it, an integer that does not fit 64 bits and a
 * NUL inside a string remembered (the first of each) for the message. */
class reader_handler {
public:
    /* text: the client's, from which numbers are read (the stream may read
     * a copy with its numbers blanked: read_blanked). */
    reader_handler(document &doc, stream &in, const char *text, size_t len, bool blanked)
        : doc_(doc), in_(in), text_(text), len_(len), blanked_(blanked)
    {
    }
    bool Null() { return doc_.Null(); }
    bool Bool(bool b) { return doc_.Bool(b); }
    bool Int(int i) { return doc_.Int64(i); }
    bool Uint(unsigned u) { return doc_.Uint64(u); }
    bool Int64(int64_t i) { return doc_.Int64(i); }
    bool Uint64(uint64_t u) { return doc_.Uint64(u); }
    bool Double(double d) { return doc_.Double(d); }
    bool RawNumber(const char *s, rapidjson::SizeType len, bool);
    bool String(const char *s, rapidjson::SizeType len, bool copy)
    {
        note_nul(s, len);
        if (!memchr(s, 0xed, len))
            return doc_.String(s, len, copy);
        std::string fixed(s, len);
        replace_surrogates(&fixed[0], len);
        return doc_.String(fixed.data(), len, true);
    }
    bool Key(const char *s, rapidjson::SizeType len, bool copy)
    {
        return (depth_ <= LAST_LEVEL || member_value_fits()) && String(s, len, copy);
    }
    bool StartObject()
    {
        depth_++;
        return doc_.StartObject();
    }
    bool StartArray()
    {
        depth_++;
        return (depth_ <= LAST_LEVEL || empty_array()) && doc_.StartArray();
    }
    bool EndObject(rapidjson::SizeType n)
    {
        depth_--;
        return doc_.EndObject(n);
    }
    bool EndArray(rapidjson::SizeType n)
    {
        depth_--;
        return doc_.EndArray(n);
    }

    size_t too_deep_at = SIZE_MAX;   /* the first character past LAST_LEVEL */
    size_t big_at = SIZE_MAX;        /* the first integer past 64 bits */
    size_t big_len = 0;
    bool nul = false;                /* some string holds a NUL */
    bool bad_number = false;         /* Inf or -Inf, which json-c never took */

private:
    /* The innermost container (its level LAST_LEVEL) may hold nothing:
     * whether the array just opened is empty, or the member whose key was
     * just read has no value yet; else where what it holds starts. */
    size_t skip_space(size_t at) const
    {
        while (at < len_ && strchr(" \t\n\r", text_[at]) && text_[at])
            at++;
        return at;
    }
    /* Whether the character at `at` is UTF-8: json-c said a byte that is
     * not was invalid UTF-8, and a NUL byte was the end of the data, before
     * it said anything of nesting (a NUL is checked by the callers). */
    bool utf8_at(size_t at) const
    {
        struct discard {
            void Put(char) {}
        } out;
        rapidjson::MemoryStream bytes(text_ + at, len_ - at);
        return rapidjson::UTF8<>::Validate(bytes, out);
    }
    bool empty_array()
    {
        size_t at = skip_space(in_.Tell());
        if (at >= len_ || text_[at] == ']' || !text_[at] || !utf8_at(at))
            return true;
        too_deep_at = at;
        return false;
    }
    bool member_value_fits()
    {
        size_t at = skip_space(in_.Tell());
        if (at >= len_ || text_[at] != ':' || (at = skip_space(at + 1)) >= len_ || !text_[at] ||
            !utf8_at(at))
            return true; /* RapidJSON says what is wrong */
        too_deep_at = at;
        return false;
    }
    void note_nul(const char *s, size_t len)
    {
        if (!nul && memchr(s, 0, len))
            nul = true;
    }
    bool integer(const char *s, size_t len, size_t at);

    document &doc_;
    stream &in_;
    const char *text_;
    size_t len_;
    bool blanked_;
    int depth_ = 0;
};

/* An integer as json-c keeps it (signed 64-bit, or unsigned above
 * INT64_MAX); one past either range is remembered and read as the nearest
 * bound, so the parse goes on to say whether the text is JSON at all. */
bool reader_handler::integer(const char *s, size_t len, size_t at)
{
    const char *limit = s[0] == '-' ? "9223372036854775808" : "18446744073709551615";
    size_t digits = len - (s[0] == '-'), limit_len = strlen(limit);
    const char *d = s + (s[0] == '-');
    if (digits > limit_len || (digits == limit_len && memcmp(d, limit, digits) > 0)) {
        if (big_at == SIZE_MAX)
            big_at = at, big_len = len;
        return s[0] == '-' ? doc_.Int64(INT64_MIN) : doc_.Uint64(UINT64_MAX);
    }
    if (s[0] == '-')
        return doc_.Int64(strtoll(s, nullptr, 10));
    uint64_t u = strtoull(s, nullptr, 10);
    return u > (uint64_t)INT64_MAX ? doc_.Uint64(u) : doc_.Int64((int64_t)u);
}

bool reader_handler::RawNumber(const char *s, rapidjson::SizeType len, bool)
{
    size_t at = in_.Tell() - len;
    std::string original;
    if (blanked_) { /* the client's number, NUL-terminated for strtod */
        original.assign(text_ + at, len);
        s = original.c_str();
    }
    if (strchr(s, 'I') || strchr(s, 'N')) {
        if (strcmp(s, "NaN") == 0)
            return doc_.Double(NAN);
        if (strcmp(s, "Infinity") == 0 || strcmp(s, "-Infinity") == 0)
            return doc_.Double(s[0] == '-' ? -INFINITY : INFINITY);
        bad_number = true;
        return false;
    }
    if (!strpbrk(s, ".eE"))
        return integer(s, len, at);
    return doc_.Double(strtod(s, nullptr));
}

const value *as_value(const json_val *v)
{
    return reinterpret_cast<const value *>(v);
}

/* A JSON null reads as NULL, as absent as a missing key (json_doc.h). */
const json_val *val_of(const value *v)
{
    return v && !v->IsNull() ? reinterpret_cast<const json_val *>(v) : nullptr;
}

} // namespace

struct json_doc {
    throwing_allocator base;
    alignas(max_align_t) char values_inline[VALUES_INLINE];
    pool values{values_inline, sizeof values_inline, CHUNK, &base};
    document doc{&values, STACK_FIRST, &base};
};

namespace {

/* Where the first NUL character of the text is (a "\u0000" escape or a raw
 * NUL byte), or len: the place the message names. */
size_t first_nul(const char *s, size_t len)
{
    const char *raw = static_cast<const char *>(memchr(s, 0, len));
    size_t end = raw ? (size_t)(raw - s) : len;
    for (size_t i = 0; i < end; i++) {
        const char *p = static_cast<const char *>(memchr(s + i, '\\', end - i));
        if (!p)
            break;
        i = (size_t)(p - s);
        if (end - i >= 6 && memcmp(p + 1, "u0000", 5) == 0)
            return i;
        i++; /* the escaped character: "\\\\" is one backslash */
    }
    return end;
}

/* The message for a text that parsed but breaks a rule above, in the order
 * clients have seen: an integer past 64 bits, then a NUL character. */
bool rule_broken(const reader_handler &h, const char *text, size_t len, char *err,
                 size_t errlen)
{
    if (h.big_at != SIZE_MAX) {
        size_t n = h.big_len;
        snprintf(err, errlen, "failed to parse the request JSON buffer: too big integer "
                              "%.*s%s at %zu (it does not fit 64 bits)",
                 (int)(n > 24 ? 24 : n), text + h.big_at, n > 24 ? "..." : "", h.big_at);
        return true;
    }
    size_t nul = first_nul(text, len);
    if (nul == len)
        return false;
    snprintf(err, errlen, "%s at %zu", JSON_NUL_MESSAGE, nul);
    return true;
}

/* The message for a text RapidJSON stopped reading: RapidJSON's words and
 * place, as Triton (which reads with RapidJSON too) says them, save for the
 * nesting limit's words. */
void parse_error(const reader_handler &h, rapidjson::ParseResult r, char *err, size_t errlen)
{
    if (h.too_deep_at != SIZE_MAX)
        snprintf(err, errlen, "failed to parse the request JSON buffer: nesting too deep at %zu",
                 h.too_deep_at);
    else
        snprintf(err, errlen, "failed to parse the request JSON buffer: %s at %zu",
                 rapidjson::GetParseError_En(h.bad_number ? rapidjson::kParseErrorValueInvalid
                                                          : r.Code()),
                 r.Offset());
}

/* The end of the JSON number at s[i] (RFC 8259's grammar), or i when none
 * starts there. */
size_t number_end(const char *s, size_t len, size_t i)
{
    size_t start = i;
    auto digits = [&](size_t at) {
        while (at < len && s[at] >= '0' && s[at] <= '9')
            at++;
        return at;
    };
    if (i < len && s[i] == '-')
        i++;
    if (i < len && s[i] == '0')
        i++;
    else if (i < len && s[i] >= '1' && s[i] <= '9')
        i = digits(i);
    else
        return start;
    if (i + 1 < len && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9')
        i = digits(i + 1);
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        size_t e = i + 1 + (i + 1 < len && (s[i + 1] == '+' || s[i + 1] == '-'));
        if (e < len && s[e] >= '0' && s[e] <= '9')
            i = digits(e);
    }
    return i;
}

/* The number s[i, end) blanked to one of the same length and shape that
 * RapidJSON reads without complaint: a mantissa of three digits or more
 * becomes "0.0...0" (after its sign), the exponent's digits zeros. It keeps its exponent if
 * it had one, and a fraction once it has three characters, so the bytes
 * after it cannot extend it where they did not extend the number ("1e400"
 * then "e5" stays no JSON). */
void blank_number(char *s, size_t i, size_t end)
{
    size_t e = i, digits = i + (s[i] == '-'); /* a sign stays: "--320" stays no JSON */
    while (e < end && s[e] != 'e' && s[e] != 'E')
        e++;
    if (e - digits >= 3) {
        memset(s + digits, '0', e - digits);
        s[digits + 1] = '.';
    }
    for (size_t k = e + 1; k < end; k++)
        if (s[k] >= '0' && s[k] <= '9')
            s[k] = '0';
}

/* Every number in the copy s, outside strings, blanked (blank_number):
 * RapidJSON 1.1 refuses a number past a double's range ("Number too big to
 * be stored in double", 1E400 or 400 digits) where json-c read Infinity or
 * said the integer does not fit, and the reader then reads the numbers from
 * the client's text instead. */
void blank_numbers(char *s, size_t len)
{
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (s[i] == '\\')
                i++;
            else if (s[i] == '"')
                in_string = false;
            continue;
        }
        if (s[i] == '"') {
            in_string = true;
            continue;
        }
        size_t end = number_end(s, len, i);
        if (end > i) {
            blank_number(s, i, end);
            i = end - 1;
        }
    }
}

/* Read the text (or the copy `source` of it) into d; the parse's result. */
rapidjson::ParseResult read_from(json_doc *d, const char *source, const char *text, size_t len,
                                 char *err, size_t errlen, bool *too_big)
{
    stream in(source, len);
    reader_handler h(d->doc, in, text, len, source != text);
    rapidjson::ParseResult result;
    auto generate = [&](document &) {
        rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, throwing_allocator> r(
            &d->base, STACK_FIRST);
        result = r.Parse<FLAGS>(in, h);
        return !result.IsError();
    };
    d->doc.Populate(generate);
    /* RapidJSON's stream reads a raw NUL byte as the end of the text: one
     * after the root ends the parse there, and the bytes after it must be
     * refused as any others after the root are. */
    if (!result.IsError() && in.Tell() != len)
        result.Set(rapidjson::kParseErrorDocumentRootNotSingular, in.Tell());
    *too_big = result.Code() == rapidjson::kParseErrorNumberTooBig;
    if (result.IsError() && !*too_big)
        parse_error(h, result, err, errlen);
    else if (!result.IsError() && rule_broken(h, text, len, err, errlen))
        result.Set(rapidjson::kParseErrorTermination, 0);
    return result;
}

/* Read the text into d, or say why not in err. */
bool read(json_doc *d, const char *text, size_t len, char *err, size_t errlen)
{
    bool too_big;
    if (!read_from(d, text, text, len, err, errlen, &too_big).IsError())
        return true;
    if (!too_big)
        return false;
    std::string blanked(text, len);
    blank_numbers(&blanked[0], len);
    d->doc.SetNull();
    d->values.Clear();
    return !read_from(d, blanked.data(), text, len, err, errlen, &too_big).IsError();
}

} // namespace

json_doc *json_doc_parse(const char *text, size_t len, char *err, size_t errlen)
{
    if (len > INT_MAX) { /* RapidJSON counts a string's bytes in 32 bits */
        snprintf(err, errlen, "request JSON size of %zu bytes is more than the JSON parser "
                              "takes (%d)", len, INT_MAX);
        return nullptr;
    }
    json_doc *d = new (std::nothrow) json_doc;
    if (!d) {
        snprintf(err, errlen, "out of memory parsing the request JSON buffer");
        return nullptr;
    }
    try {
        if (read(d, text, len, err, errlen))
            return d;
    } catch (const std::bad_alloc &) {
        snprintf(err, errlen, "out of memory parsing the request JSON buffer");
    }
    delete d;
    return nullptr;
}

void json_doc_free(json_doc *d)
{
    delete d;
}

const json_val *json_doc_root(const json_doc *d)
{
    return val_of(&d->doc);
}

namespace {

/* A repeated key reads as its last (json-c's reading, which clients have
 * had since the server began); RapidJSON keeps every one, so the search
 * goes to the end. */

const value *last_member(const json_val *o, const char *key)
{
    const value *v = as_value(o);
    if (!v || !v->IsObject())
        return nullptr;
    const value *found = nullptr;
    size_t key_len = strlen(key);
    for (auto m = v->MemberBegin(); m != v->MemberEnd(); ++m)
        if (m->name.GetStringLength() == key_len && memcmp(m->name.GetString(), key, key_len) == 0)
            found = &m->value;
    return found;
}

} // namespace

const json_val *jv_get(const json_val *o, const char *key)
{
    return val_of(last_member(o, key));
}

int jv_has(const json_val *o, const char *key)
{
    return last_member(o, key) != nullptr;
}

int jv_is_string(const json_val *v)
{
    return v && as_value(v)->IsString();
}

int jv_is_object(const json_val *v)
{
    return v && as_value(v)->IsObject();
}

int jv_is_array(const json_val *v)
{
    return v && as_value(v)->IsArray();
}

int jv_is_bool(const json_val *v)
{
    return v && as_value(v)->IsBool();
}

const char *jv_str(const json_val *v)
{
    return jv_is_string(v) ? as_value(v)->GetString() : nullptr;
}

int jv_true(const json_val *v)
{
    return v && as_value(v)->IsTrue();
}

size_t jv_len(const json_val *v)
{
    return jv_is_array(v) ? as_value(v)->Size() : 0;
}

const json_val *jv_at(const json_val *v, size_t i)
{
    if (i >= jv_len(v))
        return nullptr;
    return val_of(&(*as_value(v))[(rapidjson::SizeType)i]);
}

int jv_u64(const json_val *v, uint64_t *out)
{
    if (!v)
        return -1;
    const value *x = as_value(v);
    if (x->IsUint64()) {
        *out = x->GetUint64();
        return 0;
    }
    return x->IsInt64() ? -2 : -1; /* an Int64 that is no Uint64 is negative */
}

int jv_i64(const json_val *v, int64_t *out)
{
    if (!v || !as_value(v)->IsInt64())
        return -1; /* an integer past INT64_MAX is a Uint64 only */
    *out = as_value(v)->GetInt64();
    return 0;
}

int jv_number(const json_val *v, double *out)
{
    if (!v || !as_value(v)->IsNumber())
        return -1;
    *out = as_value(v)->GetDouble();
    return 0;
}
