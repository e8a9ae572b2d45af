/* A peer below UCP: uct_attacker (UCX's transport layer, no handshake, no
 * secret, no key) against transport_target, a process holding one of the
 * library's UCX contexts and a canary. Both are exec'd:
 *
 *   test_transport_attack UCT_ATTACKER TRANSPORT_TARGET
 *
 * What each test asserts:
 *  - tcp opened on a device named trusted ("lo"): the attacker's put lands
 *    in the target's canary. The positive control: the attacker works, and
 *    this is what tcp_device exposes to every host that reaches the device;
 *  - a server's engine and a client's context opened by default (hardware
 *    transports only): no port of the target takes the tcp transport's
 *    connection, no put or get completes, no shared-memory segment of the
 *    target is writable, the canary is unchanged, the target lives on and
 *    answers;
 *  - UCX's own log stays bounded under a flood of active messages on ids
 *    without a handler: a few lines, not one (and a backtrace) per message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shmreg/shmreg.h"
#include "testutil.h"

static const char *attacker_path, *target_path;

struct target {
    pid_t pid;
    FILE *in, *out, *err; /* err: the target's stderr, a file read back */
    unsigned long long canary;
    size_t length;
    char state[1024];   /* its second line: ENGINE ..., CLIENT ... */
    unsigned ucx_lines; /* UCX's own lines on its stdout (UCX's default log) */
};

/* The next line of the target's own, counting UCX's log lines between. */
static const char *target_line(struct target *t)
{
    static char line[1024];
    while (fgets(line, sizeof line, t->out)) {
        if (!strstr(line, "UCX"))
            return line;
        t->ucx_lines++;
    }
    return "(the target said nothing)";
}

static const char *target_say(struct target *t, const char *command)
{
    fprintf(t->in, "%s\n", command);
    fflush(t->in);
    return target_line(t);
}

