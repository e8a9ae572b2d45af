/* The state blob's format, both halves: the writer that shmreg_state_save
 * fills and the reader that shmreg_state_restore checks, in one file
 * (state_blob.c), so that they cannot drift apart.
 *
 * Host byte order: a handover is between processes of one machine.
 *
 *   header, 64 bytes:
 *     0  magic "SHMREGST"      8  u32 version (SHMREG_STATE_VERSION)
 *     12 u32 header size (64)  16 u64 body size
 *     24 u32 records           28 u32 region descriptors
 *     32 u32 extra descriptors 36 u32 zero
 *     40 u64 app_state bytes   48 u64 checksum   56 u64 zero
 *   body: the records, then 64 bytes of name per extra descriptor, then
 *   the app_state bytes.
 *   record, 56 bytes and its strings:
 *     u32 size, u32 source, u32 flags, i32 descriptor index (-1: none),
 *     u64 offset, u64 byte_size, u64 device, u64 inode,
 *     u16 name length, u16 tag length, u16 key length, u16 bits (1: the
 *     object's device and inode are known); then the name, the tag and the
 *     key, each with its NUL, a length 0 meaning absent (the name is never);
 *     then, for a CUDA source only, 96 bytes:
 *       i32 device ordinal (the saver's), u32 chunks (its descriptors: 0 for
 *       legacy IPC, 1 for a VMM descriptor or a pool, 1..253 for a VMM
 *       range), u32 bits (1: the UUID is known, 2: its text starts "MIG-"),
 *       u32 zero, 16 bytes of the device's UUID, 64 bytes of handle (the
 *       legacy IPC handle, or the pool allocation's export data; zero for
 *       the others);
 *     and for a VMM range, u64 size of each chunk.
 *   A record's descriptors are consecutive: a descriptor region has one, a
 *   CUDA record `chunks`, the others none.
 *
 * The checksum is XXH3-64 of the header (its checksum field zero) and the
 * body: it catches a blob altered or cut, not an attacker, who would write
 * a valid one; what makes a valid blob harmless is that every region in it
 * passes registration's checks again. Region descriptors are numbered in
 * record order (a record's first is its descriptor index), the extra
 * descriptors after them. */
#ifndef SHMREG_HANDOVER_STATE_BLOB_H
#define SHMREG_HANDOVER_STATE_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "shmreg/shmreg.h"

#define SHMREG__STATE_HANDLE 64 /* a legacy IPC handle, a pool's export data */

/* What a CUDA record holds beside the common fields. */
struct shmreg__state_cuda {
    int device_id;    /* the saver's ordinal */
    bool uuid_known;  /* uuid holds the device's UUID */
    bool mig;         /* its text starts "MIG-" */
    unsigned char uuid[16];
    unsigned char handle[SHMREG__STATE_HANDLE];
    size_t chunks;    /* its descriptors (a VMM range's chunks) */
    /* A VMM range: `chunks` sizes, u64 in host order, not aligned (in the
     * blob, or the saver's array); NULL for the other sources. */
    const unsigned char *chunk_sizes;
};

/* One region as the blob holds it. Strings: the writer's point at the
 * registry's, the reader's into the blob (NUL-terminated there). */
struct shmreg__state_record {
    shmreg_source source;
    unsigned flags;
    long fd_index; /* the reader's: its first descriptor, -1 for none; the
                      writer numbers them itself */
    size_t offset, byte_size;
    bool object_known;
    struct shmreg__object_id object;
    const char *name, *tag, *key; /* tag and key may be NULL */
    struct shmreg__state_cuda cuda; /* a CUDA source's */
};

/* Whether a source's records have the CUDA part. */
bool shmreg__state_is_cuda(shmreg_source source);
/* How many descriptors a record refers to. */
size_t shmreg__state_record_fds(const struct shmreg__state_record *rec);
/* Chunk i's size of a VMM range record. */
uint64_t shmreg__state_chunk_size(const struct shmreg__state_record *rec, size_t i);

/* ---- writing */

struct shmreg__state_writer {
    unsigned char *buf; /* the header's room, then the body */
    size_t len, cap;
    uint32_t records, region_fds;
    bool failed; /* out of memory, or past SHMREG_STATE_BLOB_MAX */
};

void shmreg__state_writer_init(struct shmreg__state_writer *w);
/* Append n bytes (sets failed when it cannot). */
void shmreg__state_writer_put(struct shmreg__state_writer *w, const void *p, size_t n);
void shmreg__state_writer_free(struct shmreg__state_writer *w);
/* Append a record; its descriptors are numbered after the previous
 * records' (shmreg__state_record_fds of them). */
void shmreg__state_write_record(struct shmreg__state_writer *w, const struct shmreg__state_record *rec);
/* Append the extra descriptors' names and the app_state, and fill the
 * header; then buf[0, len) is the blob. NO_MEMORY when w failed. */
shmreg_err shmreg__state_write_finish(struct shmreg__state_writer *w, const shmreg_handover_fd *extra,
                                      size_t n_extra, const void *app, size_t app_len);

/* ---- reading */

struct shmreg__state {
    unsigned char *buf; /* the blob, owned */
    size_t len;
    struct shmreg__state_record *records; /* owned */
    size_t record_count, region_fds, extra_count;
    const char *extra_names; /* extra_count slots of 64 bytes, in buf */
    const unsigned char *app;
    size_t app_len;
};

/* Read and check the whole blob of fd (not closed): a sealed memfd, every
 * length and index in range, the checksum. On failure nothing is kept. */
shmreg_err shmreg__state_read(int fd, struct shmreg__state *out);
void shmreg__state_free(struct shmreg__state *s);

#endif
