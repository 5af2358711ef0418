/*  kernels_amx.c: the BF16 and int8 products on AMX tiles (Sapphire Rapids and later), TDPBF16PS and
 *  TDPBUSD over blocks of up to 32 rows x 32 columns of C in four accumulator tiles. The packed layouts
 *  of B are already AMX's: 16 depth pairs (BF16) or quads (int8) of one panel are one B tile (16 rows of 64 bytes). Softmax, SwiGLU and the
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
enum { uform_amx_units_k = 16, uform_amx_rows_k = 16 };

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
    for (int p = 0; p < 2; ++p) config.rows[6 + p] = uform_amx_units_k, config.bytes_per_row[6 + p] = 64;
    uform_amx_read_(&config);
    _tile_loadconfig(&config);
}

/* The two products the tiles run alike: BF16 pairs into Float32 (TDPBF16PS) and int8 quads into
 * int32 (TDPBUSD). In bytes their layouts are the same: a depth unit (a pair or a quad) is 4 bytes
 * of an A row and 64 bytes of a B panel, 16 units one tile step. An int8 product's sums leave the
 * tiles through `uform_amx_int8_t`'s epilogue (the correction and both scales); a BF16 one's as they are. */
typedef struct uform_amx_int8_t {
    int32_t const *corrections;
    float const *row_scales, *scales;
} uform_amx_int8_t;

#define UFORM_AMX_DOT_(C, A, B)         \
    do {                                \
        if (int8)                       \
            _tile_dpbusd(C, A, B);      \
        else                            \
            _tile_dpbf16ps(C, A, B);    \
    } while (0)

/* C[r][p] += A rows r (at `a` and `a_second`, rows `a_bytes` apart) x B panel p (`b`, `b_second`):
 * one depth step of 16 units, over the row tiles and panels the block has. */
static inline void uform_amx_multiply_(char const *a, char const *a_second, size_t a_bytes, char const *b,
                                       char const *b_second, int row_tiles, int panels, int int8) {
    _tile_loadd(4, a, a_bytes);
    _tile_loadd(6, b, 64);
    UFORM_AMX_DOT_(0, 4, 6);
    if (panels == 2) {
        _tile_loadd(7, b_second, 64);
        UFORM_AMX_DOT_(1, 4, 7);
    }
    if (row_tiles == 2) {
        _tile_loadd(5, a_second, a_bytes);
        UFORM_AMX_DOT_(2, 5, 6);
        if (panels == 2) UFORM_AMX_DOT_(3, 5, 7);
    }
}

/* The int8 block's sums, through a scratch tile each, as (sum - correction) x row scale x column scale:
 * the same Float32 steps as the VPDPBUSD kernels', so every table gives the same bits. */
static void uform_amx_int8_store_(uform_amx_int8_t const *int8, size_t row, size_t panel, size_t rows, int row_tiles,
                                  int panels, size_t valid, float *c, size_t c_stride) {
    int32_t sums[2][2][uform_amx_rows_k][16];
    _tile_stored(0, sums[0][0], 64);
    if (panels == 2) _tile_stored(1, sums[0][1], 64);
    if (row_tiles == 2) _tile_stored(2, sums[1][0], 64);
    if (row_tiles == 2 && panels == 2) _tile_stored(3, sums[1][1], 64);
    for (int p = 0; p < panels; ++p) {
        size_t columns = p == panels - 1 ? valid : 16, first = (panel + (size_t)p) * 16;
        __mmask16 lanes = columns >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << columns) - 1);
        __m512i correction = _mm512_maskz_loadu_epi32(lanes, int8->corrections + first);
        __m512 scale = _mm512_maskz_loadu_ps(lanes, int8->scales + first);
        for (size_t r = 0; r < rows; ++r) {
            __m512i sum = _mm512_loadu_si512(sums[r / uform_amx_rows_k][p][r % uform_amx_rows_k]);
            __m512 value = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum, correction));
            value = _mm512_mul_ps(_mm512_mul_ps(value, _mm512_set1_ps(int8->row_scales[row + r])), scale);
            _mm512_mask_storeu_ps(c + r * c_stride + (size_t)p * 16, lanes, value);
        }
    }
}

