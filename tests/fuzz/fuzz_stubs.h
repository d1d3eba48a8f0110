/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_stubs.h -- an in-memory stand-in for the parts of the Redis module API
 * that the type callbacks (src/captcha/captcha_type.c, src/captcha/legacy_type.c,
 * src/ratelimit/ratelimit_type.c, src/lock/lock_type.c) call. The lock type's
 * load hook is not here: fuzz_rdb_load.c installs a recording stub.
 *
 * Include it from a harness translation unit AFTER the glue .c files (which pull
 * in redismodule.h and its RedisModule_* function pointers), then call
 * fuzz_install_stubs() once. The pointers are plain globals that
 * RedisModule_Init would fill; here every one the glue code reaches is pointed
 * at a stub below, the rest stay NULL (a call through one crashes loudly).
 *
 * I/O format of the stand-in RDB stream (RedisModuleIO):
 *   unsigned / signed : LEB128 varint (signed: zigzag), at most 10 bytes;
 *   string buffer     : varint length, then the bytes;
 *   double            : 8 raw bytes.
 * Like the real API with REDISMODULE_OPTIONS_HANDLE_IO_ERRORS, a read past the
 * end (or a malformed varint) sets the error flag and returns 0 / NULL, and
 * every read after an error returns 0 / NULL too.
 *
 * Stand-ins also provided: the module's clock (mc_now_ms, settable through
 * g_fuzz_now_ms), the cluster flag (server/cluster.c's mc_cluster_enabled),
 * RedisModuleString (ptr+len), a digest that records what is fed to it, and an
 * EmitAOF that records the emitted command as strings. */
#ifndef FUZZ_STUBS_H
#define FUZZ_STUBS_H

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* Set FUZZ_SKIP_KNOWN=1 to turn off the checks of findings already reported
 * (see README.md), so that a long run keeps looking for new ones. */
static int fuzz_skip_known(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_SKIP_KNOWN");
        v = e && *e && *e != '0';
    }
    return v;
}

/* ---- Things server/clock.c and server/cluster.c define ---- */
int mc_cluster_enabled;
static uint64_t g_fuzz_now_ms = 1700000000000ULL;
uint64_t mc_now_ms(void) { return g_fuzz_now_ms; }

/* ---- RedisModuleString ---- */
struct RedisModuleString {
    size_t len;
    char *ptr; /* NUL-terminated copy, like an sds */
};

static long long g_live_strings; /* created minus freed: must return to 0 */

static RedisModuleString *stub_CreateString(RedisModuleCtx *ctx, const char *ptr, size_t len) {
    (void)ctx;
    RedisModuleString *s = malloc(sizeof(*s));
    s->len = len;
    s->ptr = malloc(len + 1);
    if (len) memcpy(s->ptr, ptr, len);
    s->ptr[len] = '\0';
    g_live_strings++;
    return s;
}

static RedisModuleString *stub_CreateStringFromLongLong(RedisModuleCtx *ctx, long long ll) {
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%lld", ll);
    return stub_CreateString(ctx, buf, (size_t)n);
}

static RedisModuleString *stub_CreateStringFromString(RedisModuleCtx *ctx, const RedisModuleString *str) {
    return stub_CreateString(ctx, str->ptr, str->len);
}

static RedisModuleString *stub_CreateStringPrintf(RedisModuleCtx *ctx, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof(buf)) n = sizeof(buf) - 1;
    return stub_CreateString(ctx, buf, (size_t)n);
}

static void stub_FreeString(RedisModuleCtx *ctx, RedisModuleString *str) {
    (void)ctx;
    if (str == NULL) return;
    g_live_strings--;
    free(str->ptr);
    free(str);
}

static const char *stub_StringPtrLen(const RedisModuleString *str, size_t *len) {
    if (len) *len = str->len;
    return str->ptr;
}

/* Redis' string2ll (util.c): strict, no spaces, no '+', no leading zeros, no
 * "-0", fits a long long, at most 20 characters. */
