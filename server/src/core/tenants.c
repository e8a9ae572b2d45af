/* --tenants FILE: loading, checking and looking up bearer tokens. */
#include "core/tenants.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A token shorter than this is too easy to guess over the network. */
#define TOKEN_MIN 16
#define TOKEN_MAX 512

typedef struct tenant_entry {
    char *token;
    size_t token_len;
    char name[TENANT_NAME_MAX + 1];
    size_t no;         /* the tenant's number: its tokens share it */
    int has_quota;     /* TENANT_QUOTA_* bits: the max-*=N fields its line gave */
    shmreg_quota quota; /* those; 0 = unlimited */
} tenant_entry;

struct tenants {
    tenant_entry *entries;
    size_t n, cap;
    size_t tenants; /* distinct names among the entries */
};

int tokens_equal(const char *want, size_t want_len, const char *given, size_t given_len)
{
    /* Every byte of want is visited whatever given holds: no early exit
     * tells a client how many leading bytes of its guess were right. */
    volatile unsigned char diff = (unsigned char)(want_len != given_len);
    for (size_t i = 0; i < want_len; i++)
        diff |= (unsigned char)(want[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

const char *tenants_find(const tenants *t, const char *token, size_t len, size_t *no)
{
    const tenant_entry *found = NULL;
    for (size_t i = 0; t && i < t->n; i++) /* no break: every token is compared */
        if (tokens_equal(t->entries[i].token, t->entries[i].token_len, token, len))
            found = &t->entries[i];
    if (found && no)
        *no = found->no;
    return found ? found->name : NULL;
}

size_t tenants_count(const tenants *t)
{
    return t ? t->tenants : 0;
}

/* The line of another token of the same tenant, if any. */
static const tenant_entry *same_tenant(const tenants *t, const char *name, size_t name_len)
{
    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->entries[i].name) == name_len && memcmp(t->entries[i].name, name, name_len) == 0)
            return &t->entries[i];
    return NULL;
}

void tenants_each(const tenants *t,
                  void (*fn)(void *ctx, const char *tenant, int given, const shmreg_quota *own), void *ctx)
{
    for (size_t i = 0; t && i < t->n; i++) {
        const tenant_entry *e = &t->entries[i];
        if (same_tenant(t, e->name, strlen(e->name)) == e) /* its first line */
            fn(ctx, e->name, e->has_quota, &e->quota);
    }
}

void tenants_free(tenants *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        explicit_bzero(t->entries[i].token, t->entries[i].token_len);
        free(t->entries[i].token);
    }
    free(t->entries);
    free(t);
}

/* ------------------------------------------------------------- the file */

static int bad_line(const char *path, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad_line(const char *path, unsigned line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: --tenants %s:%u: ", path, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static int is_alnum(char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* RFC 6750's b64token: what may follow "Bearer " in a header. */
static int is_token(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && (is_alnum(s[i]) || (s[i] && strchr("-._~+/", s[i]))))
        i++;
    if (i == 0)
        return 0;
    while (i < len && s[i] == '=')
        i++;
    return i == len;
}

/* Tenant names become the library's owner tags (each tenant's namespace)
 * and log words: a small alphabet. */
static int is_tenant_name(const char *s, size_t len)
{
    if (len == 0 || len > TENANT_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && !(s[i] && strchr("-._", s[i])))
            return 0;
    return 1;
}

static int add_entry(tenants *t, const char *token, size_t token_len, const char *name,
                     size_t name_len, const tenant_entry *quota)
{
    const tenant_entry *other = same_tenant(t, name, name_len); /* before realloc moves it */
    int first = other == NULL;
    size_t no = first ? t->tenants : other->no;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        tenant_entry *grown = realloc(t->entries, cap * sizeof *grown);
        if (!grown)
            return -1;
        t->entries = grown;
        t->cap = cap;
    }
    tenant_entry *e = &t->entries[t->n];
    e->token = malloc(token_len);
    if (!e->token)
        return -1;
    memcpy(e->token, token, token_len);
    e->token_len = token_len;
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    e->has_quota = quota->has_quota;
    e->quota = quota->quota;
    e->no = no;
    t->n++;
    t->tenants += first;
    return 0;
}

/* The next whitespace-separated field of *p, or length 0 at the end. */
static const char *next_field(const char **p, size_t *len)
{
    const char *s = *p + strspn(*p, " \t\r\n");
    *len = strcspn(s, " \t\r\n");
    *p = s + *len;
    return s;
}

