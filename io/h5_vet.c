/* io/h5_vet.c: every HDF5 input is read once in a child process before this process opens it.
 *
 * libhdf5 1.10 trusts its metadata: a flipped bit in a global-heap object's size or in a layout
 * message faults inside the library (H5HG_read, H5Dread) or loops, before any check of ours can
 * run. So sp_h5_open first forks a child that opens the file the same way, visits every object
 * reachable by hard links, reads every attribute through sp_h5_attr_read and every dataset (whole
 * where the library parses more metadata while reading: chunked, compact or filtered layouts;
 * one element of a contiguous one, which is a single read at one address). The child sends back
 * its verdict; a child that dies, aborts or overruns its time sends nothing, and the file is
 * refused in one line without this process ever handing it to libhdf5. Every open is vetted (a
 * fork and a walk of the metadata: milliseconds for a checkpoint, whose tensors are contiguous);
 * remembering verdicts by file identity would trust a file rewritten within one timestamp tick.
 *
 * The child also applies the rule that no header is trusted: a dataset that declares more bytes
 * than its storage holds (unwritten or truncated data: reading it would mean gigabytes of fill
 * values), or more than the reading budget, is refused before anything is allocated for it. */
#include "io/h5.h"

#include "core/input_file.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

/* The most bytes a chunked dataset may declare per byte it stores: deflate cannot expand data more
 * than about 1032:1, and chunks never written (read as fill values) need room too: a dump whose
 * presum arrays lack a layer stores a few chunks less than it declares. */
#define MAX_INFLATION 1100.0
/* Datasets are read in slabs of about this many bytes along their first dimension. */
#define SLAB_BYTES ((size_t)16 << 20)

static double vet_seconds_override = 0;
static int vet_in_process = 0;

void sp_h5_set_vet_seconds(double seconds) { vet_seconds_override = seconds; }

void sp_h5_set_vet_in_process(int on) { vet_in_process = on; }

/* Base time plus one second per 32 MiB: the vet reads the data at most once from the page cache. */
static unsigned vet_seconds(int64_t size)
{
    if (vet_seconds_override > 0)
        return (unsigned)(vet_seconds_override + 0.999);
    return 30u + (unsigned)(size >> 25);
}

typedef struct {
    sp_status code;
    char message[1024];
} vet_verdict;

/* ---- what the child does ---- */

/* Reads every attribute of obj through the readers' own attribute reader. An attribute list that
 * cannot be walked is a verdict: the readers look attributes up by name, which may still reach one
 * the walk never read (a fuzzed checkpoint's /config did, and libhdf5 then copied 80 GB in
 * H5HG_read). */
static sp_status read_every_attribute(hid_t obj)
{
    H5O_info_t info;
    int listed = H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) >= 0;
    for (hsize_t i = 0; listed && i < info.num_attrs; i++) {
        char name[1024];
        sp_h5_value v;
        if (H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0) {
            listed = 0;
            break;
        }
        if (sp_h5_attr_read(obj, name, &v) == SP_OK)
            sp_h5_value_free(&v);
        sp_error_clear(); /* a bad attribute is the reader's to report, in its own words */
    }
    if (listed)
        return SP_OK;
    char where[1024];
    sp_h5_where(obj, NULL, where, sizeof where);
    return sp_error(SP_ERR_INPUT, "corrupt HDF5 file: %s: its attributes cannot be listed", where);
}

/* The most bytes the dataset may declare per byte stored (0: unbounded): 1 for contiguous storage,
 * which is either all there or not; MAX_INFLATION for chunked storage, unless a filter without a
 * bound is used (scale-offset, n-bit, szip: held to the reading budget alone). */
static double inflation_bound(hid_t dcpl)
{
    if (H5Pget_layout(dcpl) != H5D_CHUNKED)
        return 1;
    int n = H5Pget_nfilters(dcpl);
    for (int i = 0; i < n; i++) {
        unsigned flags = 0, values[8];
        size_t n_values = 8;
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &n_values, values, 0, NULL, NULL);
        if (f != H5Z_FILTER_DEFLATE && f != H5Z_FILTER_SHUFFLE && f != H5Z_FILTER_FLETCHER32)
            return 0;
    }
    return MAX_INFLATION;
}

/* The memory type a reader would use for this file type, or -1 to skip the data. */
static hid_t read_type(hid_t type)
{
    switch (H5Tget_class(type)) {
    case H5T_FLOAT: return sp_h5_real_type();
    case H5T_INTEGER: return H5T_NATIVE_INT64;
    default: return -1; /* no spanprobe reader reads other kinds of dataset */
    }
}

/* Reads the dataset in slabs of rows (or its first element only), discarding the values: what
 * matters is that libhdf5 survives reading it; unreadable data is the reader's to report. */
static void read_slabs(hid_t dset, hid_t mem, int rank, const hsize_t *dims, size_t row_bytes, int one_element)
{
    int64_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
    for (int i = 0; i < rank; i++)
        count[i] = one_element ? 1 : (int64_t)dims[i];
    size_t rows = one_element ? 1 : row_bytes >= SLAB_BYTES ? 1 : SLAB_BYTES / row_bytes;
    if (rows > dims[0])
        rows = (size_t)dims[0];
    void *buf = malloc(rows * (one_element ? 8 : row_bytes));
    for (hsize_t r = 0; buf && r < dims[0]; r += rows) {
        start[0] = (int64_t)r;
        count[0] = (int64_t)(r + rows > dims[0] ? dims[0] - r : rows);
        if (sp_h5_read(dset, mem, start, count, buf) != SP_OK || one_element)
            break;
    }
    free(buf);
    sp_error_clear();
}

