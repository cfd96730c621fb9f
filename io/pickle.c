#include "io/pickle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/le.h"

static const struct {
    const char *name; /* "torch.<name>" */
    sp_pk_dtype dtype;
} storage_types[] = {
    {"FloatStorage", SP_PK_F32}, {"HalfStorage", SP_PK_F16}, {"BFloat16Storage", SP_PK_BF16},
    {"DoubleStorage", SP_PK_F64}, {"LongStorage", SP_PK_I64}, {"IntStorage", SP_PK_I32},
    {"ShortStorage", SP_PK_I16}, {"CharStorage", SP_PK_I8}, {"ByteStorage", SP_PK_U8}, {"BoolStorage", SP_PK_BOOL8},
};

static const char *const callables[] = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                        "torch._utils._rebuild_parameter"};

size_t sp_pk_dtype_size(sp_pk_dtype d)
{
    static const size_t size[SP_PK_N_DTYPES] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};
    return size[d];
}

const char *sp_pk_dtype_name(sp_pk_dtype d)
{
    static const char *const name[SP_PK_N_DTYPES] = {"float32", "float16", "bfloat16", "float64", "int64",
                                                     "int32", "int16", "int8", "uint8", "bool"};
    return name[d];
}

typedef struct {
    const unsigned char *p;
    size_t len, pos, op_pos;
    const char *where;
    sp_pk_tree *tree;
    sp_pk_value **stack;
    size_t n_stack, cap_stack;
    size_t *marks;
    size_t n_marks, cap_marks;
    sp_pk_value **memo;
    size_t cap_memo;
} vm;

static sp_status fail(const vm *m, const char *fmt, const char *detail)
{
    char what[512];
    snprintf(what, sizeof what, fmt, detail);
    return sp_error(SP_ERR_INPUT, "%s: pickle byte %zu: %s", m->where, m->op_pos, what);
}

/* Grows *array (of elem-byte items, capacity *cap) to hold n; 0 when memory runs out. */
static int grow(void *array, size_t *cap, size_t n, size_t elem)
{
    void **a = array;
    if (n <= *cap)
        return 1;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *q = realloc(*a, c * elem);
    if (!q)
        return 0;
    *a = q;
    *cap = c;
    return 1;
}

static sp_pk_value *node(vm *m, sp_pk_kind kind)
{
    if (!grow(&m->tree->nodes, &m->tree->cap, m->tree->n + 1, sizeof *m->tree->nodes))
        return NULL;
    sp_pk_value *v = calloc(1, sizeof *v);
    if (v) {
        v->kind = kind;
        m->tree->nodes[m->tree->n++] = v;
    }
    return v;
}

static sp_status push(vm *m, sp_pk_value *v)
{
    if (!v || !grow(&m->stack, &m->cap_stack, m->n_stack + 1, sizeof *m->stack))
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    m->stack[m->n_stack++] = v;
    return SP_OK;
}

static sp_pk_value *pop(vm *m)
{
    const size_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    return m->n_stack > floor ? m->stack[--m->n_stack] : NULL;
}

static sp_pk_value *top(const vm *m)
{
    const size_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    return m->n_stack > floor ? m->stack[m->n_stack - 1] : NULL;
}

static int take(vm *m, size_t n, const unsigned char **out)
{
    if (n > m->len - m->pos)
        return 0;
    *out = m->p + m->pos;
    m->pos += n;
    return 1;
}

static sp_status add_item(vm *m, sp_pk_value *to, sp_pk_value *item)
{
    if (!grow(&to->items, &to->cap, to->n + 1, sizeof *to->items))
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    to->items[to->n++] = item;
    return SP_OK;
}

/* A dict's items hold key, value, key, value, ...; n counts the pairs. */
static sp_status add_pair(vm *m, sp_pk_value *dict, sp_pk_value *key, sp_pk_value *value)
{
    if (!grow(&dict->items, &dict->cap, 2 * dict->n + 2, sizeof *dict->items))
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    dict->items[2 * dict->n] = key;
    dict->items[2 * dict->n + 1] = value;
    dict->n++;
    return SP_OK;
}

