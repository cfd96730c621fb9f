#include "io/h5.h"

#include "core/input_file.h"
#include "io/atomic.h"
#include "io/half.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Attribute arrays longer than this are refused (they are small metadata by design). */
#define SP_H5_MAX_ATTR_VALUES (1u << 20)

/* Silences HDF5's error printing (idempotent; every entry point that opens or creates calls it). */
static void quiet_hdf5(void)
{
    static int quiet;
    if (!quiet) {
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        quiet = 1;
    }
}

void sp_h5_where(hid_t obj, const char *name, char *buf, size_t len)
{
    char file[256] = "?", object[512] = "";
    if (H5Fget_name(obj, file, sizeof file) < 0)
        snprintf(file, sizeof file, "?");
    if (H5Iget_name(obj, object, sizeof object) < 0)
        object[0] = '\0';
    size_t n = strlen(object);
    const char *sep = (name && (n == 0 || object[n - 1] != '/')) ? "/" : "";
    snprintf(buf, len, "%s: %s%s%s", file, object, name ? sep : "", name ? name : "");
}

/* sp_error(code, "<file>: <object>/<name>: <message>"), the form of every error about one object. */
static sp_status fail_at(sp_status code, hid_t obj, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static sp_status fail_at(sp_status code, hid_t obj, const char *name, const char *fmt, ...)
{
    char where[768], message[1024];
    sp_h5_where(obj, name, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return sp_error(code, "%s: %s", where, message);
}

/* ---- files ---- */

sp_status sp_h5_open(const char *path, hid_t *file)
{
    quiet_hdf5();
    FILE *probe = NULL;
    int64_t size = 0;
    SP_TRY(sp_file_open_regular(path, &probe, &size)); /* never hands HDF5 a FIFO to block on */
    fclose(probe);
    if (H5Fis_hdf5(path) <= 0)
        return sp_error(SP_ERR_INPUT, "%s: not an HDF5 file (expected the HDF5 signature, found none)", path);
    SP_TRY(sp_h5_vet(path));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return sp_error(SP_ERR_INPUT,
                        "%s: cannot open as HDF5 (truncated or corrupt file of %lld bytes, or written by an HDF5 "
                        "newer than 1.10 with libver='latest')",
                        path, (long long)size);
    *file = f;
    return SP_OK;
}

sp_status sp_h5_read_format(hid_t file, char *format, size_t len, int *major, int *minor)
{
    char where[768], version[32];
    sp_h5_where(file, NULL, where, sizeof where);
    if (!sp_h5_has_attr(file, "format"))
        return sp_error(SP_ERR_INPUT, "%s: missing root attribute 'format' (expected a spanprobe file)", where);
    SP_TRY(sp_h5_get_str(file, "format", format, len));
    SP_TRY(sp_h5_get_str(file, "format_version", version, sizeof version));
    char tail;
    if (sscanf(version, "%d.%d%c", major, minor, &tail) != 2 || *major < 0 || *minor < 0)
        return sp_error(SP_ERR_INPUT, "%sformat_version: expected \"MAJOR.MINOR\", found \"%s\"", where, version);
    return SP_OK;
}

sp_status sp_h5_check_format(hid_t file, const char *format, int major, int *minor)
{
    char found[128], where[768];
    int file_major = 0, file_minor = 0;
    SP_TRY(sp_h5_read_format(file, found, sizeof found, &file_major, &file_minor));
    sp_h5_where(file, NULL, where, sizeof where);
    if (strcmp(found, format) != 0)
        return sp_error(SP_ERR_INPUT, "%sformat: expected \"%s\", found \"%s\"", where, format, found);
    if (file_major > major)
        return sp_error(SP_ERR_INPUT, "%sformat_version: %s %d.%d is newer than this reader (major %d); upgrade spanprobe",
                        where, format, file_major, file_minor, major);
    if (minor)
        *minor = file_minor;
    return SP_OK;
}

static hid_t tracked_gcpl(hid_t cls)
{
    hid_t pl = H5Pcreate(cls);
    H5Pset_link_creation_order(pl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    H5Pset_attr_creation_order(pl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    return pl;
}

sp_status sp_h5_create(const char *path, hid_t *file)
{
    quiet_hdf5();
    hid_t fcpl = tracked_gcpl(H5P_FILE_CREATE);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, (size_t)1 << 20, 0); /* in memory, grown 1 MiB at a time, no backing store */
    /* semi: closing fails while objects are still open, so a leak is noticed */
    H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (f < 0)
        return sp_error(SP_ERR_IO, "%s: cannot create HDF5 file", path);
    *file = f;
    return SP_OK;
}

/* ISO 8601 UTC, "2024-05-01T12:00:00Z" */
static void now_iso8601(char *buf, size_t len)
{
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

sp_status sp_h5_write_header(hid_t file, const char *format, int major, int minor, const char *source)
{
    char version[32], created[32];
    snprintf(version, sizeof version, "%d.%d", major, minor);
    now_iso8601(created, sizeof created);
    SP_TRY(sp_h5_set_str(file, "format", format));
    SP_TRY(sp_h5_set_str(file, "format_version", version));
    SP_TRY(sp_h5_set_str(file, "tool_version", "spanprobe " SP_VERSION));
    SP_TRY(sp_h5_set_str(file, "created", created));
    return sp_h5_set_str(file, "source", source ? source : "");
}

void sp_h5_discard(hid_t file)
{
    if (file >= 0)
        H5Fclose(file);
}

/* Writes len bytes to path (truncating it); messages name the file path stands for. */
static sp_status write_image(const char *path, const void *data, size_t len)
{
    char shown[4096];
    sp_atomic_destination(path, shown, sizeof shown);
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        return sp_error(SP_ERR_IO, "%s: cannot open for writing: %s", shown, strerror(errno));
    const char *p = data;
    while (len > 0) {
        ssize_t done = write(fd, p, len);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            int err = done < 0 ? errno : EIO;
            close(fd);
            return sp_error(SP_ERR_IO, "%s: write failed: %s", shown, strerror(err));
        }
        p += done;
        len -= (size_t)done;
    }
    if (close(fd) != 0)
        return sp_error(SP_ERR_IO, "%s: write failed: %s", shown, strerror(errno));
    return SP_OK;
}

sp_status sp_h5_close_written(hid_t file)
{
    char path[4096];
    sp_status st = SP_OK;
    void *image = NULL;
    ssize_t size = -1;
    if (H5Fget_name(file, path, sizeof path) < 0 || H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 ||
        (size = H5Fget_file_image(file, NULL, 0)) < 0)
        st = sp_error(SP_ERR_INTERNAL, "cannot assemble the image of an HDF5 file being written");
    else if (!(image = sp_malloc((size_t)size, "HDF5 file image")))
        st = SP_ERR_NOMEM;
    else if (H5Fget_file_image(file, image, (size_t)size) != size)
        st = sp_error(SP_ERR_INTERNAL, "%s: cannot copy the HDF5 file image", path);
    if (H5Fclose(file) < 0 && st == SP_OK)
        st = sp_error(SP_ERR_INTERNAL, "%s: cannot close the HDF5 file (objects left open)", path);
    if (st == SP_OK)
        st = write_image(path, image, (size_t)size);
    free(image);
    return st;
}

/* ---- groups ---- */

/* Calls visit(loc, prefix) for every proper prefix "a", "a/b" of "a/b/c"; stops at a failure. */
static int each_parent(hid_t loc, const char *path, int (*visit)(hid_t, const char *))
{
    char prefix[1024];
    size_t n = strlen(path);
    if (n >= sizeof prefix)
        return 0;
    for (size_t i = 1; i < n; i++)
        if (path[i] == '/') {
            memcpy(prefix, path, i);
            prefix[i] = '\0';
            if (!visit(loc, prefix))
                return 0;
        }
    return 1;
}

static herr_t refuse_external_link(const char *parent_file, const char *parent_group, const char *child_file,
                                   const char *child_object, unsigned *flags, hid_t fapl, void *data)
{
    (void)parent_file, (void)parent_group, (void)child_file, (void)child_object, (void)flags, (void)fapl, (void)data;
    return -1;
}

hid_t sp_h5_lapl(void)
{
    static hid_t lapl = -1;
    if (lapl < 0) {
        lapl = H5Pcreate(H5P_LINK_ACCESS);
        if (lapl >= 0 && H5Pset_elink_cb(lapl, refuse_external_link, NULL) < 0) {
            H5Pclose(lapl);
            lapl = -1;
        }
    }
    return lapl;
}

static int link_exists(hid_t loc, const char *path) { return H5Lexists(loc, path, sp_h5_lapl()) > 0; }

int sp_h5_exists(hid_t loc, const char *path)
{
    quiet_hdf5();
    return each_parent(loc, path, link_exists) && link_exists(loc, path);
}

static int ensure_group(hid_t loc, const char *path)
{
    if (link_exists(loc, path))
        return 1;
    hid_t gcpl = tracked_gcpl(H5P_GROUP_CREATE);
    hid_t g = H5Gcreate2(loc, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    H5Pclose(gcpl);
    if (g < 0)
        return 0;
    H5Gclose(g);
    return 1;
}

static sp_status make_parents(hid_t loc, const char *path)
{
    if (each_parent(loc, path, ensure_group))
        return SP_OK;
    return fail_at(SP_ERR_IO, loc, path, "cannot create the parent groups");
}

sp_status sp_h5_create_group(hid_t loc, const char *path, hid_t *group)
{
    SP_TRY(make_parents(loc, path));
    if (!ensure_group(loc, path) || (*group = H5Gopen2(loc, path, H5P_DEFAULT)) < 0)
        return fail_at(SP_ERR_IO, loc, path, "cannot create group");
    return SP_OK;
}

/* Opens the group or dataset (type) at path, which must exist and be of that type. */
static sp_status open_object(hid_t loc, const char *path, H5O_type_t type, hid_t *obj)
{
    const char *kind = type == H5O_TYPE_GROUP ? "group" : "dataset";
    if (!sp_h5_exists(loc, path))
        return fail_at(SP_ERR_INPUT, loc, path, "missing %s", kind);
    H5L_info_t link;
    if (H5Lget_info(loc, path, &link, sp_h5_lapl()) >= 0 && link.type != H5L_TYPE_HARD && link.type != H5L_TYPE_SOFT)
        return fail_at(SP_ERR_INPUT, loc, path, "expected a %s, found an external link (never followed)", kind);
    H5O_info_t info;
    if (H5Oget_info_by_name2(loc, path, &info, H5O_INFO_BASIC, sp_h5_lapl()) < 0 || info.type != type)
        return fail_at(SP_ERR_INPUT, loc, path, "expected a %s, found another kind of object", kind);
    *obj = type == H5O_TYPE_GROUP ? H5Gopen2(loc, path, H5P_DEFAULT) : H5Dopen2(loc, path, H5P_DEFAULT);
    if (*obj < 0)
        return fail_at(SP_ERR_INPUT, loc, path, "cannot open %s (corrupt file)", kind);
    return SP_OK;
}

sp_status sp_h5_open_group(hid_t loc, const char *path, hid_t *group)
{
    return open_object(loc, path, H5O_TYPE_GROUP, group);
}

void sp_h5_list_free(char **names, int n)
{
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

static char *link_name(hid_t group, H5_index_t index, hsize_t i)
{
    ssize_t len = H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
    char *name = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (name && H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name, (size_t)len + 1, H5P_DEFAULT) < 0) {
        free(name);
        name = NULL;
    }
    return name;
}

sp_status sp_h5_list(hid_t group, char ***names, int *n)
{
    char where[768];
    H5G_info_t info;
    *names = NULL;
    *n = 0;
    sp_h5_where(group, NULL, where, sizeof where);
    if (H5Gget_info(group, &info) < 0 || info.nlinks > (1u << 24))
        return sp_error(SP_ERR_INPUT, "%s: cannot list the group (corrupt file or over 2^24 members)", where);
    unsigned order = 0;
    hid_t gcpl = H5Gget_create_plist(group);
    if (gcpl >= 0) {
        H5Pget_link_creation_order(gcpl, &order);
        H5Pclose(gcpl);
    }
    H5_index_t index = (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    char **list = calloc(info.nlinks ? info.nlinks : 1, sizeof *list);
    if (!list)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory listing the group", where);
    for (hsize_t i = 0; i < info.nlinks; i++)
        if (!(list[i] = link_name(group, index, i))) {
            sp_h5_list_free(list, (int)i);
            return sp_error(SP_ERR_INPUT, "%s: cannot read the name of member %llu", where, (unsigned long long)i);
        }
    *names = list;
    *n = (int)info.nlinks;
    return SP_OK;
}

/* ---- attributes ---- */

int sp_h5_has_attr(hid_t obj, const char *name)
{
    quiet_hdf5();
    return H5Aexists(obj, name) > 0;
}

void sp_h5_value_free(sp_h5_value *v)
{
    free(v->text);
    free(v->ints);
    free(v->floats);
    memset(v, 0, sizeof *v);
}

static const char *class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_REFERENCE: return "reference";
    default: return "unknown";
    }
}

static sp_status read_string(hid_t attr, hid_t type, const char *where, sp_h5_value *v)
{
    if (v->is_array)
        return sp_error(SP_ERR_INPUT, "%s: expected a scalar string, found an array of %zu strings", where, v->n);
    if (H5Tis_variable_str(type) > 0) {
        hid_t mem = H5Tcopy(H5T_C_S1);
        H5Tset_size(mem, H5T_VARIABLE);
        H5Tset_cset(mem, H5Tget_cset(type));
        char *s = NULL;
        herr_t rc = H5Aread(attr, mem, &s);
        H5Tclose(mem);
        if (rc < 0)
            return sp_error(SP_ERR_INPUT, "%s: cannot read string attribute", where);
        v->text = strdup(s ? s : "");
        H5free_memory(s);
    } else {
        size_t size = H5Tget_size(type);
        if (size == 0 || size > SP_H5_MAX_ATTR_VALUES)
            return sp_error(SP_ERR_INPUT, "%s: string attribute of %zu bytes is out of range", where, size);
        v->text = calloc(size + 1, 1);
        if (v->text && H5Aread(attr, type, v->text) < 0)
            return sp_error(SP_ERR_INPUT, "%s: cannot read string attribute", where);
    }
    if (!v->text)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading string", where);
    /* fixed-length strings may be space padded */
    for (size_t n = strlen(v->text); n > 0 && v->text[n - 1] == ' '; n--)
        v->text[n - 1] = '\0';
    return SP_OK;
}

/* Enums (h5py stores numpy booleans as an enum FALSE/TRUE) read as their member's name. */
static sp_status read_enum(hid_t attr, hid_t type, const char *where, sp_h5_value *v)
{
    unsigned char raw[16];
    char name[64];
    hid_t native = H5Tget_native_type(type, H5T_DIR_ASCEND);
    int ok = !v->is_array && native >= 0 && H5Tget_size(native) <= sizeof raw && H5Aread(attr, native, raw) >= 0 &&
             H5Tenum_nameof(native, raw, name, sizeof name) >= 0;
    if (native >= 0)
        H5Tclose(native);
    if (!ok)
        return sp_error(SP_ERR_INPUT, "%s: cannot read enum attribute (expected a scalar with a named value)", where);
    for (char *c = name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    v->text = strdup(name);
    v->cls = H5T_STRING;
    return v->text ? SP_OK : sp_error(SP_ERR_NOMEM, "%s: out of memory", where);
}

sp_status sp_h5_attr_read(hid_t obj, const char *name, sp_h5_value *v)
{
    char where[768];
    memset(v, 0, sizeof *v);
    sp_h5_where(obj, name, where, sizeof where);
    if (!sp_h5_has_attr(obj, name))
        return sp_error(SP_ERR_INPUT, "%s: missing attribute", where);
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (attr < 0)
        return sp_error(SP_ERR_INPUT, "%s: cannot open attribute", where);
    hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
    sp_status st = SP_OK;
    hssize_t npoints = H5Sget_simple_extent_npoints(space);
    v->cls = H5Tget_class(type);
    v->is_array = H5Sget_simple_extent_type(space) == H5S_SIMPLE;
    if (npoints < 1 || (size_t)npoints > SP_H5_MAX_ATTR_VALUES) {
        st = sp_error(SP_ERR_INPUT, "%s: expected 1..%u values, found %lld", where, SP_H5_MAX_ATTR_VALUES,
                      (long long)npoints);
        goto done;
    }
    v->n = (size_t)npoints;
    switch (v->cls) {
    case H5T_STRING: st = read_string(attr, type, where, v); break;
    case H5T_ENUM: st = read_enum(attr, type, where, v); break;
    case H5T_INTEGER:
        v->is_unsigned = H5Tget_sign(type) == H5T_SGN_NONE;
        v->ints = sp_calloc(v->n, sizeof *v->ints, where);
        if (!v->ints)
            st = SP_ERR_NOMEM;
        else if (H5Aread(attr, v->is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, v->ints) < 0)
            st = sp_error(SP_ERR_INPUT, "%s: cannot read integer attribute", where);
        break;
    case H5T_FLOAT:
        v->floats = sp_calloc(v->n, sizeof *v->floats, where);
        if (!v->floats)
            st = SP_ERR_NOMEM;
        else if (H5Aread(attr, H5T_NATIVE_DOUBLE, v->floats) < 0)
            st = sp_error(SP_ERR_INPUT, "%s: cannot read float attribute", where);
        break;
    default:
        st = sp_error(SP_ERR_INPUT, "%s: expected a string or number, found a %s attribute", where,
                      class_name(v->cls));
    }
done:
    H5Sclose(space);
    H5Tclose(type);
    H5Aclose(attr);
    if (st != SP_OK)
        sp_h5_value_free(v);
    return st;
}

void sp_h5_value_format(const sp_h5_value *v, char *buf, size_t len)
{
    if (v->cls == H5T_STRING) {
        snprintf(buf, len, "%s", v->text);
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < v->n && used + 1 < len; i++) {
        const char *sep = i ? ", " : v->is_array ? "[" : "";
        if (v->cls == H5T_FLOAT)
            used += (size_t)snprintf(buf + used, len - used, "%s%.17g", sep, v->floats[i]);
        else if (v->is_unsigned)
            used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, sep, (uint64_t)v->ints[i]);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, sep, v->ints[i]);
    }
    if (v->is_array && used + 1 < len)
        snprintf(buf + used, len - used, "]");
}

static sp_status get_typed(hid_t obj, const char *name, H5T_class_t want, sp_h5_value *v)
{
    SP_TRY(sp_h5_attr_read(obj, name, v));
    int ok = v->cls == want || (want == H5T_FLOAT && v->cls == H5T_INTEGER);
    if (!ok || (want != H5T_STRING && v->is_array && v->n != 1)) {
        sp_status st = fail_at(SP_ERR_INPUT, obj, name, "expected a scalar %s, found %s%s", class_name(want),
                               v->n > 1 ? "an array of " : "a ", class_name(v->cls));
        sp_h5_value_free(v);
        return st;
    }
    return SP_OK;
}

sp_status sp_h5_get_str(hid_t obj, const char *name, char *buf, size_t len)
{
    sp_h5_value v;
    SP_TRY(get_typed(obj, name, H5T_STRING, &v));
    size_t n = strlen(v.text);
    sp_status st = SP_OK;
    if (n >= len)
        st = fail_at(SP_ERR_INPUT, obj, name, "expected a string of at most %zu bytes, found %zu", len - 1, n);
    else
        memcpy(buf, v.text, n + 1);
    sp_h5_value_free(&v);
    return st;
}

sp_status sp_h5_get_str_alloc(hid_t obj, const char *name, char **out)
{
    sp_h5_value v;
    SP_TRY(get_typed(obj, name, H5T_STRING, &v));
    *out = v.text;
    v.text = NULL;
    sp_h5_value_free(&v);
    return SP_OK;
}

sp_status sp_h5_get_i64(hid_t obj, const char *name, int64_t *out)
{
    sp_h5_value v;
    SP_TRY(get_typed(obj, name, H5T_INTEGER, &v));
    sp_status st = SP_OK;
    if (v.is_unsigned && v.ints[0] < 0)
        st = fail_at(SP_ERR_INPUT, obj, name, "expected a value below 2^63, found %" PRIu64, (uint64_t)v.ints[0]);
    *out = v.ints[0];
    sp_h5_value_free(&v);
    return st;
}

sp_status sp_h5_get_f64(hid_t obj, const char *name, double *out)
{
    sp_h5_value v;
    SP_TRY(get_typed(obj, name, H5T_FLOAT, &v));
    *out = v.cls == H5T_FLOAT ? v.floats[0] : v.is_unsigned ? (double)(uint64_t)v.ints[0] : (double)v.ints[0];
    sp_h5_value_free(&v);
    return SP_OK;
}

static sp_status get_ints(hid_t obj, const char *name, size_t n, sp_h5_value *v)
{
    SP_TRY(sp_h5_attr_read(obj, name, v));
    if (v->cls != H5T_INTEGER || v->n != n) {
        sp_status st = fail_at(SP_ERR_INPUT, obj, name, "expected %zu integers, found %zu %s value(s)", n, v->n,
                               class_name(v->cls));
        sp_h5_value_free(v);
        return st;
    }
    return SP_OK;
}

sp_status sp_h5_get_u64s(hid_t obj, const char *name, uint64_t *out, size_t n)
{
    sp_h5_value v;
    SP_TRY(get_ints(obj, name, n, &v));
    for (size_t i = 0; i < n; i++)
        out[i] = (uint64_t)v.ints[i];
    sp_h5_value_free(&v);
    return SP_OK;
}

sp_status sp_h5_get_i32s(hid_t obj, const char *name, int32_t *out, size_t n)
{
    sp_h5_value v;
    SP_TRY(get_ints(obj, name, n, &v));
    sp_status st = SP_OK;
    for (size_t i = 0; i < n && st == SP_OK; i++) {
        if ((v.is_unsigned && v.ints[i] < 0) || v.ints[i] < INT32_MIN || v.ints[i] > INT32_MAX)
            st = fail_at(SP_ERR_INPUT, obj, name, "value %zu is out of the int32 range", i);
        out[i] = (int32_t)v.ints[i];
    }
    sp_h5_value_free(&v);
    return st;
}

/* Writes (replacing) an attribute of the given type from memory of mem_type; n == 0: scalar. */
static sp_status set_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, size_t n, const void *data)
{
    quiet_hdf5();
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hsize_t dims[1] = {n};
    hid_t space = n ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr >= 0 ? H5Awrite(attr, mem_type, data) : -1;
    if (attr >= 0)
        H5Aclose(attr);
    H5Sclose(space);
    if (rc < 0)
        return fail_at(SP_ERR_IO, obj, name, "cannot write attribute");
    return SP_OK;
}

sp_status sp_h5_set_str(hid_t obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    sp_status st = set_attr(obj, name, type, type, 0, &value);
    H5Tclose(type);
    return st;
}

sp_status sp_h5_set_i64(hid_t obj, const char *name, int64_t value)
{
    return set_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, &value);
}

