/* io/pt_file.h: a PyTorch checkpoint as torch.save writes it (a ZIP archive of stored entries:
 * <name>/data.pkl, the pickle of the saved object, and <name>/data/<key>, one per storage), read
 * without running any of its code (io/pickle.h). The file is mapped; tensors are read out of it. */
#ifndef SP_PT_FILE_H
#define SP_PT_FILE_H

#include "io/mapped_file.h"
#include "io/pickle.h"

typedef struct sp_pt_file sp_pt_file;

/* Opens path: the archive's directory, its one data.pkl unpickled, every tensor's storage found
 * and its extent checked. A file that is not such an archive (the legacy pre-1.6 format included),
 * a compressed entry, a disallowed global or a tensor reaching past its storage is SP_ERR_INPUT
 * naming the path; SP_ERR_IO when it cannot be read. */
sp_status sp_pt_open(const char *path, sp_pt_file **out);
void sp_pt_close(sp_pt_file *f);
/* The path the file was opened by. */
const char *sp_pt_path(const sp_pt_file *f);
/* The saved object (a dict for a state dict or a checkpoint). */
const sp_pk_value *sp_pt_root(const sp_pt_file *f);
/* Elements of a tensor (the product of its shape). */
size_t sp_pt_numel(const sp_pk_value *tensor);
/* A floating-point tensor's values widened to float64 in row-major order of its shape (whatever its
 * strides), into out[sp_pt_numel]. SP_ERR_INPUT for an integer or bool tensor. */
sp_status sp_pt_read_f64(const sp_pt_file *f, const sp_pk_value *tensor, double *out);
/* Elements first .. first + count - 1 of a floating-point tensor (row-major order of its shape) as
 * sp_real, into out[count]. */
sp_status sp_pt_read(const sp_pt_file *f, const sp_pk_value *tensor, size_t first, size_t count, sp_real *out);

#endif