static sp_status text(vm *m, sp_pk_kind kind, size_t n)
{
    const unsigned char *b;
    if (!take(m, n, &b))
        return fail(m, "a string runs past the end%s", "");
    sp_pk_value *v = node(m, kind);
    char *s = v ? malloc(n + 1) : NULL;
    if (!s)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    memcpy(s, b, n);
    s[n] = '\0';
    v->str = s;
    v->len = n;
    return push(m, v);
}

static sp_status integer(vm *m, int64_t i)
{
    sp_pk_value *v = node(m, SP_PK_INT);
    if (v)
        v->i = i;
    return push(m, v);
}

/* The items above the newest mark, into a new container of kind (the mark removed). */
static sp_status collect(vm *m, sp_pk_kind kind)
{
    if (!m->n_marks)
        return fail(m, "no MARK before a collection%s", "");
    const size_t from = m->marks[--m->n_marks];
    sp_pk_value *v = node(m, kind);
    if (!v)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    if (kind == SP_PK_DICT && (m->n_stack - from) % 2)
        return fail(m, "a dict of an odd number of items%s", "");
    for (size_t i = from; i < m->n_stack; i += kind == SP_PK_DICT ? 2 : 1)
        SP_TRY(kind == SP_PK_DICT ? add_pair(m, v, m->stack[i], m->stack[i + 1]) : add_item(m, v, m->stack[i]));
    m->n_stack = from;
    return push(m, v);
}

static sp_status tuple_of(vm *m, int n)
{
    sp_pk_value *v = node(m, SP_PK_TUPLE), *items[3];
    if (!v)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    for (int k = n - 1; k >= 0; k--)
        if (!(items[k] = pop(m)))
            return fail(m, "a tuple of more items than the stack holds%s", "");
    for (int k = 0; k < n; k++)
        SP_TRY(add_item(m, v, items[k]));
    return push(m, v);
}

/* SETITEM(S) on the dict below the items; pairs from the stack above `from`. */
static sp_status set_items(vm *m, size_t from)
{
    if (from == 0 || (m->n_stack - from) % 2)
        return fail(m, "SETITEMS without a dict and key-value pairs%s", "");
    sp_pk_value *d = m->stack[from - 1];
    if (d->kind != SP_PK_DICT)
        return fail(m, "SETITEMS on something that is not a dict%s", "");
    for (size_t i = from; i < m->n_stack; i += 2)
        SP_TRY(add_pair(m, d, m->stack[i], m->stack[i + 1]));
    m->n_stack = from;
    return SP_OK;
}

static sp_status append_items(vm *m, size_t from)
{
    if (from == 0 || m->stack[from - 1]->kind != SP_PK_LIST)
        return fail(m, "APPEND on something that is not a list%s", "");
    sp_pk_value *l = m->stack[from - 1];
    for (size_t i = from; i < m->n_stack; i++)
        SP_TRY(add_item(m, l, m->stack[i]));
    m->n_stack = from;
    return SP_OK;
}

static sp_status global(vm *m, const char *module, const char *name)
{
    char full[512];
    snprintf(full, sizeof full, "%s.%s", module, name);
    int allowed = 0;
    for (size_t i = 0; i < SP_ARRAY_LEN(callables); i++)
        allowed |= strcmp(full, callables[i]) == 0;
    for (size_t i = 0; strcmp(module, "torch") == 0 && i < SP_ARRAY_LEN(storage_types); i++)
        allowed |= strcmp(name, storage_types[i].name) == 0;
    if (!allowed) {
        char shown[200];
        sp_escape_controls(full, shown, sizeof shown);
        return fail(m, "global '%s' is not allowed (a PyTorch file is read without running any of its code: only "
                       "tensors, storages and ordered dicts)", shown);
    }
    sp_pk_value *v = node(m, SP_PK_GLOBAL);
    if (v && !(v->str = strdup(full)))
        v = NULL;
    return push(m, v);
}

static sp_status line(vm *m, char *buf, size_t cap)
{
    const unsigned char *start = m->p + m->pos, *nl = memchr(start, '\n', m->len - m->pos);
    if (!nl || (size_t)(nl - start) >= cap)
        return fail(m, "a GLOBAL name without its end%s", "");
    memcpy(buf, start, (size_t)(nl - start));
    buf[nl - start] = '\0';
    m->pos += (size_t)(nl - start) + 1;
    return SP_OK;
}

