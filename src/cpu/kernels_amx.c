/*  kernels_amx.c: the BF16 product on AMX tiles (Sapphire Rapids and later), TDPBF16PS over blocks
 *  of up to 32 rows x 32 columns of C in four accumulator tiles. The packed layout of B is already
 *  AMX's: 16 depth pairs of one panel are one B tile (16 rows of 64 bytes). Softmax, SwiGLU and the
 *  rounding are the avx512bf16 table's. Compiled with AMX and AVX-512 flags, and only called after a
 *  CPU check and the OS's grant of the tile state (uform_amx_permitted, kernels.c). */
#define _DEFAULT_SOURCE /* syscall() */
#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/kernels.h"

/* Linux grants the 8 KiB tile state to a process only on request (arch/x86/include/uapi/asm/prctl.h). */
enum { uform_arch_req_xcomp_perm_k = 0x1023, uform_xfeature_xtiledata_k = 18 };
/* Tiles: C[r][p] is tile 2r + p, A rows r are tile 4 + r, B panel p is tile 6 + p. */
enum { uform_amx_pairs_k = 16, uform_amx_rows_k = 16 };

static int uform_amx_granted_;
static pthread_once_t uform_amx_once_ = PTHREAD_ONCE_INIT;

static void uform_amx_request_(void) {
    uform_amx_granted_ = syscall(SYS_arch_prctl, uform_arch_req_xcomp_perm_k, uform_xfeature_xtiledata_k) == 0;
}

int uform_amx_permitted(void) {
    pthread_once(&uform_amx_once_, uform_amx_request_);
    return uform_amx_granted_;
}

/* GCC's tile intrinsics name only a pointer, not the memory read through it: this tells the compiler
 * that the bytes at `scratch` are read, so the copies into it are neither dropped nor moved past. */
static inline void uform_amx_read_(void const *scratch) { __asm__ __volatile__("" : : "r"(scratch) : "memory"); }

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct uform_tile_config_t {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} uform_tile_config_t;

/* Shapes the tiles for blocks whose first row tile has `first` rows and whose second has `second` (0: none). */
static void uform_amx_configure_(size_t first, size_t second) {
    uform_tile_config_t config;
    memset(&config, 0, sizeof(config));
    config.palette = 1;
    for (int r = 0; r < 2; ++r) {
        uint8_t count = (uint8_t)(r ? second : first);
        if (!count) continue;
        for (int p = 0; p < 2; ++p) config.rows[2 * r + p] = count, config.bytes_per_row[2 * r + p] = 64;
        config.rows[4 + r] = count, config.bytes_per_row[4 + r] = 64;
    }
    for (int p = 0; p < 2; ++p) config.rows[6 + p] = uform_amx_pairs_k, config.bytes_per_row[6 + p] = 64;
    uform_amx_read_(&config);
    _tile_loadconfig(&config);
}

/* C[r][p] += A rows r (at `a` and `a_second`, rows `a_bytes` apart) x B panel p (`b`, `b_second`):
 * one depth step of 16 pairs, over the row tiles and panels the block has. */
static inline void uform_amx_multiply_(uint16_t const *a, uint16_t const *a_second, size_t a_bytes, uint16_t const *b,
                                       uint16_t const *b_second, int row_tiles, int panels) {
    _tile_loadd(4, a, a_bytes);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (panels == 2) {
        _tile_loadd(7, b_second, 64);
        _tile_dpbf16ps(1, 4, 7);
    }
    if (row_tiles == 2) {
        _tile_loadd(5, a_second, a_bytes);
        _tile_dpbf16ps(2, 5, 6);
        if (panels == 2) _tile_dpbf16ps(3, 5, 7);
    }
}

/* C [row_tiles tiles of rows, panels of 16 columns] of one block: the whole depth steps of 16 pairs
 * straight from A and B, the tail of `tail` pairs from zero-padded copies (`b_tail`, both panels,
 * made by the caller), and the stores, through a scratch tile where the last panel is partial.
 * `next` (or NULL): the next pair of panels, prefetched a step's share at a time, so that the
 * weights arrive from memory while this pair's first block computes. */
