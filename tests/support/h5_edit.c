#include "h5_edit.h"

#include <stdio.h>
#include <stdlib.h>

static hid_t open_rw(const char *file)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "h5_edit: cannot open %s read-write\n", file);
        abort();
    }
    return f;
}

static void check(herr_t rc, const char *what, const char *file)
{
    if (rc < 0) {
        fprintf(stderr, "h5_edit: %s failed on %s\n", what, file);
        abort();
    }
}

static void set_attr(const char *file, const char *obj, const char *name, hid_t type, const void *value)
{
    hid_t f = open_rw(file);
    hid_t o = H5Oopen(f, obj, H5P_DEFAULT);
    check(o, "open object", file);
    if (H5Aexists(o, name) > 0)
        check(H5Adelete(o, name), "delete attribute", file);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(o, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    check(a, "create attribute", file);
    check(H5Awrite(a, type, value), "write attribute", file);
    H5Aclose(a);
    H5Sclose(space);
    H5Oclose(o);
    H5Fclose(f);
}

void h5_edit_set_str(const char *file, const char *obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    set_attr(file, obj, name, type, &value);
    H5Tclose(type);
}

void h5_edit_set_int(const char *file, const char *obj, const char *name, int64_t value)
{
    set_attr(file, obj, name, H5T_NATIVE_INT64, &value);
}

void h5_edit_delete_attr(const char *file, const char *obj, const char *name)
{
    hid_t f = open_rw(file);
    check(H5Adelete_by_name(f, obj, name, H5P_DEFAULT), "delete attribute", file);
    H5Fclose(f);
}

void h5_edit_delete(const char *file, const char *path)
{
    hid_t f = open_rw(file);
    check(H5Ldelete(f, path, H5P_DEFAULT), "delete link", file);
    H5Fclose(f);
}

void h5_edit_link(const char *file, const char *path, char kind, const char *target, const char *target_file)
{
    hid_t f = open_rw(file);
    if (H5Lexists(f, path, H5P_DEFAULT) > 0)
        check(H5Ldelete(f, path, H5P_DEFAULT), "delete link", file);
    herr_t rc = kind == 'h'   ? H5Lcreate_hard(f, target, f, path, H5P_DEFAULT, H5P_DEFAULT)
                : kind == 's' ? H5Lcreate_soft(target, f, path, H5P_DEFAULT, H5P_DEFAULT)
                              : H5Lcreate_external(target_file, target, f, path, H5P_DEFAULT, H5P_DEFAULT);
    check(rc, "create link", file);
    H5Fclose(f);
}

void h5_edit_replace(const char *file, const char *path, hid_t type, int rank, const int64_t *dims)
{
    hid_t f = open_rw(file);
    if (H5Lexists(f, path, H5P_DEFAULT) > 0)
        check(H5Ldelete(f, path, H5P_DEFAULT), "delete link", file);
    hsize_t ext[8];
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        ext[i] = (hsize_t)dims[i];
        n *= (size_t)dims[i];
    }
    double *ones = malloc((n ? n : 1) * sizeof *ones);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0;
    hid_t space = H5Screate_simple(rank, ext, NULL);
    hid_t d = H5Dcreate2(f, path, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    check(d, "create dataset", file);
    if (H5Tget_class(type) == H5T_INTEGER || H5Tget_class(type) == H5T_FLOAT)
        check(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, ones), "write dataset", file);
    free(ones);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
}

void h5_edit_declare(const char *file, const char *path, int64_t rows, int64_t cols, int64_t zero_rows)
{
    hid_t f = open_rw(file);
    if (H5Lexists(f, path, H5P_DEFAULT) > 0)
        check(H5Ldelete(f, path, H5P_DEFAULT), "delete link", file);
    hsize_t ext[2] = {(hsize_t)rows, (hsize_t)cols}, chunk[2] = {1, (hsize_t)(cols < 65536 ? cols : 65536)};
    hid_t space = H5Screate_simple(2, ext, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    check(H5Pset_chunk(dcpl, 2, chunk), "set chunk", file);
    check(H5Pset_deflate(dcpl, 9), "set deflate", file);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t d = H5Dcreate2(f, path, H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT);
    check(d, "create dataset", file);
    float *zeros = calloc((size_t)cols, sizeof *zeros);
    for (int64_t r = 0; r < zero_rows; r++) {
        hsize_t start[2] = {(hsize_t)r, 0}, count[2] = {1, (hsize_t)cols};
        hid_t mem = H5Screate_simple(2, count, NULL);
        check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL), "select row", file);
        check(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, zeros), "write row", file);
        H5Sclose(mem);
    }
    free(zeros);
    H5Dclose(d);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
}

void h5_edit_poison(const char *file, const char *path, int n, double value)
{
    hid_t f = open_rw(file);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    check(d, "open dataset", file);
    hid_t space = H5Dget_space(d);
    hssize_t total = H5Sget_simple_extent_npoints(space);
    double *values = malloc((size_t)total * sizeof *values);
    check(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), "read dataset", file);
    for (int i = 0; i < n && i < total; i++)
        values[i] = value;
    check(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), "write dataset", file);
    free(values);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
}

void h5_edit_copy(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) {
        fprintf(stderr, "h5_edit: cannot copy %s to %s\n", src, dst);
        abort();
    }
    char buf[1 << 14];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, out) != got)
            abort();
    fclose(in);
    if (fclose(out) != 0)
        abort();
}