static int fuzz_string2ll(const char *s, size_t slen, long long *value) {
    const char *p = s;
    size_t plen = 0;
    int negative = 0;
    unsigned long long v;
    if (slen == 0 || slen >= 21) return 0;
    if (slen == 1 && p[0] == '0') {
        *value = 0;
        return 1;
    }
    if (p[0] == '-') {
        negative = 1;
        p++;
        plen++;
        if (plen == slen) return 0;
    }
    if (p[0] >= '1' && p[0] <= '9') {
        v = (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    } else {
        return 0;
    }
    while (plen < slen && p[0] >= '0' && p[0] <= '9') {
        if (v > (~0ULL) / 10) return 0;
        v *= 10;
        if (v > (~0ULL) - (unsigned long long)(p[0] - '0')) return 0;
        v += (unsigned long long)(p[0] - '0');
        p++;
        plen++;
    }
    if (plen < slen) return 0;
    if (negative) {
        if (v > ((unsigned long long)(-(LLONG_MIN + 1)) + 1)) return 0;
        *value = v == ((unsigned long long)(-(LLONG_MIN + 1)) + 1) ? LLONG_MIN : -(long long)v;
    } else {
        if (v > LLONG_MAX) return 0;
        *value = (long long)v;
    }
    return 1;
}

static int stub_StringToLongLong(const RedisModuleString *str, long long *ll) {
    return fuzz_string2ll(str->ptr, str->len, ll) ? REDISMODULE_OK : REDISMODULE_ERR;
}

/* ---- Allocation: libc ---- */
static void *stub_Alloc(size_t n) { return malloc(n ? n : 1); }
static void *stub_Calloc(size_t a, size_t b) { return calloc(a ? a : 1, b ? b : 1); }
static void *stub_Realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
static void stub_Free(void *p) { free(p); }
static char *stub_Strdup(const char *s) { return strdup(s); }

/* ---- RedisModuleIO: a reader over the fuzz input, or a growable writer ---- */
struct RedisModuleIO {
    const uint8_t *in;
    size_t in_len, pos;
    int error;
    int nlogged;           /* LogIOError calls */
    uint8_t *out;          /* saver */
    size_t out_len, out_cap;
    const RedisModuleString *key; /* GetKeyNameFromIO */
    int dbid;
    /* EmitAOF record */
    RedisModuleString **aof_argv; /* grown by aof_push: a captcha may have up to
                                   * CAPTCHA_MAX_LEVELS (2^20) levels, 2 arguments each */
    size_t aof_argc, aof_cap;
    char aof_cmd[64];
    int aof_emits;
};

static void fio_reader(RedisModuleIO *io, const uint8_t *data, size_t len) {
    memset(io, 0, sizeof(*io));
    io->in = data;
    io->in_len = len;
}

static void fio_reset_aof(RedisModuleIO *io) {
    for (size_t i = 0; i < io->aof_argc; i++) stub_FreeString(NULL, io->aof_argv[i]);
    free(io->aof_argv);
    io->aof_argv = NULL;
    io->aof_argc = io->aof_cap = 0;
    io->aof_emits = 0;
    io->aof_cmd[0] = '\0';
}

static void fio_free(RedisModuleIO *io) {
    free(io->out);
    io->out = NULL;
    io->out_len = io->out_cap = 0;
    fio_reset_aof(io);
}

static int fio_get_varint(RedisModuleIO *io, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (io->pos >= io->in_len) return -1;
        uint8_t b = io->in[io->pos++];
        if (shift == 63 && b > 1) return -1; /* would overflow 64 bits */
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static void fio_put(RedisModuleIO *io, const void *p, size_t n) {
    if (io->out_len + n > io->out_cap) {
        size_t cap = io->out_cap ? io->out_cap * 2 : 256;
        while (cap < io->out_len + n) cap *= 2;
        io->out = realloc(io->out, cap);
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_len, p, n);
    io->out_len += n;
}

static void fio_put_varint(RedisModuleIO *io, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = v & 0x7f;
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    fio_put(io, b, n);
}

static uint64_t stub_LoadUnsigned(RedisModuleIO *io) {
    uint64_t v;
    if (io->error) return 0;
    if (fio_get_varint(io, &v) != 0) {
        io->error = 1;
        return 0;
    }
    return v;
}

static int64_t stub_LoadSigned(RedisModuleIO *io) {
    uint64_t v = stub_LoadUnsigned(io);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Like the real one: a RedisModule_Alloc'ed buffer of exactly len bytes, not
 * NUL-terminated (rdbGenericLoadStringObject with RDB_LOAD_PLAIN). */
static char *stub_LoadStringBuffer(RedisModuleIO *io, size_t *lenptr) {
    uint64_t len;
    if (io->error) return NULL;
    if (fio_get_varint(io, &len) != 0 || len > io->in_len - io->pos) {
        io->error = 1;
        return NULL;
    }
    char *buf = malloc(len ? len : 1);
    if (len) memcpy(buf, io->in + io->pos, len);
    io->pos += len;
    if (lenptr) *lenptr = len;
    return buf;
}

static RedisModuleString *stub_LoadString(RedisModuleIO *io) {
    size_t len;
    char *buf = stub_LoadStringBuffer(io, &len);
    if (buf == NULL) return NULL;
    RedisModuleString *s = stub_CreateString(NULL, buf, len);
    free(buf);
    return s;
}

static double stub_LoadDouble(RedisModuleIO *io) {
    double d;
    if (io->error) return 0;
    if (io->in_len - io->pos < sizeof(d)) {
        io->error = 1;
        return 0;
    }
    memcpy(&d, io->in + io->pos, sizeof(d));
    io->pos += sizeof(d);
    return d;
}

static int stub_IsIOError(RedisModuleIO *io) { return io->error; }

static void stub_LogIOError(RedisModuleIO *io, const char *levelstr, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    FUZZ_CHECK(levelstr != NULL && fmt != NULL);
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    io->nlogged++;
}

static void stub_Log(RedisModuleCtx *ctx, const char *levelstr, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    (void)ctx;
    FUZZ_CHECK(levelstr != NULL && fmt != NULL);
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
}

static void stub_SaveUnsigned(RedisModuleIO *io, uint64_t v) { fio_put_varint(io, v); }
static void stub_SaveSigned(RedisModuleIO *io, int64_t v) {
    fio_put_varint(io, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static void stub_SaveStringBuffer(RedisModuleIO *io, const char *str, size_t len) {
    fio_put_varint(io, len);
    if (len) fio_put(io, str, len);
}
static void stub_SaveString(RedisModuleIO *io, RedisModuleString *s) {
    stub_SaveStringBuffer(io, s->ptr, s->len);
}
static void stub_SaveDouble(RedisModuleIO *io, double d) { fio_put(io, &d, sizeof(d)); }

static const RedisModuleString *stub_GetKeyNameFromIO(RedisModuleIO *io) { return io->key; }
static int stub_GetDbIdFromIO(RedisModuleIO *io) { return io->dbid; }

static void aof_push(RedisModuleIO *io, RedisModuleString *s) {
    if (io->aof_argc == io->aof_cap) {
        io->aof_cap = io->aof_cap ? io->aof_cap * 2 : 64;
        io->aof_argv = realloc(io->aof_argv, io->aof_cap * sizeof(*io->aof_argv));
        FUZZ_CHECK(io->aof_argv != NULL);
    }
    io->aof_argv[io->aof_argc++] = s;
}

/* Records the command's arguments (after the name) as strings. */
static void stub_EmitAOF(RedisModuleIO *io, const char *cmdname, const char *fmt, ...) {
    va_list ap;
    io->aof_emits++;
    snprintf(io->aof_cmd, sizeof(io->aof_cmd), "%s", cmdname);
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        switch (*f) {
        case 's': {
            RedisModuleString *s = va_arg(ap, RedisModuleString *);
            aof_push(io, stub_CreateStringFromString(NULL, s));
            break;
        }
        case 'l':
            aof_push(io, stub_CreateStringFromLongLong(NULL, va_arg(ap, long long)));
            break;
        case 'c': {
            const char *c = va_arg(ap, const char *);
            aof_push(io, stub_CreateString(NULL, c, strlen(c)));
            break;
        }
        case 'b': {
            const char *p = va_arg(ap, const char *);
            size_t n = va_arg(ap, size_t);
            aof_push(io, stub_CreateString(NULL, p, n));
            break;
        }
        case 'v': {
            RedisModuleString **v = va_arg(ap, RedisModuleString **);
            size_t n = va_arg(ap, size_t);
            for (size_t i = 0; i < n; i++) aof_push(io, stub_CreateStringFromString(NULL, v[i]));
            break;
        }
        default:
            fprintf(stderr, "EmitAOF: unknown format char '%c'\n", *f);
            abort();
        }
    }
    va_end(ap);
}

/* ---- Digest: records every value in order ---- */
struct RedisModuleDigest {
    uint8_t *buf;
    size_t len, cap;
};

static void dig_put(RedisModuleDigest *md, const void *p, size_t n) {
    if (md->len + n > md->cap) {
        size_t cap = md->cap ? md->cap * 2 : 256;
        while (cap < md->len + n) cap *= 2;
        md->buf = realloc(md->buf, cap);
        md->cap = cap;
    }
    memcpy(md->buf + md->len, p, n);
    md->len += n;
}
static void stub_DigestAddLongLong(RedisModuleDigest *md, long long v) {
    dig_put(md, "L", 1);
    dig_put(md, &v, sizeof(v));
}
static void stub_DigestAddStringBuffer(RedisModuleDigest *md, const char *p, size_t n) {
    dig_put(md, "S", 1);
    dig_put(md, &n, sizeof(n));
    if (n) dig_put(md, p, n);
}
static void stub_DigestEndSequence(RedisModuleDigest *md) { dig_put(md, "E", 1); }
static void dig_free(RedisModuleDigest *md) {
    free(md->buf);
    memset(md, 0, sizeof(*md));
}
static int dig_equal(const RedisModuleDigest *a, const RedisModuleDigest *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0);
}

/* ---- Keyspace stubs for legacy_type.c's drop_pending(ctx, 0) ---- */
static int g_selected_db;
static int stub_GetSelectedDb(RedisModuleCtx *ctx) {
    (void)ctx;
    return g_selected_db;
}
static int stub_SelectDb(RedisModuleCtx *ctx, int id) {
    (void)ctx;
    if (id < 0 || id > 15) return REDISMODULE_ERR;
    g_selected_db = id;
    return REDISMODULE_OK;
}
static long long stub_Milliseconds(void) { return (long long)g_fuzz_now_ms; }

static void fuzz_install_stubs(void) {
    RedisModule_Alloc = stub_Alloc;
    RedisModule_Calloc = stub_Calloc;
    RedisModule_Realloc = stub_Realloc;
    RedisModule_Free = stub_Free;
    RedisModule_Strdup = stub_Strdup;
    RedisModule_CreateString = stub_CreateString;
    RedisModule_CreateStringFromLongLong = stub_CreateStringFromLongLong;
    RedisModule_CreateStringFromString = stub_CreateStringFromString;
    RedisModule_CreateStringPrintf = stub_CreateStringPrintf;
    RedisModule_FreeString = stub_FreeString;
    RedisModule_StringPtrLen = stub_StringPtrLen;
    RedisModule_StringToLongLong = stub_StringToLongLong;
    RedisModule_LoadUnsigned = stub_LoadUnsigned;
    RedisModule_LoadSigned = stub_LoadSigned;
    RedisModule_LoadStringBuffer = stub_LoadStringBuffer;
    RedisModule_LoadString = stub_LoadString;
    RedisModule_LoadDouble = stub_LoadDouble;
    RedisModule_IsIOError = stub_IsIOError;
    RedisModule_LogIOError = stub_LogIOError;
    RedisModule_Log = stub_Log;
    RedisModule_SaveUnsigned = stub_SaveUnsigned;
    RedisModule_SaveSigned = stub_SaveSigned;
    RedisModule_SaveStringBuffer = stub_SaveStringBuffer;
    RedisModule_SaveString = stub_SaveString;
    RedisModule_SaveDouble = stub_SaveDouble;
    RedisModule_GetKeyNameFromIO = stub_GetKeyNameFromIO;
    RedisModule_GetDbIdFromIO = stub_GetDbIdFromIO;
    RedisModule_EmitAOF = stub_EmitAOF;
    RedisModule_DigestAddLongLong = stub_DigestAddLongLong;
    RedisModule_DigestAddStringBuffer = stub_DigestAddStringBuffer;
    RedisModule_DigestEndSequence = stub_DigestEndSequence;
    RedisModule_GetSelectedDb = stub_GetSelectedDb;
    RedisModule_SelectDb = stub_SelectDb;
    RedisModule_Milliseconds = stub_Milliseconds;
}

#endif
