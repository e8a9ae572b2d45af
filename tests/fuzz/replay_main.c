/* Runs a libFuzzer harness over files, without libFuzzer: every compiler and
 * every CI tier replays the seed corpus this way (ctest), and a crash found by
 * a long fuzz run can be replayed under gdb or valgrind.
 * Usage: <harness>-replay [FILE_OR_DIR...]  (directories: every file in them;
 * no argument: the harness's seed corpus in the source tree) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <urcu/urcu-bp.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                return -1;
            }
            data = grown;
        }
        size_t n = fread(data + size, 1, cap - size, f);
        size += n;
        if (n == 0)
            break;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int replay_path(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        rc = replay_path(child, count);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    int rc = 0;
    if (argc < 2)
        rc = replay_path(FUZZ_DEFAULT_CORPUS, &count);
    for (int i = 1; i < argc && rc == 0; i++)
        rc = replay_path(argv[i], &count);
    printf("replayed %u inputs\n", count);
    /* Let RCU-deferred frees finish, so leak checkers see none pending. */
    urcu_bp_barrier();
    return rc == 0 && count > 0 ? 0 : 1;
}
