/* Helpers shared by the tests: shm objects to register, and counters that
 * prove a test left no descriptor or mapping behind. */
#ifndef SHMREG_TESTUTIL_H
#define SHMREG_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <shmreg/shmreg.h>

/* Open descriptors of this process (entries of /proc/self/fd). */
int tu_count_fds(void);

/* Mappings of POSIX shm objects in this process (/dev/shm lines of
 * /proc/self/maps); optionally only those of one key (NULL: all). */
int tu_count_shm_maps(const char *key);

/* Poll tu_count_shm_maps(key) until it is `want` or timeout_ms passed;
 * returns the last count. For mappings a reclaim thread unmaps after its
 * registry was destroyed. */
int tu_wait_shm_maps(const char *key, int want, int timeout_ms);

/* As tu_count_shm_maps, counting only mappings that allow writing. */
int tu_count_writable_shm_maps(const char *key);

/* For threaded tests: a monotonic clock in ns, and xorshift64, a cheap
 * per-thread generator (state must not be 0). */
uint64_t tu_now_ns(void);
static inline uint64_t tu_xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* What a test starts from; tu_check_baseline fails the test (cmocka) if
 * descriptors or shm mappings differ from it. */
struct tu_baseline {
    int fds;
    int shm_maps;
};
struct tu_baseline tu_take_baseline(void);
void tu_check_baseline(struct tu_baseline b);

/* A shm key no other process, alive or dead, has used:
 * "/<prefix>-<pid>-<16 random hex digits>". A key made of the pid and a
 * counter alone collides, under a reused pid, with an object that a crashed
 * earlier run left in /dev/shm. out must hold >= 64 bytes. */
void tu_unique_key(const char *prefix, char *out);

/* Create a new POSIX shm object of `size` bytes with a key unique to this
 * process ("/shmreg-test-<pid>-<n>"), fill byte i with tu_pattern(seed, i),
 * and copy the key (with its slash) to key_out (>= 64 bytes). Aborts the test
 * on failure. */
void tu_shm_create(size_t size, uint8_t seed, char *key_out);
void tu_shm_unlink(const char *key);
static inline uint8_t tu_pattern(uint8_t seed, size_t i)
{
#ifdef __cplusplus /* the C++ header's test builds with -Wold-style-cast */
    return static_cast<uint8_t>(seed + i * 7u + (i >> 8));
#else
    return (uint8_t)(seed + i * 7u + (i >> 8));
#endif
}

/* A memfd of `size` bytes filled with tu_pattern(seed, i), sealed with
 * `seals` (0: none; MFD_ALLOW_SEALING either way), close-on-exec. Aborts the
 * test on failure. */
int tu_memfd_create(size_t size, uint8_t seed, int seals);

/* Map the whole object `key` read-write in this process (the test's own view
 * of the bytes, independent of the registry). Unmap with munmap. */
void *tu_shm_map(const char *key, size_t size);

/* The tagged calls of the 1.0 idiom, in one line each (inline: the tests
 * link either the shared or the static library). */
static inline shmreg_err tu_register_system_tagged(shmreg_registry *reg, const char *name, const char *key,
                                                   size_t offset, size_t byte_size, unsigned flags,
                                                   const char *tag)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = name;
    r.key = key;
    r.offset = offset;
    r.byte_size = byte_size;
    r.flags = flags;
    r.tag = tag;
    return shmreg_register(reg, &r);
}

static inline shmreg_err tu_register_fd_tagged(shmreg_registry *reg, const char *name, int fd, size_t offset,
                                               size_t byte_size, unsigned flags, const char *tag)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_FD;
    r.name = name;
    r.fd = fd;
    r.offset = offset;
    r.byte_size = byte_size;
    r.flags = flags;
    r.tag = tag;
    return shmreg_register(reg, &r);
}

static inline shmreg_filter tu_filter(const char *name, shmreg_kind kind, const char *tag)
{
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = name;
    f.kind = kind;
    f.tag = tag;
    return f;
}

static inline shmreg_err tu_unregister_tagged(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                              const char *tag)
{
    shmreg_filter f = tu_filter(name, kind, tag);
    return shmreg_unregister_matching(reg, &f);
}

static inline shmreg_err tu_status_tagged(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                          const char *tag, shmreg_region_status **out, size_t *count)
{
    shmreg_filter f = tu_filter(name, kind, tag);
    return shmreg_status_matching(reg, &f, out, count);
}

#endif