/* The BF16 block's Float32 sums, straight into C, through a scratch tile where the last panel is partial. */
static void uform_amx_store_(size_t rows, int row_tiles, int panels, size_t valid, float *c, size_t c_stride) {
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

/* C [row_tiles tiles of rows, panels of 16 columns] of one block: the whole depth steps of 16 units
 * straight from A and B, the tail of `tail` units from zero-padded copies (`b_tail`, both panels,
 * made by the caller), and the stores. `next` (or NULL): the next pair of panels, prefetched a step's
 * share at a time, so that the weights arrive from memory while this pair's first block computes. */
static void uform_amx_block_(char const *a, size_t a_bytes, char const *b, size_t units, size_t steps, size_t tail,
                             char const *b_tail, size_t rows, int panels, size_t valid, float *c, size_t c_stride,
                             char const *next, uform_amx_int8_t const *int8_epilogue, size_t row, size_t panel) {
    int row_tiles = rows > uform_amx_rows_k ? 2 : 1, int8 = int8_epilogue != NULL;
    size_t second = a_bytes * uform_amx_rows_k;
    _tile_zero(0); /* only configured tiles may be touched */
    if (panels == 2) _tile_zero(1);
    if (row_tiles == 2) _tile_zero(2);
    if (row_tiles == 2 && panels == 2) _tile_zero(3);
    for (size_t step = 0; step < steps; ++step) {
        char const *a_step = a + step * 64, *b_step = b + step * uform_amx_units_k * 64;
        if (next)
            for (int line = 0; line < 32; ++line) _mm_prefetch(next + step * 2048 + line * 64, _MM_HINT_T0);
        uform_amx_multiply_(a_step, a_step + second, a_bytes, b_step, b_step + units * 64, row_tiles, panels, int8);
    }
    if (tail) {
        char a_tail[2][uform_amx_rows_k][64];
        memset(a_tail, 0, sizeof(a_tail));
        for (size_t r = 0; r < rows; ++r)
            memcpy(a_tail[r / uform_amx_rows_k][r % uform_amx_rows_k], a + r * a_bytes + steps * 64, tail * 4);
        uform_amx_read_(a_tail);
        uform_amx_multiply_(&a_tail[0][0][0], &a_tail[1][0][0], 64, b_tail, b_tail + uform_amx_units_k * 64, row_tiles,
                            panels, int8);
    }
    if (int8)
        uform_amx_int8_store_(int8_epilogue, row, panel, rows, row_tiles, panels, valid, c, c_stride);
    else
        uform_amx_store_(rows, row_tiles, panels, valid, c, c_stride);
}

/* One pass over the column blocks for the row blocks [first, last), all shaped alike; `used` of the
 * panels' `units` depth units are multiplied. */
static void uform_amx_rows_(char const *a, size_t a_bytes, char const *packed, float *c, size_t c_stride, size_t first,
                            size_t last, size_t width, size_t units, size_t used, uform_amx_int8_t const *int8) {
    size_t panels = (width + 15) / 16, steps = used / uform_amx_units_k, tail = used % uform_amx_units_k;
    char b_tail[2][uform_amx_units_k][64];
    for (size_t panel = 0; panel < panels; panel += 2) {
        int group = panels - panel < 2 ? 1 : 2;
        size_t valid = width - (panel + (size_t)group - 1) * 16;
        char const *b = packed + panel * units * 64;
        if (tail) {
            memset(b_tail, 0, sizeof(b_tail));
            for (int p = 0; p < group; ++p)
                memcpy(b_tail[p], b + ((size_t)p * units + steps * uform_amx_units_k) * 64, tail * 64);
            uform_amx_read_(b_tail);
        }
        for (size_t row = first; row < last; row += 2 * uform_amx_rows_k) {
            size_t count = last - row < 2 * uform_amx_rows_k ? last - row : 2 * uform_amx_rows_k;
            uform_amx_block_(a + row * a_bytes, a_bytes, b, units, steps, tail, &b_tail[0][0][0], count, group,
                             valid > 16 ? 16 : valid, c + row * c_stride + panel * 16, c_stride,
                             row == first && panel + 2 < panels ? b + 2 * units * 64 : NULL, int8, row, panel);
        }
    }
}

/* The whole blocks of 32 rows under one tile shape, then the last partial block under its own. */
static void uform_amx_gemm_(char const *a, size_t a_bytes, char const *packed, float *c, size_t c_stride, size_t rows,
                            size_t width, size_t units, size_t used, uform_amx_int8_t const *int8) {
    size_t whole = rows - rows % (2 * uform_amx_rows_k), rest = rows - whole;
    if (whole) {
        uform_amx_configure_(uform_amx_rows_k, uform_amx_rows_k);
        uform_amx_rows_(a, a_bytes, packed, c, c_stride, 0, whole, width, units, used, int8);
    }
    if (rest) {
        size_t first = rest < uform_amx_rows_k ? rest : uform_amx_rows_k;
        uform_amx_configure_(first, rest - first);
        uform_amx_rows_(a, a_bytes, packed, c, c_stride, whole, rows, width, units, used, int8);
    }
    _tile_release(); /* the 8 KiB tile state need not be saved at the next context switch */
}

static void uform_gemm_amx_(uint16_t const *a, size_t a_stride, uint16_t const *packed, float *c, size_t c_stride,
                            size_t rows, size_t width, size_t depth) {
    size_t pairs = (depth + 1) / 2;
    uform_amx_gemm_((char const *)a, a_stride * sizeof(uint16_t), (char const *)packed, c, c_stride, rows, width, pairs,
                    UFORM_PAIRS_USED(pairs), NULL);
}

static void uform_gemm_int8_amx_(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                 float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                 size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4;
    uform_amx_int8_t const int8 = {corrections, row_scales, scales};
    uform_amx_gemm_((char const *)a, a_stride, (char const *)packed, c, c_stride, rows, width, quads, quads, &int8);
}

/* Only the products have tiles: the rest is avx512bf16's (kernels_avx512_elementwise.c) and, for int8's
 * input rows, the VNNI table's. */
uform_kernels_t const uform_kernels_amx = {"amx", uform_gemm_amx_, uform_softmax_bf16_avx512bf16, uform_swiglu_bf16_avx512bf16,
                                           uform_round_bf16_avx512bf16, uform_widen_e4m3_avx2,
                                           uform_quantize_e4m3_avx512bf16, uform_swiglu_f32_avx512bf16,
                                           uform_quantize_int8_avx512, uform_gemm_int8_amx_,
                                           uform_rmsnorm_avx512bf16};