static void target_start(struct target *t, const char *mode, const char *tcp_device)
{
    int to[2], from[2];
    memset(t, 0, sizeof *t);
    assert_non_null(t->err = tmpfile());
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    t->pid = fork();
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        dup2(fileno(t->err), 2);
        close(to[1]);
        close(from[0]);
        execl(target_path, target_path, mode, tcp_device, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    t->in = fdopen(to[1], "w");
    t->out = fdopen(from[0], "r");
    const char *first = target_line(t);
    if (sscanf(first, "PID %*d CANARY %llx LENGTH %zu", &t->canary, &t->length) != 2)
        fail_msg("the target did not start: %s", first);
    snprintf(t->state, sizeof t->state, "%s", target_line(t));
    print_message("target %s%s%s: %s", mode, tcp_device ? " on " : "", tcp_device ? tcp_device : "", t->state);
}

/* Lines UCX wrote so far: its log on the target's stderr (the library's
 * handler), and any on stdout. */
static unsigned target_log_lines(struct target *t)
{
    unsigned n = t->ucx_lines;
    char line[1024];
    fflush(t->err);
    rewind(t->err);
    while (fgets(line, sizeof line, t->err))
        n++;
    return n;
}

static void target_end(struct target *t)
{
    fputs("quit\n", t->in);
    fclose(t->in);
    fclose(t->out);
    int status;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    fclose(t->err);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

struct attack {
    unsigned ports, connected, completed, writable_segments;
    double seconds;
};

static void attack(struct target *t, const char *ops, struct attack *a)
{
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd, "%s %ld %llx %zu --ops %s --timeout-ms 1000", attacker_path, (long)t->pid, t->canary,
             t->length, ops);
    memset(a, 0, sizeof *a);
    uint64_t t0 = tu_now_ns();
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    bool done = false;
    while (fgets(line, sizeof line, f)) {
        print_message("  %s", line);
        char what[32], result[64];
        if (sscanf(line, "PORTS %u", &a->ports) == 1)
            continue;
        if (sscanf(line, "TCP %*s %31s %63s", what, result) == 2 && strcmp(result, "ok") == 0)
            *(strcmp(what, "CONNECT") == 0 ? &a->connected : &a->completed) += 1;
        if ((strncmp(line, "POSIX ", 6) == 0 || strncmp(line, "SYSV ", 5) == 0) && strstr(line, " writable "))
            a->writable_segments++;
        done |= strcmp(line, "DONE\n") == 0;
    }
    assert_int_equal(pclose(f), 0);
    a->seconds = (double)(tu_now_ns() - t0) / 1e9;
    if (!done)
        fail_msg("the attacker did not run to its end");
}

/* The opt-in: tcp on lo. Any process of this host that reaches lo writes
 * into the target's memory, at an address of its choosing. */
static void test_tcp_device_exposes_memory(void **state)
{
    struct target t;
    target_start(&t, "server", "lo");
    assert_int_equal(strncmp(t.state, "ENGINE ", 7), 0);
    struct attack a;
    attack(&t, "get,put", &a);
    assert_true(a.connected >= 1);
    assert_true(a.completed >= 1);
    const char *canary = target_say(&t, "check");
    print_message("%s", canary);
    assert_string_equal(canary, "CANARY changed 0 a3\n"); /* PUT_ZCOPY's byte, from its first */
    target_end(&t);
}

/* A default context, attacked in every way the attacker knows: nothing. */
static void default_context_refuses(const char *mode)
{
    struct target t;
    target_start(&t, mode, NULL);
    struct attack a;
    attack(&t, "get,put,am", &a);
    print_message("%u ports, %u connected, %u operations completed, %u writable segments\n", a.ports, a.connected,
                  a.completed, a.writable_segments);
    assert_int_equal(a.connected, 0);
    assert_int_equal(a.completed, 0);
    assert_int_equal(a.writable_segments, 0);
    assert_string_equal(target_say(&t, "check"), "CANARY unchanged\n");
    /* Alive and serving: a started engine still hands out invitations. */
    if (strncmp(t.state, "ENGINE ", 7) == 0 && strncmp(t.state, "ENGINE off", 10) != 0)
        assert_int_equal(strncmp(target_say(&t, "invite"), "INVITE ", 7), 0);
    target_end(&t);
}

static void test_default_server_exposes_nothing(void **state)
{
    default_context_refuses("server");
}

static void test_default_client_exposes_nothing(void **state)
{
    default_context_refuses("client");
}

/* Active messages on every id without a handler, twice over (short and
 * bcopy): UCX's log is rate-limited to about a line a second, with a
 * count of what it held back, never a line (and a backtrace) per message. */
static void test_ucx_log_bounded(void **state)
{
    struct target t;
    target_start(&t, "server", "lo");
    unsigned before = target_log_lines(&t);
    struct attack a;
    attack(&t, "am", &a);
    assert_true(a.connected >= 1);
    usleep(1200000); /* a held-back count is written within a second */
    assert_string_equal(target_say(&t, "check"), "CANARY unchanged\n");
    unsigned lines = target_log_lines(&t) - before;
    unsigned bound = 3 + 2 * ((unsigned)(a.seconds + 1.2) + 1);
    print_message("UCX wrote %u lines during an attack of %.1f s (bound %u)\n", lines, a.seconds, bound);
    assert_true(lines <= bound);
    assert_int_equal(strncmp(target_say(&t, "invite"), "INVITE ", 7), 0);
    target_end(&t);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s UCT_ATTACKER TRANSPORT_TARGET\n", argv[0]);
        return 2;
    }
    if (shmreg_remote_available() != SHMREG_OK) {
        printf("skipped: %s\n", shmreg_last_error());
        return 77;
    }
    attacker_path = argv[1];
    target_path = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_device_exposes_memory),
        cmocka_unit_test(test_default_server_exposes_nothing),
        cmocka_unit_test(test_default_client_exposes_nothing),
        cmocka_unit_test(test_ucx_log_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
