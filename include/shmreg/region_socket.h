/*
 * libshmreg: regions passed over a Unix socket, for a server that takes
 * them from local clients and for those clients. Descriptor passing (one
 * or several descriptors and a payload in one frame), the memfd-region wire
 * format and the CUDA-region wire format, each with both halves: the
 * client's and the server's.
 *
 * A supplement of shmreg/shmreg.h, which includes it: a program that
 * includes shmreg/shmreg.h has these declarations already. The conventions
 * of shmreg/shmreg.h hold here too.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef SHMREG_REGION_SOCKET_H
#define SHMREG_REGION_SOCKET_H

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------- descriptor passing (VMM fds) */

/*
 * Send one descriptor and a payload (1..SHMREG_FD_PAYLOAD_MAX bytes, e.g. the
 * region name and size) over a connected AF_UNIX socket with SCM_RIGHTS.
 * The caller keeps fd. Errors: INVALID_ARG, SYSTEM.
 */
#define SHMREG_FD_PAYLOAD_MAX 4096
SHMREG_API shmreg_err shmreg_send_fd(int sock, int fd, const void *payload, size_t payload_size);

/*
 * Receive what shmreg_send_fd sent: *fd_out becomes a new descriptor the
 * caller owns, and up to cap payload bytes land in payload (*payload_size set).
 * Errors: INVALID_ARG, SYSTEM (recvmsg failed, the peer closed: "connection
 * closed", or a message that is not shmreg_send_fd's, whose descriptor is
 * closed), OUT_OF_BOUNDS (payload or control data truncated; any descriptor
 * received is closed), NOT_FOUND (a message carrying no descriptor; on a
 * stream socket its frame is read to its end, so the next call reads the
 * next message). The receiving socket may have SO_PASSCRED set: the
 * credentials the kernel adds beside the descriptor are passed over (read
 * the peer's with SO_PEERCRED).
 */
SHMREG_API shmreg_err shmreg_recv_fd(int sock, int *fd_out, void *payload, size_t cap,
                                     size_t *payload_size);

/*
 * 1.3. Several descriptors in one message: count descriptors
 * (1..SHMREG_FDS_MAX) and a payload (1..SHMREG_FD_PAYLOAD_MAX bytes) in one
 * frame, the descriptors in one SCM_RIGHTS message on its first byte, as
 * the chunks of a VMM range travel (shmreg_register_cuda_vmm_range). The
 * frame: an 8-byte header (uint32 SHMREG_FDS_FRAME_MAGIC, uint32 payload size), a
 * uint32 descriptor count and 4 zero bytes, then the payload; host byte
 * order. The caller keeps its descriptors. Errors: INVALID_ARG (a negative
 * socket or descriptor, a count or payload size out of range), SYSTEM.
 */
#define SHMREG_FDS_MAX 253
#define SHMREG_FDS_FRAME_MAGIC 0x53465253u /* "SRFS" in little-endian memory */
SHMREG_API shmreg_err shmreg_send_fds(int sock, const int *fds, size_t count, const void *payload,
                                      size_t payload_size);

/*
 * 1.3. Receive what shmreg_send_fds sent: fds[0..*count) become new
 * descriptors (close-on-exec) the caller owns, in the order sent, and the
 * payload lands in payload (*payload_size set). fd_cap is the room in fds;
 * a message with more descriptors than fd_cap, or than its header says, is
 * refused. On every failure no descriptor is left open: every one the
 * message carried is closed, and *count is 0. On a stream socket a refused
 * frame is read to its end, so that the next call reads the next message.
 * Credentials beside the descriptors (SO_PASSCRED) are passed over.
 * Errors: INVALID_ARG (NULL arguments, a negative socket, fd_cap or cap 0),
 * OUT_OF_BOUNDS (more descriptors than fd_cap or than the header says,
 * control data or payload truncated), NOT_FOUND (no descriptor), SYSTEM
 * (recvmsg failed, the peer closed: "connection closed", a message that is
 * not a shmreg_send_fds frame, fewer descriptors than the header says).
 */
SHMREG_API shmreg_err shmreg_recv_fds(int sock, int *fds, size_t fd_cap, size_t *count, void *payload,
                                      size_t cap, size_t *payload_size);

/* ------------------------------------ the memfd-region wire format (1.1) */