static void uform_amx_block_(uint16_t const *a, size_t a_stride, uint16_t const *b, size_t pairs, size_t steps,
                             size_t tail, uint16_t const *b_tail, size_t rows, int panels, size_t valid, float *c,
                             size_t c_stride, char const *next) {
    int row_tiles = rows > uform_amx_rows_k ? 2 : 1;
    size_t a_bytes = a_stride * sizeof(uint16_t), second = a_stride * uform_amx_rows_k;
    _tile_zero(0); /* only configured tiles may be touched */
    if (panels == 2) _tile_zero(1);
    if (row_tiles == 2) _tile_zero(2);
    if (row_tiles == 2 && panels == 2) _tile_zero(3);
    for (size_t step = 0; step < steps; ++step) {
        uint16_t const *a_step = a + step * 2 * uform_amx_pairs_k, *b_step = b + step * uform_amx_pairs_k * 32;
        if (next)
            for (int line = 0; line < 32; ++line) _mm_prefetch(next + step * 2048 + line * 64, _MM_HINT_T0);
        uform_amx_multiply_(a_step, a_step + second, a_bytes, b_step, b_step + pairs * 32, row_tiles, panels);
    }
    if (tail) {
        uint16_t a_tail[2][uform_amx_rows_k][2 * uform_amx_pairs_k];
        memset(a_tail, 0, sizeof(a_tail));
        for (size_t r = 0; r < rows; ++r)
            memcpy(a_tail[r / uform_amx_rows_k][r % uform_amx_rows_k], a + r * a_stride + steps * 2 * uform_amx_pairs_k,
                   tail * 2 * sizeof(uint16_t));
        uform_amx_read_(a_tail);
        uform_amx_multiply_(&a_tail[0][0][0], &a_tail[1][0][0], 64, b_tail, b_tail + uform_amx_pairs_k * 32, row_tiles,
                            panels);
    }
    size_t c_bytes = c_stride * sizeof(float);
    float *c_second = c + c_stride * uform_amx_rows_k;
    if (panels == 1 && valid < 16) {
        float spill[2][uform_amx_rows_k][16];
        _tile_stored(0, spill[0], 64);
        if (row_tiles == 2) _tile_stored(2, spill[1], 64);
        for (size_t r = 0; r < rows; ++r)
            memcpy(c + r * c_stride, spill[r / uform_amx_rows_k][r % uform_amx_rows_k], valid * sizeof(float));
        return;
    }
    _tile_stored(0, c, c_bytes);
    if (row_tiles == 2) _tile_stored(2, c_second, c_bytes);
    if (panels == 1) return;
    if (valid == 16) {
        _tile_stored(1, c + 16, c_bytes);
        if (row_tiles == 2) _tile_stored(3, c_second + 16, c_bytes);
        return;
    }
    float spill[2][uform_amx_rows_k][16];
    _tile_stored(1, spill[0], 64);
    if (row_tiles == 2) _tile_stored(3, spill[1], 64);
    for (size_t r = 0; r < rows; ++r)
        memcpy(c + r * c_stride + 16, spill[r / uform_amx_rows_k][r % uform_amx_rows_k], valid * sizeof(float));
}

/* One pass over the column blocks for the row blocks [first, last), all shaped alike. */
static void uform_amx_rows_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                            size_t first, size_t last, size_t width, size_t pairs) {
    size_t panels = (width + 15) / 16, used = UFORM_PAIRS_USED(pairs);
    size_t steps = used / uform_amx_pairs_k, tail = used % uform_amx_pairs_k;
    uint16_t b_tail[2][uform_amx_pairs_k][32];
    for (size_t panel = 0; panel < panels; panel += 2) {
        int group = panels - panel < 2 ? 1 : 2;
        size_t valid = width - (panel + (size_t)group - 1) * 16;
        uint16_t const *b = packed + panel * pairs * 32;
        if (tail) {
            memset(b_tail, 0, sizeof(b_tail));
            for (int p = 0; p < group; ++p)
                memcpy(b_tail[p], b + ((size_t)p * pairs + steps * uform_amx_pairs_k) * 32,
                       tail * 32 * sizeof(uint16_t));
            uform_amx_read_(b_tail);
        }
        for (size_t row = first; row < last; row += 2 * uform_amx_rows_k) {
            size_t count = last - row < 2 * uform_amx_rows_k ? last - row : 2 * uform_amx_rows_k;
            uform_amx_block_(a + row * a_stride, a_stride, b, pairs, steps, tail, &b_tail[0][0][0], count, group,
                             valid > 16 ? 16 : valid, c + row * c_stride + panel * 16, c_stride,
                             row == first && panel + 2 < panels ? (char const *)(b + 2 * pairs * 32) : NULL);
        }
    }
}

/* The whole blocks of 32 rows under one tile shape, then the last partial block under its own. */
static void uform_gemm_amx_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                            size_t rows, size_t width, size_t depth) {
    size_t pairs = (depth + 1) / 2, whole = rows - rows % (2 * uform_amx_rows_k), rest = rows - whole;
    if (whole) {
        uform_amx_configure_(uform_amx_rows_k, uform_amx_rows_k);
        uform_amx_rows_(a, a_stride, packed, c, c_stride, 0, whole, width, pairs);
    }
    if (rest) {
        size_t first = rest < uform_amx_rows_k ? rest : uform_amx_rows_k;
        uform_amx_configure_(first, rest - first);
        uform_amx_rows_(a, a_stride, packed, c, c_stride, whole, rows, width, pairs);
    }
    _tile_release(); /* the 8 KiB tile state need not be saved at the next context switch */
}

/* Only the product has tiles: the rest is avx512bf16's (kernels_avx512_elementwise.c), int8 VNNI's
 * (AMX-INT8's tiles are not used). */
uform_kernels_t const uform_kernels_amx = {"amx", uform_gemm_amx_, uform_softmax_bf16_avx512bf16, uform_swiglu_bf16_avx512bf16,
                                           uform_round_bf16_avx512bf16, uform_widen_e4m3_avx2,
                                           uform_quantize_e4m3_avx512bf16, uform_swiglu_f32_avx512bf16,
                                           uform_quantize_int8_avx512, uform_gemm_int8_avx512vnni};
