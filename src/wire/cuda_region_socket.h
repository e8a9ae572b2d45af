/* The CUDA-region wire format's client half for the CUDA backend
 * (cuda_region_socket.c; the format is in shmreg.h). */
#ifndef SHMREG_WIRE_CUDA_REGION_SOCKET_H
#define SHMREG_WIRE_CUDA_REGION_SOCKET_H

#include "shmreg/shmreg.h"

/* Send q as a request (its fds: fd_count of them, the caller's) and wait
 * for the server's answer: OK, or the server's code and message. q->name
 * is 1..255 bytes, its other fields as shmreg_recv_cuda_region fills them. */
shmreg_err shmreg__send_cuda_request(int sock, const shmreg_cuda_region_request *q);

#endif
