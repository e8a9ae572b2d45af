/*
 * libshmreg: handing a registry's regions to another process, for a server
 * that restarts or upgrades without making its clients register again.
 *
 * The old process saves its registry's state (shmreg_state_save): a blob in
 * a sealed memfd, and the descriptors the blob refers to. The new process
 * restores a registry from them (shmreg_state_restore). Between the two the
 * application moves the blob and the descriptors as it likes; or both sides
 * use the socket pair built on them (shmreg_handover_send and
 * shmreg_handover_receive), which also carries the application's own
 * descriptors (its listening socket, its client connections) and bytes.
 *
 * What is carried, per kind of region (docs/handover.md):
 *  - a descriptor region (shmreg_register_system_fd): the registry's own
 *    descriptor of it, duplicated; the receiver registers it again with
 *    every check registration makes (type, owner, seals, size);
 *  - a POSIX shm key (shmreg_register_system): the key, window and the
 *    object's device and inode as fstat gave them at registration; the
 *    receiver opens the key again with every check registration makes, and
 *    refuses an object that is not the one saved (SHMREG_ERR_NOT_FOUND for
 *    that region alone);
 *  - a CUDA VMM descriptor, VMM range or pool allocation
 *    (shmreg_register_cuda_fd, _vmm_range, _pool): the registry's own
 *    descriptors of it, duplicated, with the chunk sizes, the pool
 *    allocation's export data, the device's ordinal and UUID; a legacy CUDA
 *    IPC region (shmreg_register_cuda_ipc): its 64-byte handle, ordinal and
 *    UUID. The receiver registers each again with every check registration
 *    makes, on the GPU of the saved UUID in its own numbering (as
 *    shmreg_registration.device_uuid names one): a GPU it does not see, an
 *    import the driver refuses, or a legacy IPC handle whose exporter has
 *    exited since fails for that region alone. Saving makes no CUDA call;
 *    neither side makes one for a registry without CUDA regions;
 *  - remote regions: not carried (their connections cannot be): counted as
 *    skipped.
 * Names, tags, windows and flags are carried. Pinned state and the
 * registration cache are not: the new registry pins by its own pin policy as
 * it registers, and starts with a cold cache. Regions pending unregister are
 * not carried. References are not carried: every restored region starts
 * with none, so the old process lets its requests finish first (unregister
 * under SHMREG_POLICY_DEFER, wait for the last release).
 *
 * The blob is versioned (SHMREG_STATE_VERSION). A reader refuses a version
 * it does not know (SHMREG_ERR_UNSUPPORTED, the message naming both) and
 * never guesses at it; it reads the blob and the peer as untrusted: a
 * malformed or altered blob, or descriptors that do not match it, is
 * refused whole (SHMREG_ERR_INVALID_ARG), with nothing registered and every
 * descriptor closed.
 *
 * A supplement of shmreg/shmreg.h, which includes it. The conventions of
 * shmreg/shmreg.h hold here too.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef SHMREG_HANDOVER_H
#define SHMREG_HANDOVER_H

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the state blob this library writes, and the only one it
 * reads. */
#define SHMREG_STATE_VERSION 2

/* The largest blob a restore reads, and the most descriptors one handover
 * carries (regions' and the application's together). */
#define SHMREG_STATE_BLOB_MAX ((size_t)64 << 20)
#define SHMREG_HANDOVER_FDS_MAX 65536

/* One of the application's own descriptors, carried beside the regions,
 * under a name of its choosing (1..63 bytes and its NUL). */
typedef struct shmreg_handover_fd {
    char name[64];
    int fd;
} shmreg_handover_fd;

/*
 * 1.4. Save reg's state: on success *blob_fd is a memfd sealed against every
 * change (F_SEAL_WRITE, _SHRINK, _GROW, _SEAL) holding the blob, and
 * (*fds)[0, *nfds) the descriptors it refers to, each a new descriptor
 * (close-on-exec). The caller owns all of them, and *fds (NULL when *nfds is
 * 0), which it frees with free(). app_state: app_len bytes of the
 * application's own (which client owns which region...), copied into the
 * blob and handed back by the restore; NULL when app_len is 0.
 *
 * The regions are read in one pass under the registry's lock, so the state
 * is one moment's; registrations and unregistrations may go on meanwhile,
 * and acquire never waits. The registry is not changed. A registry without
 * CUDA regions never reaches CUDA here.
 * Errors: INVALID_ARG (NULL arguments, app_state NULL with app_len > 0),
 * NO_MEMORY (also: a blob past SHMREG_STATE_BLOB_MAX, or more descriptors
 * than SHMREG_HANDOVER_FDS_MAX), SYSTEM (memfd_create, write, fcntl: the
 * message names the call). On failure no descriptor is left open.
 */
SHMREG_API shmreg_err shmreg_state_save(shmreg_registry *reg, const void *app_state, size_t app_len, int *blob_fd,
                                        int **fds, size_t *nfds);