static int is_int_tuple(const sp_pk_value *v, int max)
{
    if (!v || v->kind != SP_PK_TUPLE || v->n > (size_t)max)
        return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->kind != SP_PK_INT)
            return 0;
    return 1;
}

static sp_status persistent_id(vm *m)
{
    sp_pk_value *pid = pop(m);
    if (!pid || pid->kind != SP_PK_TUPLE || pid->n != 5 || pid->items[0]->kind != SP_PK_STR ||
        strcmp(pid->items[0]->str, "storage") != 0 || pid->items[1]->kind != SP_PK_GLOBAL ||
        pid->items[2]->kind != SP_PK_STR || pid->items[4]->kind != SP_PK_INT || pid->items[4]->i < 0)
        return fail(m, "a persistent id that is not ('storage', type, key, location, numel)%s", "");
    sp_pk_value *s = node(m, SP_PK_STORAGE);
    if (!s)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    const char *type = pid->items[1]->str;
    int found = 0;
    for (size_t i = 0; i < SP_ARRAY_LEN(storage_types) && !found; i++)
        if (strncmp(type, "torch.", 6) == 0 && strcmp(type + 6, storage_types[i].name) == 0) {
            s->dtype = storage_types[i].dtype;
            found = 1;
        }
    if (!found)
        return fail(m, "a storage of type '%s'", type);
    s->str = pid->items[2]->str;
    s->len = pid->items[2]->len;
    s->i = pid->items[4]->i;
    return push(m, s);
}

static sp_status reduce(vm *m)
{
    sp_pk_value *args = pop(m), *fn = pop(m);
    if (!args || !fn || fn->kind != SP_PK_GLOBAL || args->kind != SP_PK_TUPLE)
        return fail(m, "REDUCE of something that is not an allowed call%s", "");
    if (strcmp(fn->str, "collections.OrderedDict") == 0) {
        if (args->n != 0)
            return fail(m, "OrderedDict called with arguments%s", "");
        return push(m, node(m, SP_PK_DICT));
    }
    if (strcmp(fn->str, "torch._utils._rebuild_parameter") == 0) {
        if (args->n < 1 || args->items[0]->kind != SP_PK_TENSOR)
            return fail(m, "_rebuild_parameter without a tensor%s", "");
        return push(m, args->items[0]);
    }
    if (strcmp(fn->str, "torch._utils._rebuild_tensor_v2") != 0)
        return fail(m, "'%s' is not callable", fn->str);
    if (args->n < 4 || args->items[0]->kind != SP_PK_STORAGE || args->items[1]->kind != SP_PK_INT ||
        !is_int_tuple(args->items[2], SP_PK_MAX_RANK) || !is_int_tuple(args->items[3], SP_PK_MAX_RANK) ||
        args->items[2]->n != args->items[3]->n)
        return fail(m, "_rebuild_tensor_v2 without (storage, offset, size, stride)%s", "");
    sp_pk_value *t = node(m, SP_PK_TENSOR);
    if (!t)
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    t->storage = args->items[0];
    t->dtype = t->storage->dtype;
    t->offset = args->items[1]->i;
    t->rank = (int)args->items[2]->n;
    for (int k = 0; k < t->rank; k++) {
        t->shape[k] = args->items[2]->items[k]->i;
        t->stride[k] = args->items[3]->items[k]->i;
    }
    return push(m, t);
}

static sp_status memo_put(vm *m, uint64_t index)
{
    sp_pk_value *v = top(m);
    if (!v || index > m->len)
        return fail(m, "a memo entry beyond the pickle's size or of nothing%s", "");
    size_t old = m->cap_memo;
    if (!grow(&m->memo, &m->cap_memo, (size_t)index + 1, sizeof *m->memo))
        return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
    memset(m->memo + old, 0, (m->cap_memo - old) * sizeof *m->memo);
    m->memo[index] = v;
    return SP_OK;
}

static sp_status memo_get(vm *m, uint64_t index)
{
    if (index >= m->cap_memo || !m->memo[index])
        return fail(m, "a memo entry that was never stored%s", "");
    return push(m, m->memo[index]);
}