sp_status sp_h5_set_f64(hid_t obj, const char *name, double value)
{
    return set_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, &value);
}

sp_status sp_h5_set_u64s(hid_t obj, const char *name, const uint64_t *values, size_t n)
{
    return set_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, n, values);
}

sp_status sp_h5_set_i32s(hid_t obj, const char *name, const int32_t *values, size_t n)
{
    return set_attr(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT32, n, values);
}

/* ---- option structs ---- */

sp_status sp_h5_write_fields(hid_t obj, const sp_field_table *t, const void *src)
{
    char text[SP_FIELD_STRING_MAX];
    for (int i = 0; i < t->n_fields; i++) {
        const sp_field *f = &t->fields[i];
        const char *p = (const char *)src + f->offset;
        switch (f->type) {
        case SP_FIELD_INT:
        case SP_FIELD_BOOL: SP_TRY(sp_h5_set_i64(obj, f->name, *(const int *)p)); break;
        case SP_FIELD_INT64: SP_TRY(sp_h5_set_i64(obj, f->name, *(const int64_t *)p)); break;
        case SP_FIELD_DOUBLE: SP_TRY(sp_h5_set_f64(obj, f->name, *(const double *)p)); break;
        case SP_FIELD_ENUM:
        case SP_FIELD_STRING:
            sp_fields_format(src, f, text, sizeof text);
            SP_TRY(sp_h5_set_str(obj, f->name, text));
            break;
        }
    }
    return SP_OK;
}

