/* --tenants FILE: loading, checking and looking up bearer tokens. */
#include "core/tenants.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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
} tenant_entry;

struct tenants {
    tenant_entry *entries;
    size_t n, cap;
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

const char *tenants_find(const tenants *t, const char *token, size_t len)
{
    const char *found = NULL;
    for (size_t i = 0; t && i < t->n; i++) /* no break: every token is compared */
        if (tokens_equal(t->entries[i].token, t->entries[i].token_len, token, len))
            found = t->entries[i].name;
    return found;
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

/* Tenant names become region-name prefixes and log words: a small alphabet,
 * and never '/', which separates the prefix from the client's name. */
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
                     size_t name_len)
{
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
    t->n++;
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

static int parse_line(tenants *t, const char *path, unsigned no, const char *line)
{
    const char *p = line;
    size_t token_len, name_len, extra_len;
    const char *token = next_field(&p, &token_len);
    if (token_len == 0 || token[0] == '#')
        return 0; /* blank or comment */
    const char *name = next_field(&p, &name_len);
    next_field(&p, &extra_len);
    if (name_len == 0 || extra_len != 0)
        return bad_line(path, no, "want two fields, TOKEN TENANT");
    if (token_len < TOKEN_MIN || token_len > TOKEN_MAX || !is_token(token, token_len))
        return bad_line(path, no, "a token must be %d..%d characters of A-Z a-z 0-9 - . _ ~ + / "
                                  "(then any '='s)", TOKEN_MIN, TOKEN_MAX);
    if (!is_tenant_name(name, name_len))
        return bad_line(path, no, "a tenant name must be 1..%d characters of A-Z a-z 0-9 - . _",
                        TENANT_NAME_MAX);
    if (tenants_find(t, token, token_len))
        return bad_line(path, no, "this token is already given to a tenant above");
    if (add_entry(t, token, token_len, name, name_len) != 0)
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