/*
 * How a client asks a server over an AF_UNIX socket to register a window of a
 * sealed memfd, and how the server answers. Both halves are here: the
 * client's (shmreg_memfd_create, shmreg_send_region, 1.1) and the server's
 * (shmreg_recv_region, shmreg_answer_region, 1.2); who may connect and how
 * many regions a peer may hold is the server's policy, not the format's.
 * The socket is SOCK_SEQPACKET, so that every request and answer is one
 * record. All integers are in host byte order: both ends are on one machine.
 *
 *   request: one shmreg_send_fd frame (8-byte header: uint32 0x46524853,
 *            uint32 payload size; then the payload) carrying the memfd, whose
 *            payload is SHMREG_REGION_REQUEST_HEADER bytes: uint32
 *            SHMREG_REGION_REQUEST_MAGIC, uint32 flags (SHMREG_READONLY,
 *            SHMREG_NO_PIN; no other bit), uint64 offset, uint64 byte_size;
 *            then the region name, 1..255 bytes, not NUL-terminated.
 *   answer:  one record of at most SHMREG_REGION_ANSWER_MAX bytes, ASCII:
 *            the code's name (shmreg_err_name: "SHMREG_OK",
 *            "SHMREG_ERR_INVALID_ARG", ...), one space, a message of one
 *            line (control characters are sent as spaces).
 *
 * A server typically registers the window (shmreg_register with
 * SHMREG_SOURCE_FD) under an owner tag of the connection and unregisters
 * every region of that tag when the connection closes, so that a client's
 * regions live exactly as long as its connection (and its process).
 */
#define SHMREG_REGION_REQUEST_MAGIC 0x31475253u /* "SRG1" in little-endian memory */
#define SHMREG_REGION_REQUEST_HEADER 24
#define SHMREG_REGION_ANSWER_MAX 1024

/*
 * Create a memfd of `size` bytes (zero-filled) that can never shrink or grow:
 * memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING), ftruncate, then the seals
 * F_SEAL_SHRINK | F_SEAL_GROW, so a server may map it without fear of
 * SIGBUS. debug_name (NULL: "shmreg") shows in /proc/PID/maps as
 * "/memfd:NAME"; it is cut to what memfd_create accepts. On success *fd_out
 * is a descriptor the caller owns (close it when done; the server keeps its
 * own mapping). F_SEAL_SEAL is not set: the caller may add write seals.
 * Errors: INVALID_ARG (fd_out NULL, size 0 or past off_t), SYSTEM
 * (memfd_create, ftruncate or fcntl failed; no descriptor is left open).
 */
SHMREG_API shmreg_err shmreg_memfd_create(const char *debug_name, size_t size, int *fd_out);

/*
 * The client side: ask the server at the other end of `sock` (a connected
 * SOCK_SEQPACKET AF_UNIX socket) to register [offset, offset + byte_size) of fd under
 * `name`, in the format above, and wait for its answer. OK when the server
 * registered it; otherwise the server's code, with its message as this
 * thread's shmreg_last_error(). The caller keeps fd (it may close it once
 * this returns OK: the server holds its own mapping) and the connection
 * (closing it unregisters every region sent over it). Blocks until the
 * answer comes: set SO_RCVTIMEO on sock to bound the wait.
 * Errors: INVALID_ARG (a negative socket or fd, name NULL, empty or longer
 * than 255 bytes), SYSTEM (sending failed, the server closed without an
 * answer, a wait past SO_RCVTIMEO, or an answer that is not this format),
 * and whatever the server answers (INVALID_ARG for an unsealed fd or a bad
 * name, ALREADY_EXISTS, OUT_OF_BOUNDS, NO_MEMORY for its limits, ...).
 */
SHMREG_API shmreg_err shmreg_send_region(int sock, const char *name, int fd, size_t offset,
                                         size_t byte_size, unsigned flags);

/* A register request as shmreg_recv_region received it, validated. */
typedef struct shmreg_region_request {
    int fd;             /* the memfd that came with it: the caller owns it */
    unsigned flags;     /* SHMREG_READONLY and/or SHMREG_NO_PIN, nothing else */
    size_t offset;      /* of the window in the memfd, as sent (any value) */
    size_t byte_size;   /* as sent (any value: registering checks it) */
    char name[256];     /* 1..255 bytes, NUL-terminated, no control characters */
    void *reserved_[4]; /* zeroed; room for later fields */
} shmreg_region_request;