typedef struct {
    const sp_field_table *table;
    char unknown[128];
} unknown_search;

static herr_t find_unknown_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)loc;
    (void)info;
    unknown_search *s = data;
    const sp_field *f = sp_fields_find(s->table, name);
    if (f && strcmp(f->name, name) == 0)
        return 0;
    snprintf(s->unknown, sizeof s->unknown, "%s", name);
    return 1; /* stop at the first */
}

typedef struct {
    const char *const *names;
    char *buf;
    size_t len;
} other_search;

static herr_t find_other_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)loc;
    (void)info;
    other_search *s = data;
    for (const char *const *n = s->names; *n; n++)
        if (strcmp(*n, name) == 0)
            return 0;
    snprintf(s->buf, s->len, "%s", name);
    return 1; /* stop at the first */
}

int sp_h5_other_attr(hid_t obj, const char *const *names, char *buf, size_t len)
{
    other_search s = {names, buf, len};
    hsize_t idx = 0;
    return H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, find_other_attr, &s) > 0;
}

sp_status sp_h5_read_fields(hid_t obj, const sp_field_table *t, void *dst, int allow_unknown)
{
    char where[768], text[SP_FIELD_STRING_MAX + 64];
    if (!allow_unknown) {
        unknown_search s = {.table = t};
        hsize_t idx = 0;
        if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, find_unknown_attr, &s) > 0) {
            sp_h5_where(obj, s.unknown, where, sizeof where);
            return sp_error(SP_ERR_INPUT, "%s: unknown field (not one spanprobe %s knows: a typo, or a newer file "
                                          "mislabeled as this version?)",
                            where, SP_VERSION);
        }
    }
    for (int i = 0; i < t->n_fields; i++) {
        const char *name = t->fields[i].name;
        if (!sp_h5_has_attr(obj, name))
            continue;
        sp_h5_value v;
        SP_TRY(sp_h5_attr_read(obj, name, &v));
        sp_h5_value_format(&v, text, sizeof text);
        sp_h5_value_free(&v);
        sp_h5_where(obj, name, where, sizeof where);
        if (sp_fields_set(t, dst, name, text, where) != SP_OK)
            return SP_ERR_INPUT; /* a bad value in a file is bad input, not bad usage */
    }
    return SP_OK;
}

