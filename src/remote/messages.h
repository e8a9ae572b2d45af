/* The messages of a remote connection, both halves of their wire format
 * (remote/messages.c), with no UCX in it so that every build parses them
 * and the fuzzer reaches the parser.
 *
 * A client dials the server's worker and proves itself with the one-time
 * secret its tenant was given (HELLO; the server answers WELCOME with the
 * connection's id). Over that connection, and only over it, it announces
 * the windows of its memory the server may touch (ANNOUNCE, WITHDRAW; the
 * server answers ANSWER). The server then moves bytes only by asking the
 * client: FETCH (the client answers DATA with the bytes) and STORE (the
 * bytes go with it; the client answers STORED once they are in its
 * memory). Neither side's UCX context has one-sided operations, so neither
 * worker serves a read or write that its own code did not check.
 *
 * Every message is one 80-byte header, little-endian:
 *   byte 0        version, 1
 *   byte 1        kind (enum shmreg__rmsg_kind)
 *   bytes 2..3    zero
 *   bytes 4..7    uint32 status (a shmreg_err) in an answer (WELCOME,
 *                 ANSWER, DATA, STORED, PONG); 0 in every other kind
 *   bytes 8..15   uint64 request: pairs an answer with what it answers
 *   bytes 16..23  uint64 window id
 *   bytes 24..31  uint64 window generation
 *   bytes 32..39  uint64 offset in the window (ANNOUNCE: the window's address)
 *   bytes 40..47  uint64 length
 *   bytes 48..79  token: the secret (HELLO) or the connection id (WELCOME,
 *                 its first 16 bytes, the rest zero), zero in every other
 *                 kind
 * DATA and STORE carry their bytes as the message's payload. */
#ifndef SHMREG_REMOTE_MESSAGES_H
#define SHMREG_REMOTE_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmreg/shmreg.h"

#define SHMREG__RMSG_VERSION 1
#define SHMREG__RMSG_SIZE 80
#define SHMREG__RMSG_TOKEN 32
#define SHMREG__RMSG_CONNECTION_ID 16

/* The UCX active-message ids: what a client sends, what a server sends. */
#define SHMREG__AM_TO_SERVER 1
#define SHMREG__AM_TO_CLIENT 2

enum shmreg__rmsg_kind {
    /* client to server */
    SHMREG__RMSG_HELLO = 1,
    SHMREG__RMSG_ANNOUNCE = 2,
    SHMREG__RMSG_WITHDRAW = 3,
    SHMREG__RMSG_DATA = 4,
    SHMREG__RMSG_STORED = 5,
    SHMREG__RMSG_PONG = 6,
    SHMREG__RMSG_BYE = 7,
    /* server to client */
    SHMREG__RMSG_WELCOME = 16,
    SHMREG__RMSG_ANSWER = 17,
    SHMREG__RMSG_FETCH = 18,
    SHMREG__RMSG_STORE = 19,
    SHMREG__RMSG_PING = 20,
};

struct shmreg__rmsg {
    uint8_t kind;
    uint32_t status;
    uint64_t request;
    uint64_t window;
    uint64_t generation;
    uint64_t offset;
    uint64_t length;
    unsigned char token[SHMREG__RMSG_TOKEN];
};

/* Write m into out (SHMREG__RMSG_SIZE bytes). */
void shmreg__rmsg_encode(const struct shmreg__rmsg *m, unsigned char out[SHMREG__RMSG_SIZE]);

/* Parse size bytes that arrived at a server (to_server) or a client. NULL
 * and a message when they are one this side accepts; else the reason, a
 * static string: the wrong size or version, a kind this side does not
 * take, reserved bytes, a status or a token where none belongs, an empty
 * or wrapping range. */
const char *shmreg__rmsg_parse(const void *bytes, size_t size, bool to_server, struct shmreg__rmsg *out);

#endif