/* One "max-...=N" field into e's quota; -1 when it is not one. */
static int parse_quota_field(tenant_entry *e, const char *f, size_t len)
{
    static const struct {
        const char *key;
        size_t offset;
    } keys[] = {{"max-regions=", offsetof(shmreg_quota, max_regions)},
                {"max-mapped-bytes=", offsetof(shmreg_quota, max_mapped_bytes)},
                {"max-pinned-bytes=", offsetof(shmreg_quota, max_pinned_bytes)}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t klen = strlen(keys[k].key);
        if (len <= klen || len - klen > 19 || memcmp(f, keys[k].key, klen) != 0)
            continue;
        size_t v = 0;
        for (size_t i = klen; i < len; i++) {
            if (f[i] < '0' || f[i] > '9')
                return -1;
            v = v * 10 + (size_t)(f[i] - '0');
        }
        memcpy((char *)&e->quota + keys[k].offset, &v, sizeof v);
        e->has_quota |= 1 << k;
        return 0;
    }
    return -1;
}

static int parse_line(tenants *t, const char *path, unsigned no, const char *line)
{
    const char *p = line;
    size_t token_len, name_len, extra_len;
    const char *token = next_field(&p, &token_len);
    if (token_len == 0 || token[0] == '#')
        return 0; /* blank or comment */
    const char *name = next_field(&p, &name_len);
    if (name_len == 0)
        return bad_line(path, no, "want TOKEN TENANT, then optionally max-regions=N max-mapped-bytes=N "
                                  "max-pinned-bytes=N");
    tenant_entry quota = {.has_quota = 0};
    shmreg_quota_init(&quota.quota);
    for (const char *extra = next_field(&p, &extra_len); extra_len; extra = next_field(&p, &extra_len))
        if (parse_quota_field(&quota, extra, extra_len) != 0)
            return bad_line(path, no, "'%.*s': after TOKEN TENANT only max-regions=N, max-mapped-bytes=N "
                                      "and max-pinned-bytes=N may follow", (int)(extra_len > 64 ? 64 : extra_len),
                            extra);
    if (token_len < TOKEN_MIN || token_len > TOKEN_MAX || !is_token(token, token_len))
        return bad_line(path, no, "a token must be %d..%d characters of A-Z a-z 0-9 - . _ ~ + / "
                                  "(then any '='s)", TOKEN_MIN, TOKEN_MAX);
    if (!is_tenant_name(name, name_len))
        return bad_line(path, no, "a tenant name must be 1..%d characters of A-Z a-z 0-9 - . _",
                        TENANT_NAME_MAX);
    if (tenants_find(t, token, token_len, NULL))
        return bad_line(path, no, "this token is already given to a tenant above");
    const tenant_entry *other = same_tenant(t, name, name_len);
    if (other && (other->has_quota != quota.has_quota ||
                  memcmp(&other->quota, &quota.quota, sizeof quota.quota) != 0))
        return bad_line(path, no, "tenant %s's quota differs from its line above", other->name);
    if (add_entry(t, token, token_len, name, name_len, &quota) != 0)
        return bad_line(path, no, "out of memory");
    return 0;
}

/* Tokens are secrets: a file that other users may read (or write: then they
 * could add their own) is refused rather than trusted. */
static int check_file(const char *path, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "error: --tenants %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "error: --tenants %s: not a regular file\n", path);
        return -1;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        fprintf(stderr, "error: --tenants %s: other users can %s it (mode %04o); it holds "
                        "secrets: chmod o-rwx %s\n",
                path, st.st_mode & S_IROTH ? "read" : "write", (unsigned)(st.st_mode & 07777),
                path);
        return -1;
    }
    return 0;
}

static int read_lines(tenants *t, const char *path, FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    unsigned no = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        no++;
        rc = strlen(line) > 4 * TOKEN_MAX ? bad_line(path, no, "line too long")
                                          : parse_line(t, path, no, line);
    }
    if (line)
        explicit_bzero(line, cap);
    free(line);
    if (rc == 0 && t->n == 0) {
        fprintf(stderr, "error: --tenants %s: no tenant in the file\n", path);
        rc = -1;
    }
    return rc;
}

tenants *tenants_load(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "error: --tenants %s: %s\n", path, strerror(errno));
        return NULL;
    }
    FILE *f = check_file(path, fd) == 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        close(fd);
        return NULL;
    }
    tenants *t = calloc(1, sizeof *t);
    if (!t || read_lines(t, path, f) != 0) {
        if (!t)
            fprintf(stderr, "error: --tenants %s: out of memory\n", path);
        tenants_free(t);
        t = NULL;
    }
    fclose(f);
    return t;
}