/* ---- datasets ---- */

hid_t sp_h5_float_type(sp_h5_float which)
{
    if (which == SP_H5_F64)
        return H5Tcopy(H5T_IEEE_F64LE);
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (which == SP_H5_F16) {
        /* IEEE binary16: sign bit 15, exponent bits 10..14 (bias 15), mantissa bits 0..9; the fields
         * must fit before the size shrinks */
        H5Tset_fields(t, 15, 10, 5, 0, 10);
        H5Tset_ebias(t, 15);
        H5Tset_size(t, 2);
    }
    return t;
}

hid_t sp_h5_real_type(void)
{
#ifdef SP_DOUBLE
    return H5T_NATIVE_DOUBLE;
#else
    return H5T_NATIVE_FLOAT;
#endif
}

void sp_h5_type_name(hid_t type, char *buf, size_t len)
{
    H5T_class_t cls = H5Tget_class(type);
    size_t bits = 8 * H5Tget_size(type);
    if (cls == H5T_FLOAT)
        snprintf(buf, len, "float%zu", bits);
    else if (cls == H5T_INTEGER)
        snprintf(buf, len, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
    else
        snprintf(buf, len, "%s", class_name(cls));
}

static void format_dims(int rank, const int64_t *dims, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
}

sp_status sp_h5_open_dataset(hid_t loc, const char *path, H5T_class_t cls, int rank, const int64_t *dims,
                             hid_t *dset, int64_t *found)
{
    hid_t d;
    SP_TRY(open_object(loc, path, H5O_TYPE_DATASET, &d));
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    H5T_class_t found_cls = H5Tget_class(type);
    int found_rank = H5Sget_simple_extent_ndims(space);
    hsize_t ext[H5S_MAX_RANK];
    int64_t got[H5S_MAX_RANK];
    char want_s[128], got_s[128], type_s[32];
    sp_status st = SP_OK;
    sp_h5_type_name(type, type_s, sizeof type_s);
    if (found_cls != cls) {
        st = fail_at(SP_ERR_INPUT, loc, path, "expected a %s dataset, found %s", class_name(cls), type_s);
    } else if (rank >= 0 && found_rank != rank) {
        st = fail_at(SP_ERR_INPUT, loc, path, "expected rank %d, found rank %d", rank, found_rank);
    } else if (found_rank < (rank < 0) || found_rank > SP_H5_MAX_RANK || H5Sget_simple_extent_dims(space, ext, NULL) < 0) {
        st = fail_at(SP_ERR_INPUT, loc, path, "expected rank 1..%d, found rank %d", SP_H5_MAX_RANK, found_rank);
    } else {
        rank = found_rank;
        for (int i = 0; i < rank; i++)
            got[i] = (int64_t)ext[i];
        for (int i = 0; i < rank && st == SP_OK; i++)
            if (dims && dims[i] >= 0 && got[i] != dims[i]) {
                format_dims(rank, dims, want_s, sizeof want_s);
                format_dims(rank, got, got_s, sizeof got_s);
                st = fail_at(SP_ERR_INPUT, loc, path, "expected shape %s, found %s", want_s, got_s);
            }
        if (st == SP_OK && found)
            memcpy(found, got, (size_t)rank * sizeof *found);
    }
    H5Tclose(type);
    H5Sclose(space);
    if (st != SP_OK) {
        H5Dclose(d);
        return st;
    }
    *dset = d;
    return SP_OK;
}

int sp_h5_rank(hid_t dset)
{
    hid_t space = H5Dget_space(dset);
    int rank = H5Sget_simple_extent_ndims(space);
    H5Sclose(space);
    return rank;
}

/* Selects start/count in the dataset's space and makes the matching memory space. */
static int select_slab(hid_t dset, const int64_t *start, const int64_t *count, hid_t *file_space, hid_t *mem_space)
{
    *file_space = H5S_ALL;
    *mem_space = H5S_ALL;
    if (!start)
        return 1;
    hid_t space = H5Dget_space(dset);
    int rank = H5Sget_simple_extent_ndims(space);
    hsize_t s[H5S_MAX_RANK], c[H5S_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        s[i] = (hsize_t)start[i];
        c[i] = (hsize_t)count[i];
    }
    if (rank < 1 || H5Sselect_hyperslab(space, H5S_SELECT_SET, s, NULL, c, NULL) < 0 ||
        H5Sselect_valid(space) <= 0) {
        H5Sclose(space);
        return 0;
    }
    *file_space = space;
    *mem_space = H5Screate_simple(rank, c, NULL);
    return 1;
}

static void close_slab(hid_t file_space, hid_t mem_space)
{
    if (file_space != H5S_ALL)
        H5Sclose(file_space);
    if (mem_space != H5S_ALL)
        H5Sclose(mem_space);
}

/* Reads the slab start/count (NULL: the whole dataset) into out, or when writing writes it from
 * data. A slab outside the dataset is bad input when reading, the caller's mistake when writing. */
static sp_status transfer_slab(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, int writing,
                               void *out, const void *data)
{
    hid_t fs, ms;
    if (!select_slab(dset, start, count, &fs, &ms))
        return writing ? fail_at(SP_ERR_USAGE, dset, NULL, "the slab to write lies outside the dataset")
                       : fail_at(SP_ERR_INPUT, dset, NULL, "the requested slab lies outside the dataset");
    herr_t rc = writing ? H5Dwrite(dset, mem_type, ms, fs, H5P_DEFAULT, data)
                        : H5Dread(dset, mem_type, ms, fs, H5P_DEFAULT, out);
    close_slab(fs, ms);
    if (rc >= 0)
        return SP_OK;
    if (writing)
        return fail_at(SP_ERR_IO, dset, NULL, "cannot write data");
    return fail_at(SP_ERR_INPUT, dset, NULL, "cannot read data (truncated or corrupt file, or no conversion)");
}

/* The dataset stores IEEE binary16 (any byte order). */
static int stores_binary16(hid_t dset)
{
    hid_t t = H5Dget_type(dset);
    size_t spos, epos, esize, mpos, msize;
    int yes = t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 2 &&
              H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 && epos == 10 && esize == 5 &&
              mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15;
    if (t >= 0)
        H5Tclose(t);
    return yes;
}

/* Elements of the slab (or of the whole dataset): 0 when it cannot be told. */
static size_t slab_numel(hid_t dset, const int64_t *count)
{
    hid_t space = H5Dget_space(dset);
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK];
    size_t n = rank >= 0 && H5Sget_simple_extent_dims(space, dims, NULL) >= 0 ? 1 : 0;
    for (int i = 0; n && i < rank; i++)
        n *= count ? (size_t)count[i] : (size_t)dims[i];
    if (space >= 0)
        H5Sclose(space);
    return n;
}