/* One opcode; *stop set at STOP. */
static sp_status step(vm *m, int *stop, size_t *memo_next)
{
    const unsigned char *b;
    m->op_pos = m->pos;
    if (!take(m, 1, &b))
        return fail(m, "the pickle ends without STOP%s", "");
    const unsigned char op = b[0];
    char module[256], name[256];
    sp_pk_value *v, *w;
    switch (op) {
    case 0x80: return take(m, 1, &b) ? SP_OK : fail(m, "truncated PROTO%s", "");
    case 0x95: return take(m, 8, &b) ? SP_OK : fail(m, "truncated FRAME%s", "");
    case '}': return push(m, node(m, SP_PK_DICT));
    case ']': return push(m, node(m, SP_PK_LIST));
    case ')': return push(m, node(m, SP_PK_TUPLE));
    case 'N': return push(m, node(m, SP_PK_NONE));
    case 0x88:
    case 0x89:
        if ((v = node(m, SP_PK_BOOL)))
            v->i = op == 0x88;
        return push(m, v);
    case '(':
        if (!grow(&m->marks, &m->cap_marks, m->n_marks + 1, sizeof *m->marks))
            return sp_error(SP_ERR_NOMEM, "%s: out of memory reading the pickle", m->where);
        m->marks[m->n_marks++] = m->n_stack;
        return SP_OK;
    case 'X': return take(m, 4, &b) ? text(m, SP_PK_STR, (size_t)sp_le_uint(b, 4)) : fail(m, "truncated string%s", "");
    case 0x8c: return take(m, 1, &b) ? text(m, SP_PK_STR, b[0]) : fail(m, "truncated string%s", "");
    case 0x8d: return take(m, 8, &b) ? text(m, SP_PK_STR, (size_t)sp_le_uint(b, 8)) : fail(m, "truncated string%s", "");
    case 'U': return take(m, 1, &b) ? text(m, SP_PK_STR, b[0]) : fail(m, "truncated string%s", "");
    case 'T': return take(m, 4, &b) ? text(m, SP_PK_STR, (size_t)sp_le_uint(b, 4)) : fail(m, "truncated string%s", "");
    case 'C': return take(m, 1, &b) ? text(m, SP_PK_BYTES, b[0]) : fail(m, "truncated bytes%s", "");
    case 'B': return take(m, 4, &b) ? text(m, SP_PK_BYTES, (size_t)sp_le_uint(b, 4)) : fail(m, "truncated bytes%s", "");
    case 0x8e: return take(m, 8, &b) ? text(m, SP_PK_BYTES, (size_t)sp_le_uint(b, 8)) : fail(m, "truncated bytes%s", "");
    case 'K': return take(m, 1, &b) ? integer(m, b[0]) : fail(m, "truncated int%s", "");
    case 'M': return take(m, 2, &b) ? integer(m, (int64_t)sp_le_uint(b, 2)) : fail(m, "truncated int%s", "");
    case 'J': return take(m, 4, &b) ? integer(m, (int32_t)(uint32_t)sp_le_uint(b, 4)) : fail(m, "truncated int%s", "");
    case 0x8a: {
        if (!take(m, 1, &b))
            return fail(m, "truncated LONG1%s", "");
        const size_t n = b[0];
        if (n > 8 || !take(m, n, &b))
            return fail(m, "a LONG1 of more than 8 bytes or past the end%s", "");
        uint64_t u = sp_le_uint(b, (int)n);
        if (n > 0 && n < 8 && (b[n - 1] & 0x80)) /* sign-extend */
            u |= ~(uint64_t)0 << (8 * n);
        return integer(m, (int64_t)u);
    }
    case 'G': {
        if (!take(m, 8, &b))
            return fail(m, "truncated BINFLOAT%s", "");
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | b[i]; /* big-endian */
        if ((v = node(m, SP_PK_FLOAT)))
            memcpy(&v->f, &u, sizeof v->f);
        return push(m, v);
    }
    case 't': return collect(m, SP_PK_TUPLE);
    case 'l': return collect(m, SP_PK_LIST);
    case 'd': return collect(m, SP_PK_DICT);
    case 0x85: return tuple_of(m, 1);
    case 0x86: return tuple_of(m, 2);
    case 0x87: return tuple_of(m, 3);
    case 'a': return m->n_stack >= 2 ? append_items(m, m->n_stack - 1) : fail(m, "APPEND on an empty stack%s", "");
    case 'e':
        if (!m->n_marks)
            return fail(m, "APPENDS without MARK%s", "");
        return append_items(m, m->marks[--m->n_marks]);
    case 's': return m->n_stack >= 3 ? set_items(m, m->n_stack - 2) : fail(m, "SETITEM on a short stack%s", "");
    case 'u':
        if (!m->n_marks)
            return fail(m, "SETITEMS without MARK%s", "");
        return set_items(m, m->marks[--m->n_marks]);
    case 'q': return take(m, 1, &b) ? memo_put(m, b[0]) : fail(m, "truncated BINPUT%s", "");
    case 'r': return take(m, 4, &b) ? memo_put(m, sp_le_uint(b, 4)) : fail(m, "truncated LONG_BINPUT%s", "");
    case 0x94: return memo_put(m, (*memo_next)++);
    case 'h': return take(m, 1, &b) ? memo_get(m, b[0]) : fail(m, "truncated BINGET%s", "");
    case 'j': return take(m, 4, &b) ? memo_get(m, sp_le_uint(b, 4)) : fail(m, "truncated LONG_BINGET%s", "");
    case 'c':
        SP_TRY(line(m, module, sizeof module));
        SP_TRY(line(m, name, sizeof name));
        return global(m, module, name);
    case 0x93:
        w = pop(m);
        v = pop(m);
        if (!v || !w || v->kind != SP_PK_STR || w->kind != SP_PK_STR || v->len >= 255 || w->len >= 255)
            return fail(m, "STACK_GLOBAL without a module and a name%s", "");
        return global(m, v->str, w->str);
    case 'Q': return persistent_id(m);
    case 'R': return reduce(m);
    case 'b': /* BUILD: the empty states torch writes for dicts and tensors, and a state dict's
                 attribute _metadata (the modules' versions, which nothing here needs: dropped) */
        w = pop(m);
        v = top(m);
        if (!w || !v ||
            !(w->kind == SP_PK_NONE || ((w->kind == SP_PK_DICT || w->kind == SP_PK_TUPLE) && w->n == 0) ||
              (v->kind == SP_PK_DICT && w->kind == SP_PK_DICT && w->n == 1 && w->items[0]->kind == SP_PK_STR &&
               strcmp(w->items[0]->str, "_metadata") == 0)))
            return fail(m, "BUILD with a state%s", "");
        return SP_OK;
    case '.':
        *stop = 1;
        return SP_OK;
    default: {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", op);
        return fail(m, "opcode %s is not supported (not one torch.save writes)", hex);
    }
    }
}

