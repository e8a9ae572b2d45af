/* yolo_kernel.cu on a CPU: kernel H W K images.f16 weights.f32 out.f16 (cuda_fp16.h says how). */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "models/yolo_kernel.cu"

static std::vector<char> read_file(const char *path)
{
    std::vector<char> data;
    FILE *f = fopen(path, "rb");
    if (!f)
        return data;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        data.insert(data.end(), buf, buf + n);
    fclose(f);
    return data;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s H W K images.f16 weights.f32 out.f16\n", argv[0]);
        return 2;
    }
    int h = atoi(argv[1]), w = atoi(argv[2]), k = atoi(argv[3]);
    std::vector<char> images = read_file(argv[4]), weights = read_file(argv[5]);
    int anchors = (h / 8) * (w / 8) + (h / 16) * (w / 16) + (h / 32) * (w / 32);
    std::vector<__half> out((size_t)ROWS * anchors);
    if (images.size() != (size_t)3 * h * w * 2 || weights.size() != (size_t)3 * k * k * ROWS * 4) {
        fprintf(stderr, "wrong input sizes\n");
        return 2;
    }
    if (yolo_kernel_launch(images.data(), h, w, (const float *)weights.data(), k, out.data(),
                           nullptr) != cudaSuccess)
        return 1;
    FILE *f = fopen(argv[6], "wb");
    if (!f || fwrite(out.data(), sizeof out[0], out.size(), f) != out.size())
        return 1;
    return fclose(f) != 0;
}