/* Every binary16 value as a float (io/half.h, exact), built once: a lookup is faster than the
 * branches of the conversion. */
static float half_table[65536];
static pthread_once_t half_table_once = PTHREAD_ONCE_INIT;

static void fill_half_table(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        half_table[h] = sp_half_to_float((uint16_t)h);
}

/* float16 into float32 or float64: libhdf5 converts binary16 one element at a time through its
 * generic soft-float path (about 35 times slower, bench/bench_h5_half.c), so the raw halves are read and
 * widened here. */
static sp_status read_binary16(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, void *out)
{
    const size_t n = slab_numel(dset, count);
    uint16_t *half = n ? malloc(n * sizeof *half) : NULL;
    if (!half)
        return transfer_slab(dset, mem_type, start, count, 0, out, NULL); /* libhdf5's own way */
    hid_t half_type = sp_h5_float_type(SP_H5_F16);
    H5Tset_order(half_type, H5Tget_order(H5T_NATIVE_FLOAT)); /* libhdf5 swaps bytes where the file's differ */
    sp_status st = transfer_slab(dset, half_type, start, count, 0, half, NULL);
    H5Tclose(half_type);
    pthread_once(&half_table_once, fill_half_table);
    if (st == SP_OK && H5Tequal(mem_type, H5T_NATIVE_DOUBLE) > 0)
        for (size_t i = 0; i < n; i++)
            ((double *)out)[i] = half_table[half[i]];
    else if (st == SP_OK)
        for (size_t i = 0; i < n; i++)
            ((float *)out)[i] = half_table[half[i]];
    free(half);
    return st;
}