sp_status sp_pickle_load(const unsigned char *data, size_t len, const char *where, sp_pk_tree *tree,
                         sp_pk_value **root)
{
    *root = NULL;
    *tree = (sp_pk_tree){0};
    vm m = {.p = data, .len = len, .where = where, .tree = tree};
    int stop = 0;
    size_t memo_next = 0;
    sp_status st = SP_OK;
    while (st == SP_OK && !stop)
        st = step(&m, &stop, &memo_next);
    if (st == SP_OK && (m.n_stack != 1 || m.n_marks))
        st = fail(&m, "STOP with the stack not holding exactly one value%s", "");
    if (st == SP_OK)
        *root = m.stack[0];
    free(m.stack);
    free(m.marks);
    free(m.memo);
    return st;
}

void sp_pickle_free(sp_pk_tree *tree)
{
    for (size_t i = 0; i < tree->n; i++) {
        sp_pk_value *v = tree->nodes[i];
        if (v->kind != SP_PK_STORAGE) /* a storage borrows its key from the persistent id */
            free(v->str);
        free(v->items);
        free(v);
    }
    free(tree->nodes);
    *tree = (sp_pk_tree){0};
}

const sp_pk_value *sp_pk_get(const sp_pk_value *dict, const char *key)
{
    if (!dict || dict->kind != SP_PK_DICT)
        return NULL;
    for (size_t i = 0; i < dict->n; i++) {
        const sp_pk_value *k = dict->items[2 * i];
        if (k->kind == SP_PK_STR && strcmp(k->str, key) == 0)
            return dict->items[2 * i + 1];
    }
    return NULL;
}
