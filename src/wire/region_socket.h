/* What the wire formats' client halves share (region_socket.c): waiting for
 * a server's answer, in the format of shmreg.h. */
#ifndef SHMREG_WIRE_REGION_SOCKET_H
#define SHMREG_WIRE_REGION_SOCKET_H

#include "shmreg/shmreg.h"

/* Read one answer record about region `name`: OK, or the server's code with
 * its message as this thread's; SYSTEM when none came or it is not an
 * answer. who names the calling function in messages. */
shmreg_err shmreg__read_answer(int sock, const char *name, const char *who);

#endif