sp_status sp_h5_read(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, void *out)
{
    if ((H5Tequal(mem_type, H5T_NATIVE_FLOAT) > 0 || H5Tequal(mem_type, H5T_NATIVE_DOUBLE) > 0) &&
        stores_binary16(dset))
        return read_binary16(dset, mem_type, start, count, out);
    return transfer_slab(dset, mem_type, start, count, 0, out, NULL);
}

sp_status sp_h5_create_dataset(hid_t loc, const char *path, hid_t type, int rank, const int64_t *dims,
                               const int64_t *chunk, const float *fill, hid_t *dset)
{
    SP_TRY(make_parents(loc, path));
    hsize_t ext[H5S_MAX_RANK], ch[H5S_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        ext[i] = (hsize_t)dims[i];
        ch[i] = chunk ? (hsize_t)chunk[i] : 0;
    }
    hid_t space = H5Screate_simple(rank, ext, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    /* tracking attribute order makes HDF5 give the dataset a version 2 object header, whose
     * checksum turns damage to its layout, type or shape into a read error instead of a misread or a
     * crash in the library (groups have one already: tracked_gcpl). The 1.8 format everywhere
     * (H5Pset_libver_bounds) would checksum the superblock too, but HDF5 1.10's file image of such a
     * file carries a wrong superblock checksum. */
    H5Pset_attr_creation_order(dcpl, H5P_CRT_ORDER_TRACKED);
    if (chunk)
        H5Pset_chunk(dcpl, rank, ch);
    if (fill)
        H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, fill);
    hid_t d = H5Dcreate2(loc, path, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (d < 0)
        return fail_at(SP_ERR_IO, loc, path, "cannot create dataset");
    *dset = d;
    return SP_OK;
}

sp_status sp_h5_write(hid_t dset, hid_t mem_type, const int64_t *start, const int64_t *count, const void *data)
{
    return transfer_slab(dset, mem_type, start, count, 1, NULL, data);
}

size_t sp_h5_count_nonfinite(const sp_real *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}
