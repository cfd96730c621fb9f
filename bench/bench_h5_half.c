/* bench_h5_half: reading a float16 HDF5 dataset into float32, spanprobe's way (io/h5.c: the raw
 * halves, widened by io/half.h) against libhdf5's own conversion (H5Dread straight into floats),
 * with reading a float32 dataset of the same shape as the floor.
 *
 *   build/bench/bench_h5_half [--mib N] [--rounds R] [--dir DIR]
 *
 * Writes DIR/bench_h5_half.h5 (N MiB of float16 and 2N MiB of float32, contiguous; DIR defaults
 * to /tmp), reads each way R times from the warm page cache, prints the best time of each and the
 * ratios, and removes the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/h5.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void write_dataset(hid_t file, const char *name, hid_t type, hsize_t n, const float *values)
{
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset < 0 || H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
        fprintf(stderr, "bench_h5_half: cannot write %s\n", name);
        exit(1);
    }
    H5Dclose(dset);
    H5Sclose(space);
}

/* Best of `rounds` times of one way of reading dataset name into out. */
static double time_read(hid_t file, const char *name, int via_spanprobe, float *out, int rounds)
{
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
        const double t0 = now_s();
        const int ok = via_spanprobe ? sp_h5_read(dset, H5T_NATIVE_FLOAT, NULL, NULL, out) == SP_OK
                                     : H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0;
        const double t = now_s() - t0;
        H5Dclose(dset);
        if (!ok) {
            fprintf(stderr, "bench_h5_half: cannot read %s\n", name);
            exit(1);
        }
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    long mib = 64, rounds = 3;
    const char *dir = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0)
            mib = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
    }
    if (mib < 1 || rounds < 1) {
        fprintf(stderr, "usage: bench_h5_half [--mib N] [--rounds R] [--dir DIR]\n");
        return 2;
    }
    const hsize_t n = (hsize_t)mib << 19; /* halves in N MiB */
    float *values = malloc(n * sizeof *values);
    if (!values)
        return 1;
    for (hsize_t i = 0; i < n; i++) /* spread over float16's range, subnormals included */
        values[i] = (float)((double)((i * 2654435761u) % 200001) / 1000.0 - 100.0) * ((i & 7) ? 1.0f : 1e-6f);
    char path[4200];
    snprintf(path, sizeof path, "%s/bench_h5_half.h5", dir);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t half = sp_h5_float_type(SP_H5_F16);
    write_dataset(file, "f16", half, n, values);
    write_dataset(file, "f32", H5T_IEEE_F32LE, n, values);
    H5Tclose(half);
    H5Fclose(file);
    if (sp_h5_open(path, &file) != SP_OK) {
        fprintf(stderr, "bench_h5_half: %s\n", sp_error_message());
        return 1;
    }
    const double t16_sp = time_read(file, "f16", 1, values, (int)rounds);
    const double t16_hdf5 = time_read(file, "f16", 0, values, (int)rounds);
    const double t32 = time_read(file, "f32", 1, values, (int)rounds);
    H5Fclose(file);
    unlink(path);
    free(values);
    const double mb = (double)n * 2 / 1e6;
    printf("float16 -> float32, %llu values (%.0f MB of halves), best of %ld:\n", (unsigned long long)n, mb, rounds);
    printf("  spanprobe (raw halves, widened)   %8.3f s  %7.0f MB/s\n", t16_sp, mb / t16_sp);
    printf("  libhdf5's conversion              %8.3f s  %7.0f MB/s  (%.1fx spanprobe's time)\n", t16_hdf5,
           mb / t16_hdf5, t16_hdf5 / t16_sp);
    printf("  float32 read, no conversion       %8.3f s  %7.0f MB/s  (spanprobe's float16 read: %.2fx this)\n", t32,
           2 * mb / t32, t16_sp / t32);
    return 0;
}
