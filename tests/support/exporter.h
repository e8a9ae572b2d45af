/* A second process that owns GPU memory and exports it, as an inference
 * client does: legacy CUDA IPC handles (cudaIpcGetMemHandle) or VMM
 * allocations exported as POSIX descriptors (cuMemCreate +
 * cuMemExportToShareableHandle), which it sends with shmreg_send_fd.
 *
 * CUDA IPC handles cannot be opened by the process that made them, and a
 * process that forks after initialising CUDA cannot use CUDA in the child, so
 * gt_exporter_start must run before the calling process makes any CUDA call.
 * Used by the GPU tests and by shmreg-bench-gpu; no cmocka in here. */
#ifndef SHMREG_TESTS_GPU_EXPORTER_H
#define SHMREG_TESTS_GPU_EXPORTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* GT_KIND_VMM_CHUNKS: several cuMemCreate chunks mapped back to back in
 * the exporter (as PyTorch's expandable segments are), each exported as a
 * descriptor, all sent in one shmreg_send_fds message. GT_KIND_POOL: an
 * allocation of a pool created with a POSIX-descriptor handle type
 * (cudaMallocFromPoolAsync): the pool's descriptor, and the allocation's
 * cudaMemPoolPtrExportData in `ipc`. */
enum gt_kind { GT_KIND_IPC = 0, GT_KIND_VMM = 1, GT_KIND_VMM_CHUNKS = 2, GT_KIND_POOL = 3 };

#define GT_CHUNKS_MAX 8

struct gt_exporter {
    pid_t pid;
    int sock; /* SOCK_SEQPACKET to the child */
};

/* One exported allocation, as this process received it. */
struct gt_export {
    int id;                 /* the exporter's name for it */
    size_t size;            /* bytes allocated (VMM: rounded to granularity) */
    unsigned char ipc[64];  /* GT_KIND_IPC: the raw cudaIpcMemHandle_t; GT_KIND_POOL: the
                               cudaMemPoolPtrExportData */
    int fd;                 /* GT_KIND_VMM: a descriptor this process owns; GT_KIND_POOL:
                               the pool's; else -1 */
    /* GT_KIND_VMM_CHUNKS: chunk_count descriptors this process owns, of
     * chunk_size bytes each (size = their sum). */
    int fds[GT_CHUNKS_MAX];
    size_t chunk_count, chunk_size;
};

/* Allocate count chunks of chunk_size bytes (rounded up to the granularity)
 * on device 0 in the exporter, mapped back to back, fill the range with
 * tu_pattern(seed, i) and export each. 0 on success. */
int gt_exporter_alloc_chunks(struct gt_exporter *ex, size_t count, size_t chunk_size, uint8_t seed,
                             struct gt_export *out);

/* Have the exporter register [offset, offset + len) of allocation id with
 * this process through shmreg_send_cuda_region on the exporter's socket
 * (name "sent"): _begin asks for it and returns at once (0 on success);
 * this process then receives the request on ex->sock
 * (shmreg_recv_cuda_region), registers it and answers; _end returns the
 * code shmreg_send_cuda_region gave the exporter (or -1). */
int gt_exporter_send_begin(struct gt_exporter *ex, int id, size_t offset, size_t len);
int gt_exporter_send_end(struct gt_exporter *ex);

/* Close the descriptors of out (fd and fds) this process holds. */
void gt_export_close(struct gt_export *out);

/* Fork the exporter. 0 on success. */
int gt_exporter_start(struct gt_exporter *ex);

/* Allocate `size` bytes on device 0 in the exporter, fill byte i with
 * tu_pattern(seed, i) and export it. 0 on success. */
int gt_exporter_alloc(struct gt_exporter *ex, enum gt_kind kind, size_t size, uint8_t seed,
                      struct gt_export *out);

/* Whether the exporter reads tu_pattern(seed, offset + i) in [offset,
 * offset + len) of allocation id: 0 if so, -1 if not or on error. */
int gt_exporter_check(struct gt_exporter *ex, int id, uint8_t seed, size_t offset, size_t len);

/* Free allocation id in the exporter. 0 on success. */
int gt_exporter_free(struct gt_exporter *ex, int id);

/* Stop the exporter (it frees what it still holds) and reap it. */
void gt_exporter_stop(struct gt_exporter *ex);

#endif
