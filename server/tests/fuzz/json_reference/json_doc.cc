/* An inference request header in a RapidJSON document: json_doc.h says why,
 * and when json-c reads the text instead. */
#include "common/json_doc.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <json-c/json.h>
#include <rapidjson/document.h>

#include "common/json_io.h"

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

/* Nesting that RapidJSON reads itself (recursively): a request nests about
 * five deep, json-c refuses past 32, and deeper texts go to json-c. */
constexpr int MAX_DEPTH = 16;
/* Objects with more members go to json-c, whose keys are unique by
 * construction, rather than be checked for repeats pair by pair. */
constexpr rapidjson::SizeType MAX_MEMBERS = 32;
/* Digits in a row that always fit 64 bits (as json_io.c's check). */
constexpr size_t MAX_DIGITS = 18;
/* A number with an exponent that RapidJSON 1.1 rounds as strtod does: a
 * mantissa of at most 17 digits that starts with 1-9, and an exponent of at
 * most 2 digits. Past these it can be wrong in the last bit (more digits),
 * wildly so (a zero mantissa: 0e-79 read as 7e100; an overflow read as
 * NaN), or assert. */
constexpr size_t MAX_EXP_MANTISSA = 17, MAX_EXP_DIGITS = 2;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The end of the digits at s[i]. */
size_t skip_digits(const char *s, size_t len, size_t i)
{
    while (i < len && is_digit(s[i]))
        i++;
    return i;
}

/* The number at s[i] (a '-' or a digit): the index after it, or 0 when it
 * has an exponent that RapidJSON might read otherwise than strtod. A
 * malformed number is left to RapidJSON, which refuses it. */
size_t plain_number_end(const char *s, size_t len, size_t i)
{
    if (s[i] == '-')
        i++;
    size_t first = i, digits;
    i = skip_digits(s, len, i);
    digits = i - first;
    if (i < len && s[i] == '.') {
        size_t fraction = i + 1;
        i = skip_digits(s, len, fraction);
        digits += i - fraction;
    }
    if (i >= len || (s[i] != 'e' && s[i] != 'E'))
        return i;
    if (i + 1 < len && (s[i + 1] == '+' || s[i + 1] == '-'))
        i++;
    size_t exponent = i + 1;
    i = skip_digits(s, len, exponent);
    if (digits > MAX_EXP_MANTISSA || first >= len || s[first] == '0' ||
        i - exponent > MAX_EXP_DIGITS)
        return 0;
    return i;
}

/* Whether the text is one that RapidJSON reads as json-c does (json_doc.h):
 * one object with nothing around it, printable ASCII and JSON's whitespace
 * only, no backslash, nesting and digit runs within bounds, exponents as
 * above. Strings hold no escape, so a quote always opens or closes one, and
 * no NUL (json_doc.h). */
bool plain_text(const char *s, size_t len)
{
    if (len < 2 || len > INT_MAX || s[0] != '{' || s[len - 1] != '}')
        return false;
    int depth = 0;
    bool in_string = false;
    size_t digits = 0, number_end = 0; /* the end of the last number seen */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x7f || c == '\\' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r'))
            return false;
        digits = is_digit(s[i]) ? digits + 1 : 0;
        if (digits > MAX_DIGITS)
            return false;
        if (c == '"')
            in_string = !in_string;
        else if (in_string)
            continue;
        else if (c == '{' || c == '[') {
            if (++depth > MAX_DEPTH)
                return false;
        } else if (c == '}' || c == ']')
            depth--;
        else if ((c == '-' || is_digit(s[i])) && i >= number_end) {
            number_end = plain_number_end(s, len, i);
            if (number_end == 0)
                return false;
        }
    }
    return true;
}

/* Whether every object in v names each key once (json-c keeps the last of
 * a repeated key; RapidJSON keeps both and finds the first). */
bool keys_unique(const value &v)
{
    if (v.IsArray()) {
        for (rapidjson::SizeType i = 0; i < v.Size(); i++)
            if ((v[i].IsArray() || v[i].IsObject()) && !keys_unique(v[i]))
                return false;
        return true;
    }
    if (!v.IsObject())
        return true;
    if (v.MemberCount() > MAX_MEMBERS)
        return false;
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
        for (auto earlier = v.MemberBegin(); earlier != m; ++earlier)
            if (earlier->name == m->name)
                return false;
        if (!keys_unique(m->value))
            return false;
    }
    return true;
}

/* A json_val is a RapidJSON value, or a json-c object with its low bit set
 * (both are at least 8-byte aligned): each accessor reads either as json-c
 * would have read the text. */
bool from_json_c(const json_val *v)
{
    return reinterpret_cast<uintptr_t>(v) & 1;
}

json_object *as_json_c(const json_val *v)
{
    return reinterpret_cast<json_object *>(reinterpret_cast<uintptr_t>(v) & ~uintptr_t{1});
}

/* json-c reads a JSON null as NULL, as absent as a missing key. */
const json_val *val_of_json_c(json_object *j)
{
    return j ? reinterpret_cast<const json_val *>(reinterpret_cast<uintptr_t>(j) | 1) : nullptr;
}

const value *as_value(const json_val *v)
{
    return reinterpret_cast<const value *>(v);
}