/* A region of the blob that was not restored. */
typedef struct shmreg_restore_entry {
    const char *name;    /* the region's name */
    const char *tag;     /* its owner tag, or NULL */
    shmreg_err err;      /* why: what its registration answered, UNSUPPORTED for
                            a kind not carried */
    const char *message; /* the registration's message */
    int skipped;         /* 1: not carried on purpose (a remote region) */
} shmreg_restore_entry;

/* What a restore did. Every string and array lives in it until
 * shmreg_restore_report_free. */
typedef struct shmreg_restore_report {
    size_t restored; /* regions registered again */
    size_t failed;   /* regions whose registration failed (entries say why) */
    size_t skipped;  /* regions not carried (remote) */
    void *app_state; /* the saver's app_state, copied; NULL when app_len is 0 */
    size_t app_len;
    shmreg_restore_entry *entries; /* failed + skipped of them, in the blob's order */
    size_t entry_count;
} shmreg_restore_report;

/*
 * 1.4. Restore into reg (empty or not) the regions of a state that
 * shmreg_state_save wrote: blob_fd the blob's memfd, fds[0, nfds) the
 * descriptors, in the order the save gave them. Takes ownership of blob_fd
 * and of every descriptor of fds: each is closed before this returns, on
 * every path (a restored descriptor region keeps a descriptor of its own).
 *
 * Each region is registered as shmreg_register registers it, under reg's
 * configuration (owner allow-list, reserved keys, seals, limits, quotas,
 * pin policy), with its name, tag, window and flags, and starts with no
 * reference. A region that fails (its name taken in reg, an object gone or
 * replaced, a limit) fails alone: the others are restored, and *out lists
 * it with its code and message. The call then returns OK.
 *
 * Refused whole, registering nothing (the blob is checked in full first):
 * blob_fd not a sealed memfd (F_SEAL_WRITE and F_SEAL_SHRINK), larger than
 * SHMREG_STATE_BLOB_MAX, a blob that is not one or altered (its checksum),
 * truncated, with lengths or indexes out of range, nfds other than what the
 * blob refers to, a descriptor of a region that is not a regular file.
 * On success *out is the report, freed with shmreg_restore_report_free; on
 * failure *out is NULL. Any thread; concurrent calls on reg are safe.
 * Errors: INVALID_ARG (NULL or negative arguments, a malformed blob or
 * descriptors), UNSUPPORTED (a blob version this library does not read: the
 * message names both), SYSTEM (fstat, fcntl, read of the blob), NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_state_restore(shmreg_registry *reg, int blob_fd, const int *fds, size_t nfds,
                                           shmreg_restore_report **out);

/* Free a report. NULL is a no-op. */
SHMREG_API void shmreg_restore_report_free(shmreg_restore_report *r);

/*
 * 1.4. Save reg's state (shmreg_state_save) and send it over sock, a
 * connected AF_UNIX SOCK_STREAM socket: the blob, the regions' descriptors
 * and extra[0, n_extra) (the application's own, by name), in frames of at
 * most SHMREG_FDS_MAX descriptors. Blocks until all is sent; the peer calls
 * shmreg_handover_receive. The caller keeps sock and every extra
 * descriptor; the blob and the duplicates the save made are closed here.
 * reg is not changed.
 * Errors: as shmreg_state_save; INVALID_ARG (a negative socket or
 * descriptor, a name that is empty or not NUL-terminated in its 64 bytes,
 * extra NULL with n_extra > 0), SYSTEM (sendmsg).
 */
SHMREG_API shmreg_err shmreg_handover_send(shmreg_registry *reg, int sock, const void *app_state, size_t app_len,
                                           const shmreg_handover_fd *extra, size_t n_extra);

/*
 * 1.4. Receive what shmreg_handover_send sent over sock and restore it into
 * reg (shmreg_state_restore's rules, its report in *out). The peer must be
 * a process of this process's effective uid (SO_PEERCRED): another uid is
 * refused before anything is read (INVALID_ARG), since the state hands it
 * every region's memory. A program that must take a state from another uid
 * moves it itself and calls shmreg_state_restore.
 * On success *extra is an array of *n_extra descriptors the caller owns,
 * with their names (NULL when none), freed with free(). On failure nothing
 * is restored, *out and *extra are NULL, and every descriptor received has
 * been closed (those of a frame whose control data was cut short too).
 * Errors: as shmreg_state_restore; INVALID_ARG (a peer of another uid, a
 * message that is not this protocol's), UNSUPPORTED (a protocol version
 * this library does not speak), SYSTEM (recvmsg, the peer closed early).
 */
SHMREG_API shmreg_err shmreg_handover_receive(shmreg_registry *reg, int sock, shmreg_restore_report **out,
                                              shmreg_handover_fd **extra, size_t *n_extra);

#ifdef __cplusplus
}
#endif

#endif /* SHMREG_HANDOVER_H */
