/*  kernels_avx512f.c: BF16 kernels for CPUs with AVX-512F but no AVX512-BF16 (Skylake-SP to Ice Lake,
 *  Zen 4 takes kernels_avx512.c): kernels_widen.h over 16-lane vectors, one vector per panel, tiles
 *  of up to 6 rows of A against 3 panels of B (18 accumulators, 6 widened B vectors). AVX-512F
 *  instructions only; compiled with -mavx512f -mfma and only called after a CPU check (kernels.c). */
#define UFORM_TILE_ROWS_MOST 6
#define UFORM_TILE_PANELS_MOST 3
#if !defined(UFORM_WIDEN_TABLE) /* kernels_avx512vnni.c names its own table over these kernels */
#define UFORM_WIDEN_TABLE uform_kernels_avx512f
#define UFORM_WIDEN_NAME "avx512f"
/* The int8 product of AVX2: 512-bit VPMADDWD needs AVX512-BW, which this table does not ask for. */
#define UFORM_WIDEN_INT8 uform_quantize_int8_avx2, uform_gemm_int8_avx2
#endif
#define UFORM_WIDEN_E4M3 uform_widen_e4m3_avx2

#include "cpu/kernels_avx512_vector.h"
#include "cpu/kernels_widen.h"

#define UFORM_WIDEN_TILE_ROW(R) UFORM_WIDEN_TILE(R, 1) UFORM_WIDEN_TILE(R, 2) UFORM_WIDEN_TILE(R, 3)
UFORM_WIDEN_TILE_ROW(1)
UFORM_WIDEN_TILE_ROW(2)
UFORM_WIDEN_TILE_ROW(3)
UFORM_WIDEN_TILE_ROW(4)
UFORM_WIDEN_TILE_ROW(5)
UFORM_WIDEN_TILE_ROW(6)
#define UFORM_WIDEN_TILE_ENTRY(R) {uform_tile_##R##_1_, uform_tile_##R##_2_, uform_tile_##R##_3_}
static uform_tile_t const uform_tiles_[UFORM_TILE_ROWS_MOST][UFORM_TILE_PANELS_MOST] = {
    UFORM_WIDEN_TILE_ENTRY(1), UFORM_WIDEN_TILE_ENTRY(2), UFORM_WIDEN_TILE_ENTRY(3),
    UFORM_WIDEN_TILE_ENTRY(4), UFORM_WIDEN_TILE_ENTRY(5), UFORM_WIDEN_TILE_ENTRY(6)};
UFORM_WIDEN_GEMM(uform_tiles_)
