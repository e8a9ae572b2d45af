/* An inference request header in a RapidJSON document: json_doc.h says why,
 * and when json-c reads the text instead. */
#include "common/json_doc.h"

#include <climits>
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
using document = rapidjson::GenericDocument<rapidjson::UTF8<>, pool, pool>;
using value = document::ValueType;

/* A short inference's header (`simple`: two inputs of 16 elements and two
 * outputs) takes about 1.5 KiB of values and a few hundred bytes of parse
 * stack: both start inside the document, and only a larger header takes
 * chunks of CHUNK bytes (or its size) from malloc. */
constexpr size_t VALUES_INLINE = 4096, STACK_INLINE = 2048, STACK_FIRST = 1024;
constexpr size_t CHUNK = 64 * 1024;

/* Nesting that RapidJSON reads itself (recursively): a request nests about
 * five deep, json-c refuses past 32, and deeper texts go to json-c. */
constexpr int MAX_DEPTH = 16;
/* Objects with more members go to json-c, whose keys are unique by
 * construction, rather than be checked for repeats pair by pair. */
constexpr rapidjson::SizeType MAX_MEMBERS = 32;
/* Digits in a row that always fit 64 bits (as json_io.c's check). */
constexpr size_t MAX_DIGITS = 18;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether the text is one that RapidJSON reads as json-c does (json_doc.h):
 * one object with nothing around it, printable ASCII and JSON's whitespace
 * only, no backslash, nesting and digit runs within bounds. Strings hold no
 * escape, so a quote always opens or closes one. */
bool plain_text(const char *s, size_t len)
{
    if (len < 2 || len > INT_MAX || s[0] != '{' || s[len - 1] != '}')
        return false;
    int depth = 0;
    bool in_string = false;
    size_t digits = 0;
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

/* json-c's value j into out, with the allocator of out's document. */
void copy_json_c(value &out, json_object *j, pool &a)
{
    switch (json_object_get_type(j)) {
    case json_type_null:
        out.SetNull();
        break;
    case json_type_boolean:
        out.SetBool(json_object_get_boolean(j) != 0);
        break;
    case json_type_int:
        /* json-c keeps an integer as int64, or as uint64 past INT64_MAX */
        if (json_object_get_int64(j) < 0)
            out.SetInt64(json_object_get_int64(j));
        else
            out.SetUint64(json_object_get_uint64(j));
        break;
    case json_type_double:
        out.SetDouble(json_object_get_double(j));
        break;
    case json_type_string:
        out.SetString(json_object_get_string(j), (rapidjson::SizeType)json_object_get_string_len(j),
                      a);
        break;
    case json_type_array: {
        size_t n = json_object_array_length(j);
        out.SetArray();
        out.Reserve((rapidjson::SizeType)n, a);
        for (size_t i = 0; i < n; i++) {
            value v;
            copy_json_c(v, json_object_array_get_idx(j, i), a);
            out.PushBack(v, a);
        }
        break;
    }
    case json_type_object:
        out.SetObject();
        json_object_object_foreach(j, key, member) {
            value k(key, a), v;
            copy_json_c(v, member, a);
            out.AddMember(k, v, a);
        }
        break;
    }
}

const value *as_value(const json_val *v)
{
    return reinterpret_cast<const value *>(v);
}

const json_val *as_val(const value *v)
{
    return v && !v->IsNull() ? reinterpret_cast<const json_val *>(v) : nullptr;
}

} // namespace

struct json_doc {
    throwing_allocator base;
    alignas(max_align_t) char values_inline[VALUES_INLINE];
    alignas(max_align_t) char stack_inline[STACK_INLINE];
    pool values{values_inline, sizeof values_inline, CHUNK, &base};
    pool stack{stack_inline, sizeof stack_inline, CHUNK, &base};
    document doc{&values, STACK_FIRST, &stack};
};

namespace {

/* RapidJSON's reading of a plain text, or false (nothing read). */
bool read_plain(json_doc *d, const char *text, size_t len)
{
    if (!plain_text(text, len))
        return false;
    d->doc.Parse<rapidjson::kParseFullPrecisionFlag>(text, len);
    return !d->doc.HasParseError() && d->doc.IsObject() && keys_unique(d->doc);
}

/* json-c's reading, copied into the document; false with json_parse's
 * message in err. */
bool read_json_c(json_doc *d, const char *text, size_t len, struct json_tokener **tok, char *err,
                 size_t errlen)
{
    struct json_tokener *once = nullptr;
    json_object *j = json_parse_reusing(tok ? tok : &once, text, len, err, errlen);
    json_parse_tokener_free(&once);
    if (!j)
        return false;
    try {
        d->doc.SetNull();
        copy_json_c(d->doc, j, d->values);
    } catch (const std::bad_alloc &) {
        json_object_put(j);
        throw;
    }
    json_object_put(j);
    return true;
}

} // namespace

json_doc *json_doc_parse(const char *text, size_t len, struct json_tokener **tok, char *err,
                         size_t errlen)
{
    json_doc *d = new (std::nothrow) json_doc;
    if (d) {
        try {
            if (read_plain(d, text, len) || read_json_c(d, text, len, tok, err, errlen))
                return d;
            delete d;
            return nullptr;
        } catch (const std::bad_alloc &) {
            delete d;
        }
    }
    snprintf(err, errlen, "out of memory parsing the request JSON buffer");
    return nullptr;
}

void json_doc_free(json_doc *d)
{
    delete d;
}

const json_val *json_doc_root(const json_doc *d)
{
    return as_val(&d->doc);
}

const json_val *jv_get(const json_val *o, const char *key)
{
    const value *v = as_value(o);
    if (!v || !v->IsObject())
        return nullptr;
    auto m = v->FindMember(key);
    return m == v->MemberEnd() ? nullptr : as_val(&m->value);
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
    return as_val(&(*as_value(v))[(rapidjson::SizeType)i]);
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