const json_val *val_of(const value *v)
{
    return v && !v->IsNull() ? reinterpret_cast<const json_val *>(v) : nullptr;
}

int json_c_is(const json_val *v, json_type type)
{
    return json_object_is_type(as_json_c(v), type);
}

} // namespace

struct json_doc {
    json_object *tree = nullptr; /* json-c's reading, or NULL: RapidJSON's, in doc */
    throwing_allocator base;
    alignas(max_align_t) char values_inline[VALUES_INLINE];
    pool values{values_inline, sizeof values_inline, CHUNK, &base};
    document doc{&values, STACK_FIRST, &base};
};

namespace {

/* RapidJSON's reading of a plain text, or false with nothing kept (json-c
 * then reads it, or says why it cannot). */
bool read_plain(json_doc *d, const char *text, size_t len)
{
    if (!plain_text(text, len))
        return false;
    try {
        d->doc.Parse<rapidjson::kParseFullPrecisionFlag>(text, len);
        if (!d->doc.HasParseError() && d->doc.IsObject() && keys_unique(d->doc))
            return true;
    } catch (const std::bad_alloc &) {
    }
    d->doc.SetNull(); /* values in the pool: nothing of theirs to free */
    d->values.Clear();
    return false;
}

} // namespace

json_doc *json_doc_parse(const char *text, size_t len, struct json_tokener **tok, char *err,
                         size_t errlen)
{
    json_doc *d = new (std::nothrow) json_doc;
    if (!d) {
        snprintf(err, errlen, "out of memory parsing the request JSON buffer");
        return nullptr;
    }
    if (read_plain(d, text, len))
        return d;
    struct json_tokener *once = nullptr;
    d->tree = json_parse_reusing(tok ? tok : &once, text, len, err, errlen);
    json_parse_tokener_free(&once);
    if (!d->tree) {
        delete d;
        return nullptr;
    }
    return d;
}

void json_doc_free(json_doc *d)
{
    if (d)
        json_object_put(d->tree);
    delete d;
}

const json_val *json_doc_root(const json_doc *d)
{
    return d->tree ? val_of_json_c(d->tree) : val_of(&d->doc);
}

const json_val *jv_get(const json_val *o, const char *key)
{
    if (from_json_c(o))
        return val_of_json_c(json_object_object_get(as_json_c(o), key));
    const value *v = as_value(o);
    if (!v || !v->IsObject())
        return nullptr;
    auto m = v->FindMember(key);
    return m == v->MemberEnd() ? nullptr : val_of(&m->value);
}

int jv_is_string(const json_val *v)
{
    if (from_json_c(v))
        return json_c_is(v, json_type_string);
    return v && as_value(v)->IsString();
}

int jv_is_object(const json_val *v)
{
    if (from_json_c(v))
        return json_c_is(v, json_type_object);
    return v && as_value(v)->IsObject();
}

int jv_is_array(const json_val *v)
{
    if (from_json_c(v))
        return json_c_is(v, json_type_array);
    return v && as_value(v)->IsArray();
}

int jv_is_bool(const json_val *v)
{
    if (from_json_c(v))
        return json_c_is(v, json_type_boolean);
    return v && as_value(v)->IsBool();
}

const char *jv_str(const json_val *v)
{
    if (!jv_is_string(v))
        return nullptr;
    return from_json_c(v) ? json_object_get_string(as_json_c(v)) : as_value(v)->GetString();
}

int jv_true(const json_val *v)
{
    if (from_json_c(v))
        return json_c_is(v, json_type_boolean) && json_object_get_boolean(as_json_c(v));
    return v && as_value(v)->IsTrue();
}

size_t jv_len(const json_val *v)
{
    if (!jv_is_array(v))
        return 0;
    return from_json_c(v) ? json_object_array_length(as_json_c(v)) : as_value(v)->Size();
}

const json_val *jv_at(const json_val *v, size_t i)
{
    if (i >= jv_len(v))
        return nullptr;
    if (from_json_c(v))
        return val_of_json_c(json_object_array_get_idx(as_json_c(v), i));
    return val_of(&(*as_value(v))[(rapidjson::SizeType)i]);
}

int jv_u64(const json_val *v, uint64_t *out)
{
    if (from_json_c(v))
        return json_get_u64(as_json_c(v), out);
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
    if (from_json_c(v)) {
        /* json-c reads an integer above INT64_MAX as INT64_MAX through the
         * signed accessor, so that one is checked twice */
        json_object *j = as_json_c(v);
        if (!json_c_is(v, json_type_int))
            return -1;
        int64_t x = json_object_get_int64(j);
        if (x == INT64_MAX && json_object_get_uint64(j) != (uint64_t)INT64_MAX)
            return -1;
        *out = x;
        return 0;
    }
    if (!v || !as_value(v)->IsInt64())
        return -1; /* an integer past INT64_MAX is a Uint64 only */
    *out = as_value(v)->GetInt64();
    return 0;
}

int jv_number(const json_val *v, double *out)
{
    if (from_json_c(v)) {
        if (!json_c_is(v, json_type_int) && !json_c_is(v, json_type_double))
            return -1;
        *out = json_object_get_double(as_json_c(v));
        return 0;
    }
    if (!v || !as_value(v)->IsNumber())
        return -1;
    *out = as_value(v)->GetDouble();
    return 0;
}