/*
 * 1.2. The server side: receive one register request from `sock` (a
 * connected AF_UNIX socket; the format above) and check it: the frame
 * (shmreg_recv_fd's rules: exactly one descriptor, a whole frame), then the
 * payload's size, magic, flags and name. On OK, *out holds the request and
 * out->fd a new descriptor (close-on-exec) that the caller owns and closes
 * once it has registered the window (the registry keeps no descriptor).
 * On failure out->fd is -1, every descriptor the message carried is closed,
 * and the message (shmreg_last_error) is what to answer the client; on a
 * stream socket the refused frame is read to its end, so the next call
 * reads the next request. Blocks until a message comes, unless sock is
 * non-blocking (then SYSTEM with EAGAIN's text when none is queued).
 * Thread-safety: one receiver per socket at a time.
 * Errors: INVALID_ARG (sock negative or out NULL; a payload that is not a
 * request: shorter than its header or without a name, another magic, flags
 * other than SHMREG_READONLY | SHMREG_NO_PIN, a name with a NUL or a control
 * character), OUT_OF_BOUNDS (more than one descriptor, a payload longer than
 * a request with a 255-byte name), NOT_FOUND (no descriptor), SYSTEM (the
 * peer closed: "connection closed"; recvmsg failed; a message that is not a
 * shmreg_send_fd frame).
 */
SHMREG_API shmreg_err shmreg_recv_region(int sock, shmreg_region_request *out);

/*
 * 1.2. The server side: send the answer "<shmreg_err_name(code)> <msg>" as
 * one record on sock, cut to SHMREG_REGION_ANSWER_MAX bytes, control
 * characters as spaces. msg NULL is "". Never blocks (MSG_DONTWAIT) and
 * never raises SIGPIPE: a client whose socket cannot take the answer now is
 * one to drop (SYSTEM), not one to wait for.
 * Errors: INVALID_ARG (sock negative, a code outside shmreg_err), SYSTEM
 * (send failed or took only part of the answer; errno's text in the message).
 */
SHMREG_API shmreg_err shmreg_answer_region(int sock, shmreg_err code, const char *msg);

/* ------------------------------- the CUDA-region wire format (1.3) */

/*
 * How a client asks a server over an AF_UNIX socket to register GPU memory
 * it holds, whatever allocated it, and how the server reads the request.
 * The client's half (shmreg_send_cuda_region) finds which kind of
 * allocation holds a device pointer and sends what the server needs to
 * open it; the server's (shmreg_recv_cuda_region) receives and checks it;
 * the answer is the memfd-region format's (shmreg_answer_region). Host
 * byte order: both ends are on one machine.
 *
 *   request: one shmreg_send_fds frame carrying the allocation's
 *            descriptors (a VMM range: one per chunk, in address order; a
 *            pool allocation: the pool's; legacy IPC: none, the one kind
 *            of frame without a descriptor), whose payload is
 *            SHMREG_CUDA_REGION_REQUEST_HEADER bytes: uint32
 *            SHMREG_CUDA_REGION_REQUEST_MAGIC, uint32 flags
 *            (SHMREG_READONLY or 0), uint32 source (SHMREG_SOURCE_CUDA_IPC,
 *            _CUDA_VMM_RANGE or _CUDA_POOL), uint32 chunk count (a range:
 *            1..SHMREG_CUDA_CHUNKS_MAX, the descriptors' count; else 0),
 *            uint64 offset and uint64 byte_size of the window, the GPU's
 *            UUID in 40 characters ("GPU-..." or "MIG-...", no NUL), uint32
 *            name length (1..255), uint32 zero; then for legacy IPC the 64
 *            bytes of the handle, for a pool the 64 bytes of the
 *            allocation's export data, for a range one uint64 size per
 *            chunk; then the name, not NUL-terminated.
 *   answer:  as the memfd-region format's.
 */
#define SHMREG_CUDA_REGION_REQUEST_MAGIC 0x31435253u /* "SRC1" in little-endian memory */
#define SHMREG_CUDA_REGION_REQUEST_HEADER 80

