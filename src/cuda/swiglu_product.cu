/*  swiglu_product.cu: the gate_up product with SwiGLU in its epilogue, on Hopper (sm_90a), for
 *  inference (cuda.h, uform_cuda_swiglu_product). CUTLASS's warp-specialized TMA + WGMMA mainloop
 *  and a custom epilogue: cuBLASLt has no epilogue that joins two output columns, and without one
 *  gate and up make a round trip through memory (docs/cuda.md, "Where an encode call's time goes").
 *  The one C++ template unit of the backend, behind a C entry point; built only where CMake finds
 *  CUTLASS's headers (third_party/cutlass, from scripts/setup.sh) and the build targets sm_90. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace {

using namespace cute;

/* The product's columns in pairs (gate of a hidden unit, its up beside it), in an order that gives
 * each thread eight consecutive hidden units per row (cuda.h, uform_cuda_swiglu_pair_row). */
constexpr int tile_k = 64;

/* Writes hidden [M, N / 2] = silu(gate) * up in BF16 from the accumulators: with Hopper's
 * accumulator layout each thread holds columns (n, n + 1), a gate and its up, for n = 2 (lane % 4)
 * + 8 j, so SwiGLU needs no exchange between threads. Modelled on CUTLASS's DefaultEpilogue. */
template <int TileN>
struct SwigluEpilogue {
    using ElementC = cutlass::bfloat16_t;
    using ElementD = cutlass::bfloat16_t;
    using StrideC = cute::Stride<int64_t, cute::_1, int64_t>;
    using StrideD = StrideC;
    using GmemTiledCopyC = void;
    using GmemTiledCopyD = void;
    struct ThreadEpilogueOp {}; /* named by GemmUniversalAdapter, unused */
    struct SharedStorage {};
    using TensorStorage = SharedStorage;
    struct Arguments {
        uint16_t *hidden = nullptr;
        int64_t stride = 0; /* hidden's row stride in elements */
        int plant = 0;      /* the contract's controls: 1 sigmoid for silu, 2 gate and up swapped */
    };
    using Params = Arguments;

    template <class ProblemShape>
    static constexpr Params to_underlying_arguments(ProblemShape const &, Arguments const &args, void *) { return args; }
    template <class ProblemShape>
    static size_t get_workspace_size(ProblemShape const &, Arguments const &) { return 0; }
    template <class ProblemShape>
    static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *, cudaStream_t,
                                                cutlass::CudaHostAdapter * = nullptr) {
        return cutlass::Status::kSuccess;
    }
    template <class ProblemShape>
    static bool can_implement(ProblemShape const &problem, Arguments const &args) {
        return get<1>(problem) % TileN == 0 && args.stride % 8 == 0 && args.hidden;
    }

    CUTLASS_HOST_DEVICE SwigluEpilogue(Params const &params_, SharedStorage const & = SharedStorage()) : params(params_) {}

    template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
              class TiledMma, class ResidueMNK>
    CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                   BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const &accumulators,
                                   TiledMma tiled_mma, ResidueMNK, int thread_idx, char *) {
        auto M = get<0>(problem_shape_mnkl);
        auto N = get<1>(problem_shape_mnkl);
        auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
        Tensor coordinates = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_MNK),
                                        make_coord(m_coord, n_coord));      /* (BLK_M, BLK_N) -> (m, n) */
        Tensor mine = tiled_mma.get_thread_slice(thread_idx).partition_C(coordinates); /* as the accumulators */
        /* 64 x TileN WGMMA atoms down the tile: values ((column pair, row + 8, column group of 8), atom, 1). */
        static_assert(rank(FrgLayout{}) == 3 && size<2>(FrgLayout{}) == 1, "the tile's columns in one atom");
        static_assert(size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2 && size<0, 2>(FrgLayout{}) == TileN / 8,
                      "Hopper's 64 x N accumulator layout");
        int const plant = params.plant;
        CUTLASS_PRAGMA_UNROLL
        for (int a = 0; a < size<1>(FrgLayout{}); ++a)
        CUTLASS_PRAGMA_UNROLL
        for (int h = 0; h < 2; ++h) {
            auto corner = mine(make_coord(make_coord(0, h, 0), a, 0));
            int m = get<0>(corner), n = get<1>(corner); /* n = the tile's first column + 2 (lane % 4) */
            if (m >= M) continue;
            uint16_t *row = params.hidden + m * params.stride + (n / 64) * 32 + ((n % 8) / 2) * 8;
            CUTLASS_PRAGMA_UNROLL
            for (int p = 0; p < TileN / 64; ++p) {
                uint4 packed;
                uint16_t *out = reinterpret_cast<uint16_t *>(&packed);
                CUTLASS_PRAGMA_UNROLL
                for (int q = 0; q < 8; ++q) {
                    float gate = accumulators(make_coord(make_coord(0, h, 8 * p + q), a, 0));
                    float up = accumulators(make_coord(make_coord(1, h, 8 * p + q), a, 0));
                    if (plant == 2) { float t = gate; gate = up, up = t; }
                    float sigmoid = __frcp_rn(1.0f + expf(-gate)); /* as 1 / x, correctly rounded */
                    float value = (plant == 1 ? sigmoid : gate * sigmoid) * up;
                    out[q] = cutlass::bfloat16_t(value).raw();
                }
                *reinterpret_cast<uint4 *>(row + p * 32) = packed;
            }
        }
    }

    Params params;
};

template <int TileM, int TileN, class Schedule>
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::bfloat16_t, cutlass::layout::RowMajor, 8,
    cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8, float, Shape<Int<TileM>, Int<TileN>, Int<tile_k>>,
    Shape<_1, _1, _1>, cutlass::gemm::collective::StageCountAuto, Schedule>::CollectiveOp;
template <int TileM, int TileN, class Schedule>
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, Mainloop<TileM, TileN, Schedule>,
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<SwigluEpilogue<TileN>>>>;

template <class Gemm>
int run_(uint16_t const *x, size_t cells, size_t k, uint16_t const *pairs, size_t hidden_width, uint16_t *hidden, int plant,
         void *stream) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 1;
    int m = (int)cells, n = (int)(2 * hidden_width), depth = (int)k;
    typename Gemm::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, depth, 1},
        {reinterpret_cast<cutlass::bfloat16_t const *>(x), make_stride(int64_t(depth), _1{}, int64_t(m) * depth),
         reinterpret_cast<cutlass::bfloat16_t const *>(pairs), make_stride(int64_t(depth), _1{}, int64_t(n) * depth)},
        {hidden, int64_t(hidden_width), plant},
        cutlass::KernelHardwareInfo{device, cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device)}};
    Gemm gemm;
    if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) return 2;
    if (Gemm::get_workspace_size(arguments) != 0) return 3;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (gemm.initialize(arguments, nullptr, s) != cutlass::Status::kSuccess) return 4;
    if (gemm.run(s) != cutlass::Status::kSuccess) return 5;
    return cudaPeekAtLastError() == cudaSuccess ? 0 : 6;
}

}  // namespace

extern "C" int uform_cuda_swiglu_product_run(uint16_t const *x, size_t cells, size_t k, uint16_t const *pairs,
                                             size_t hidden_width, uint16_t *hidden, int plant, void *stream) {
    /* Cooperative 128 x 256 tiles: pingpong's 128 x 128 and 64 x 256 measured 5-6% slower at tiny (docs/cuda.md). */
    return run_<Gemm<128, 256, cutlass::gemm::KernelTmaWarpSpecializedCooperative>>(x, cells, k, pairs, hidden_width, hidden,
                                                                                   plant, stream);
}