static sp_status vet_dataset(hid_t dset)
{
    hid_t type = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    sp_status st = SP_OK;
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    size_t type_bytes = type >= 0 ? H5Tget_size(type) : 0;
    if (type < 0 || space < 0 || dcpl < 0 || rank < 0 || rank > H5S_MAX_RANK ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0 || type_bytes == 0)
        goto done; /* the reader will say what is wrong with it */
    double declared = (double)type_bytes, row = (double)type_bytes;
    for (int i = 0; i < rank; i++) {
        declared *= (double)dims[i];
        if (i > 0)
            row *= (double)dims[i];
    }
    if (declared == 0)
        goto done;
    char where[1024];
    sp_h5_where(dset, NULL, where, sizeof where);
    double stored = (double)H5Dget_storage_size(dset), inflation = inflation_bound(dcpl);
    double budget = (double)sp_read_budget();
    if (inflation > 0 && declared > stored * inflation) {
        st = sp_error(SP_ERR_INPUT,
                      "%s: declares %.0f bytes of data but the file holds %.0f for it (unwritten or truncated "
                      "data; refused before reading)",
                      where, declared, stored);
        goto done;
    }
    if (declared > budget) {
        st = sp_error(SP_ERR_NOMEM, "%s: declares %.3g GiB of data, over the reading budget of %.3g GiB%s", where,
                      declared / 1073741824.0, budget / 1073741824.0, sp_read_budget_hint());
        goto done;
    }
    hid_t mem = read_type(type);
    if (mem >= 0 && rank >= 1) {
        int contiguous = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0;
        read_slabs(dset, mem, rank, dims, (size_t)(row / (double)type_bytes) * 8, contiguous);
    }
done:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return st;
}

static herr_t vet_object(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    sp_status *st = data;
    hid_t obj = H5Oopen(root, name, sp_h5_lapl());
    if (obj < 0)
        return 0; /* the reader reports an object it needs and cannot open */
    *st = read_every_attribute(obj);
    if (*st == SP_OK && info->type == H5O_TYPE_DATASET)
        *st = vet_dataset(obj);
    H5Oclose(obj);
    return *st == SP_OK ? 0 : 1;
}

/* The verdict on the file at path: in the child, or here (sp_h5_set_vet_in_process). */
static sp_status vet_here(const char *path)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return SP_OK; /* sp_h5_open reports a file HDF5 cannot open */
    sp_status st = SP_OK;
    herr_t visited = H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, vet_object, &st,
                               H5O_INFO_BASIC);
    H5Fclose(file);
    /* a visit that stopped on an unreadable object header has not vetted what lies past it: the
     * parent must not read it either */
    if (visited < 0 && st == SP_OK)
        return sp_error(SP_ERR_INPUT, "corrupt HDF5 file: its objects cannot all be visited");
    return st;
}

/* ---- the parent ---- */

static void run_child(const char *path, int out_fd, unsigned seconds)
{
    /* the default actions: a fault ends the child, whatever handler the parent installed (a test
     * framework's would jump back into the parent's code) */
    static const int fatal[] = {SIGALRM, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    alarm(seconds);
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0)
        dup2(null_fd, STDERR_FILENO); /* a sanitizer's or the library's last words are not the user's */
    sp_error_clear();
    vet_verdict v = {vet_here(path), ""};
    snprintf(v.message, sizeof v.message, "%s", sp_error_message());
    ssize_t w = write(out_fd, &v, sizeof v);
    _exit(w == (ssize_t)sizeof v ? 0 : 1);
}

/* How the child ended, for the message: "was killed by signal 11", "ran over its 30 s". */
static void describe_end(int wstatus, unsigned seconds, char *buf, size_t len)
{
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGALRM)
        snprintf(buf, len, "did not finish within %u s", seconds);
    else if (WIFSIGNALED(wstatus))
        snprintf(buf, len, "crashed (signal %d)", WTERMSIG(wstatus));
    else
        snprintf(buf, len, "failed (exit %d)", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
}

sp_status sp_h5_vet(const char *path)
{
    if (vet_in_process)
        return vet_here(path);
    struct stat s;
    if (stat(path, &s) != 0)
        return sp_error(SP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    unsigned seconds = vet_seconds((int64_t)s.st_size);
    int fds[2];
    if (pipe(fds) != 0)
        return sp_error(SP_ERR_IO, "%s: cannot vet the HDF5 file (pipe: %s)", path, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return sp_error(SP_ERR_IO, "%s: cannot vet the HDF5 file (fork: %s)", path, strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(path, fds[1], seconds);
    }
    close(fds[1]);
    vet_verdict v;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = read(fds[0], (char *)&v + got, sizeof v - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof v) {
        v.message[sizeof v.message - 1] = '\0';
        return v.code == SP_OK ? SP_OK : sp_error(v.code, "%s", v.message);
    }
    char end[64];
    describe_end(wstatus, seconds, end, sizeof end);
    return sp_error(SP_ERR_INPUT,
                    "%s: corrupt HDF5 file: the HDF5 library %s reading it (read first in a separate process; "
                    "nothing was loaded)",
                    path, end);
}
