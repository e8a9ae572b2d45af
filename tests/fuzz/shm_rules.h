/* The naming rules for region names and shm keys, stated independently of
 * the library's code (src/base/names.c): the fuzz harnesses check the library
 * against these. */
#ifndef SHMREG_TESTS_SHM_RULES_H
#define SHMREG_TESTS_SHM_RULES_H

#include <stdbool.h>

/* 1..255 bytes, no control character (0x00-0x1f, 0x7f). */
bool rule_name_valid(const char *name);

/* The key as glibc resolves it: without its leading slashes. */
const char *rule_body(const char *key);

/* Body non-empty, not "." or "..", no '/' or control character, and
 * short enough for glibc (body + NUL < NAME_MAX). */
bool rule_key_valid(const char *key);

/* Whether the key's body starts with the body of one of the prefixes
 * (NULL-terminated list). */
bool rule_key_reserved(const char *key, const char *const *prefixes);

/* Text with no control character: safe to put in a log line. Every message
 * the library leaves must be, whatever the client sent, or a client could
 * forge log lines (the reason names refuse control characters at all). */
bool rule_text_loggable(const char *text);

#endif