/* A CUDA register request as shmreg_recv_cuda_region received it. */
typedef struct shmreg_cuda_region_request {
    shmreg_source source; /* SHMREG_SOURCE_CUDA_IPC, _CUDA_VMM_RANGE or _CUDA_POOL */
    unsigned flags;       /* SHMREG_READONLY or 0 */
    size_t offset;        /* the window in the allocation (or range), as sent */
    size_t byte_size;     /* as sent (registering checks both) */
    char device_uuid[41]; /* as sent, NUL-terminated (registering checks it) */
    unsigned char handle[64]; /* legacy IPC: the handle; pool: the export data */
    /* The descriptors that came with it, which the caller owns (close them
     * with shmreg_cuda_region_request_close): a range's chunks, or a pool's
     * one; fd_count 0 for legacy IPC. */
    int fds[SHMREG_CUDA_CHUNKS_MAX];
    size_t fd_count;
    size_t chunk_sizes[SHMREG_CUDA_CHUNKS_MAX]; /* a range: one per chunk */
    char name[256];     /* 1..255 bytes, NUL-terminated, no control characters */
    void *reserved_[4]; /* zeroed; room for later fields */
} shmreg_cuda_region_request;

/*
 * 1.3. The client side: register [ptr, ptr + byte_size) of this process's
 * GPU memory with the server at the other end of `sock` (a connected
 * AF_UNIX socket, SOCK_SEQPACKET as for shmreg_send_region) under `name`,
 * and wait for the answer. The driver says which kind of allocation holds
 * ptr: one of a stream-ordered pool (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
 * the pool's descriptor and the allocation's export data are sent; the
 * pool must have a POSIX-descriptor handle type, else UNSUPPORTED naming
 * the default pool), a VMM allocation (cuMemRetainAllocationHandle: the
 * descriptor of every chunk the window touches, found by walking the
 * address ranges from ptr's chunk, as PyTorch's expandable segments lay
 * them out; each chunk must have been created with a POSIX-descriptor
 * handle type), else legacy CUDA IPC (cuIpcGetMemHandle of the
 * allocation's start, and ptr's offset in it). The GPU is named by UUID,
 * so the server's CUDA_VISIBLE_DEVICES need not match this process's.
 * flags: SHMREG_READONLY or 0. The descriptors this call exports are
 * closed before it returns. The memory must stay allocated while the
 * server holds the region (see shmreg_register_cuda_pool for a pool's
 * contract). Blocks until the answer comes (SO_RCVTIMEO bounds it).
 * Errors: INVALID_ARG (a negative socket, ptr NULL, byte_size 0, a bad name
 * or flags, a pointer the driver does not know), UNSUPPORTED (no CUDA in
 * this build or process, memory that cannot be shared this way: the
 * message says why), CUDA (an export failed), SYSTEM (sending failed, no
 * answer), and whatever the server answers.
 */
SHMREG_API shmreg_err shmreg_send_cuda_region(int sock, const char *name, const void *ptr, size_t byte_size,
                                              unsigned flags);

/*
 * 1.3. The server side: receive one CUDA register request from `sock` and
 * check its form: the frame (shmreg_recv_fds's rules), the payload's magic,
 * flags, source, counts against the descriptors that came (a range: its
 * chunk count; a pool: one; legacy IPC: none), the name. The memory is not
 * touched: registering it (shmreg_cuda_region_registration, then
 * shmreg_register) checks the rest. On failure no descriptor is left open
 * and the message is what to answer the client. Blocks unless sock is
 * non-blocking. Thread-safety: one receiver per socket at a time.
 * Errors: INVALID_ARG (sock negative, out NULL, a payload that is not a
 * request: the message says which field), OUT_OF_BOUNDS (more descriptors
 * than a request has), NOT_FOUND (no descriptor where the kind needs them),
 * SYSTEM (the peer closed: "connection closed", recvmsg failed, a message
 * that is not a shmreg_send_fds frame).
 */
SHMREG_API shmreg_err shmreg_recv_cuda_region(int sock, shmreg_cuda_region_request *out);

/* 1.3. Fill r (after shmreg_registration_init; its tag and anything else
 * the server sets are left as they are) with the request's source, name,
 * flags, window, UUID, handle and descriptors, pointing into q: q must
 * outlive the shmreg_register call. NULL arguments: nothing is done. */
SHMREG_API void shmreg_cuda_region_registration(const shmreg_cuda_region_request *q, shmreg_registration *r);

/* 1.3. Close the descriptors q holds (fd_count becomes 0). NULL is a no-op. */
SHMREG_API void shmreg_cuda_region_request_close(shmreg_cuda_region_request *q);

#ifdef __cplusplus
}
#endif

#endif /* SHMREG_REGION_SOCKET_H */
