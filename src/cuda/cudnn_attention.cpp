/*  cudnn_attention.cpp: attention within segments through cuDNN's fused flash attention, behind
 *  the C entry points of cudnn_attention.h. The one C++ unit of the host code: cuDNN offers its
 *  fused attention only as a pattern of its graph API, which the header-only C++ frontend builds
 *  (the C backend would need that pattern rebuilt descriptor by descriptor). Segments map to
 *  cuDNN's ragged layout: sequence i starts at its first cell (ragged offsets) and runs its length
 *  (padding mask), with q, k, v read in place from the interleaved qkv rows. */
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdio>
#include <memory>
#include <unordered_map>

#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/cudnn_attention.h"
#include "cuda/plant.h"

namespace fe = cudnn_frontend;

namespace {

enum : int64_t { q_uid = 1, k_uid, v_uid, o_uid, stats_uid, d_o_uid, d_q_uid, d_k_uid, d_v_uid, lengths_uid,
                 rows_offset_uid, qkv_offset_uid, stats_offset_uid, descale_q_uid, descale_k_uid, descale_v_uid,
                 descale_s_uid, scale_s_uid, scale_o_uid, amax_s_uid, amax_o_uid };

} // namespace

/* One direction's graph and the plan it runs: cuDNN's first choice, or with tuning the fastest of
 * all the plans cuDNN offers, timed on the first call outside a graph capture. */
struct pass_t {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t plans, chosen;
    bool tuned;
    float milliseconds, first; /* the chosen plan's time and cuDNN's first choice's (plan 0) */
};

struct uform_cudnn_attention_t {
    cudnnHandle_t handle;
    pass_t forward, backward;
    size_t segments, longest, width;
    bool inference; /* forward only, no log-sum-exps */
    bool fp8;       /* inference in FP8: q, k, v and the output as E4M3 codes */
    float *fp8_scalars; /* FP8: the softmax weights' descale and scale (1 / 448, 448), then the two amax outputs */
    int32_t *lengths, *qkv_offsets, *row_offsets;
    void *workspace;
    int64_t workspace_bytes;
    char report[512];
};

/* A plan cuDNN cannot build for this shape: valid input it does not take (unsupported), noted with its message. */
static uform_status_t refused(char const *what, std::string const &message) {
    return uform_cuda_note(uform_unsupported_k, "cudnn_attention_create: %s: %s", what, message.c_str());
}

/* The tensors both graphs share: q, k, v (or their gradients) in qkv rows, o (or dO) in w rows; BF16, or
 * E4M3 codes in the FP8 graph (strides and offsets count elements either way). */
static std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph &graph, int64_t uid, char const *name,
                                                            uform_cudnn_attention_t const *a, int64_t row_stride,
                                                            std::shared_ptr<fe::graph::Tensor_attributes> offsets) {
    int64_t b = (int64_t)a->segments, h = (int64_t)a->width / 64, s = (int64_t)a->longest;
    auto t = graph.tensor(fe::graph::Tensor_attributes()
                              .set_name(name)
                              .set_uid(uid)
                              .set_dim({b, h, s, 64})
                              .set_stride({s * row_stride, 64, row_stride, 1})
                              .set_data_type(a->fp8 ? fe::DataType_t::FP8_E4M3 : fe::DataType_t::BFLOAT16));
    t->set_ragged_offset(offsets);
    return t;
}

/* One Float32 scalar the FP8 graph reads from device memory. */
static std::shared_ptr<fe::graph::Tensor_attributes> scalar(fe::graph::Graph &graph, int64_t uid, char const *name) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name(name)
                            .set_uid(uid)
                            .set_dim({1, 1, 1, 1})
                            .set_stride({1, 1, 1, 1})
                            .set_data_type(fe::DataType_t::FLOAT));
}

static std::shared_ptr<fe::graph::Tensor_attributes> integers(fe::graph::Graph &graph, int64_t uid, char const *name,
                                                              int64_t count) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name(name)
                            .set_uid(uid)
                            .set_dim({count, 1, 1, 1})
                            .set_stride({1, 1, 1, 1})
                            .set_data_type(fe::DataType_t::INT32));
}

/* Plans the graph: cuDNN's heuristic choice, or with `tune` every plan of its heuristic list that
 * builds (the rest stay unbuilt and fail when timed, which skips them). The workspace fits the
 * largest built plan. */
static fe::error_t build(std::shared_ptr<fe::graph::Graph> const &graph, cudnnHandle_t handle, bool tune, pass_t *pass,
                         int64_t *workspace) {
    fe::error_t status = graph->validate();
    if (status.is_good()) status = graph->build_operation_graph(handle);
    if (status.is_good()) status = graph->create_execution_plans({fe::HeurMode_t::A});
    if (status.is_good()) status = graph->check_support(handle);
    if (status.is_good())
        status = graph->build_plans(handle, tune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
    if (status.is_bad()) return status;
    *pass = pass_t{graph, tune ? graph->get_execution_plan_count() : 1, -1, !tune, 0.0f, 0.0f};
    for (int64_t i = 0; i < pass->plans; ++i) {
        int64_t bytes = 0;
        status = tune ? graph->get_workspace_size_plan_at_index(i, bytes) : graph->get_workspace_size(bytes);
        if (status.is_good() && bytes > *workspace) *workspace = bytes;
    }
    return tune ? fe::error_t{} : status;
}

/* One execution of plan `index` (-1: the heuristic's) on a copy of the caller's map: the frontend emplaces
 * pointers to its own call's copies of the scalars (the attention scale) into the map it is given, and
 * emplace keeps an earlier call's entry, which by then points at freed memory. */
static fe::error_t execute(uform_cudnn_attention_t *a, pass_t const *pass,
                           std::unordered_map<int64_t, void *> const &pack, int64_t index) {
    std::unordered_map<int64_t, void *> fresh = pack;
    return index < 0 ? pass->graph->execute(a->handle, fresh, a->workspace)
                     : pass->graph->execute_plan_at_index(a->handle, fresh, a->workspace, index);
}

/* Runs the pass for `entry`; the first call outside a capture with tuning times each plan (best of three) and keeps
 * the fastest. */
static uform_status_t run(uform_cudnn_attention_t *a, pass_t *pass, std::unordered_map<int64_t, void *> const &pack,
                          cudaStream_t stream, char const *entry) {
    cudnnStatus_t code = cudnnSetStream(a->handle, stream);
    if (code != CUDNN_STATUS_SUCCESS)
        return uform_cuda_note(uform_device_k, "%s: cudnnSetStream failed: %s", entry, cudnnGetErrorString(code));
    if (!pass->tuned) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        cudaStreamIsCapturing(stream, &capturing);
        if (capturing != cudaStreamCaptureStatusNone)
            return uform_cuda_note(uform_device_k, "%s: its plans are timed on a first call outside a graph capture", entry);
        cudaEvent_t start, stop;
        cudaEventCreate(&start), cudaEventCreate(&stop);
        for (int64_t i = 0; i < pass->plans; ++i) {
            float best = 0;
            for (int repeat = 0; repeat < 3; ++repeat) {
                cudaEventRecord(start, stream);
                if (execute(a, pass, pack, i).is_bad()) {
                    best = 0;
                    break;
                }
                cudaEventRecord(stop, stream);
                float milliseconds = 0;
                if (cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&milliseconds, start, stop))
                    break;
                if (!repeat || milliseconds < best) best = milliseconds;
            }
            cudaGetLastError(); /* a plan that failed to launch leaves nothing behind for the next */
            if (!i) pass->first = best;
            if (best > 0 && (pass->chosen < 0 || best < pass->milliseconds)) pass->chosen = i, pass->milliseconds = best;
        }
        cudaEventDestroy(start), cudaEventDestroy(stop);
        if (pass->chosen < 0)
            return uform_cuda_note(uform_device_k, "%s: none of its %lld plans ran", entry, (long long)pass->plans);
        pass->tuned = true;
    }
    fe::error_t status = execute(a, pass, pack, pass->chosen);
    if (status.is_bad())
        return uform_cuda_note(uform_device_k, "%s: execute failed: %s", entry, status.get_message().c_str());
    return uform_ok_k;
}

/* A graph of one direction: its types (io BF16, or E4M3 for FP8), lengths and ragged offsets, and q, k, v in qkv rows. */
struct graph_start_t {
    std::shared_ptr<fe::graph::Graph> graph;
    std::shared_ptr<fe::graph::Tensor_attributes> lengths, qkv_offsets, row_offsets, q, k, v;
};

static graph_start_t start(uform_cudnn_attention_t const *a) {
    int64_t b = (int64_t)a->segments, w = (int64_t)a->width;
    graph_start_t g;
    g.graph = std::make_shared<fe::graph::Graph>();
    g.graph->set_io_data_type(a->fp8 ? fe::DataType_t::FP8_E4M3 : fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    g.lengths = integers(*g.graph, lengths_uid, "lengths", b);
    g.qkv_offsets = integers(*g.graph, qkv_offset_uid, "qkv_offsets", b + 1);
    g.row_offsets = integers(*g.graph, rows_offset_uid, "row_offsets", b + 1);
    g.q = tensor(*g.graph, q_uid, "q", a, 3 * w, g.qkv_offsets), g.k = tensor(*g.graph, k_uid, "k", a, 3 * w, g.qkv_offsets);
    g.v = tensor(*g.graph, v_uid, "v", a, 3 * w, g.qkv_offsets);
    return g;
}

/* The FP8 forward (inference): S = q k^T at q's and k's scales, the softmax's weights coded at 448, O = P v at
 * v's scale coded at the output's (scale_o multiplies), as cuDNN's FP8 attention on sm_90 runs it (its
 * output only in FP8 there). */
static fe::error_t fp8_forward(uform_cudnn_attention_t *a) {
    int64_t b = (int64_t)a->segments, h = (int64_t)a->width / 64, s = (int64_t)a->longest, w = (int64_t)a->width;
    auto [graph, lengths, qkv_offsets, row_offsets, q, k, v] = start(a);
    auto options = fe::graph::SDPA_fp8_attributes()
                       .set_name("attention_fp8")
                       .set_generate_stats(false)
                       .set_attn_scale(0.125f)
                       .set_padding_mask(true)
                       .set_seq_len_q(lengths)
                       .set_seq_len_kv(lengths);
    auto [o, stats, amax_s, amax_o] =
        graph->sdpa_fp8(q, k, v, scalar(*graph, descale_q_uid, "descale_q"), scalar(*graph, descale_k_uid, "descale_k"),
                        scalar(*graph, descale_v_uid, "descale_v"), scalar(*graph, descale_s_uid, "descale_s"),
                        scalar(*graph, scale_s_uid, "scale_s"), scalar(*graph, scale_o_uid, "scale_o"), options);
    (void)stats;
    o->set_output(true).set_uid(o_uid).set_dim({b, h, s, 64}).set_stride({s * w, 64, w, 1}).set_ragged_offset(row_offsets)
        .set_data_type(fe::DataType_t::FP8_E4M3);
    for (auto [amax, uid] : {std::make_pair(amax_s, (int64_t)amax_s_uid), std::make_pair(amax_o, (int64_t)amax_o_uid)})
        amax->set_output(true).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
    return build(graph, a->handle, false, &a->forward, &a->workspace_bytes);
}

static uform_status_t create(uform_cudnn_attention_t **result, size_t segments, size_t longest, size_t width,
                             int deterministic, int tune, bool inference, bool fp8 = false) {
    *result = nullptr;
    auto *a = new uform_cudnn_attention_t{};
    a->segments = segments, a->longest = longest, a->width = width, a->inference = inference, a->fp8 = fp8;
    cudnnStatus_t code = cudnnCreate(&a->handle);
    if (code != CUDNN_STATUS_SUCCESS) {
        delete a;
        return uform_cuda_note(uform_device_k, "cudnn_attention_create: cudnnCreate failed: %s", cudnnGetErrorString(code));
    }
    *result = a;
    int64_t b = (int64_t)segments, h = (int64_t)width / 64, s = (int64_t)longest, w = (int64_t)width;
    if (fp8) {
        fe::error_t status = fp8_forward(a);
        if (status.is_bad()) return refused("FP8 forward", status.get_message());
    }
    for (int pass = 0; pass < (fp8 ? 0 : inference ? 1 : 2); ++pass) {
        auto [graph, lengths, qkv_offsets, row_offsets, q, k, v] = start(a);
        if (pass == 0) {
            auto options = fe::graph::SDPA_attributes()
                               .set_name("attention")
                               .set_generate_stats(!inference)
                               .set_attn_scale(0.125f)
                               .set_padding_mask(true)
                               .set_seq_len_q(lengths)
                               .set_seq_len_kv(lengths);
            auto [o, stats] = graph->sdpa(q, k, v, options);
            o->set_output(true).set_uid(o_uid).set_dim({b, h, s, 64}).set_stride({s * w, 64, w, 1}).set_ragged_offset(row_offsets);
            if (!inference)
                stats->set_output(true).set_uid(stats_uid).set_data_type(fe::DataType_t::FLOAT).set_dim({b, h, s, 1}).set_stride(
                    {h * s, s, 1, 1});
            fe::error_t status = build(graph, a->handle, tune != 0, &a->forward, &a->workspace_bytes);
            if (status.is_bad()) return refused("forward", status.get_message());
        } else {
            auto o = tensor(*graph, o_uid, "o", a, w, row_offsets), d_o = tensor(*graph, d_o_uid, "d_o", a, w, row_offsets);
            auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                           .set_name("stats")
                                           .set_uid(stats_uid)
                                           .set_dim({b, h, s, 1})
                                           .set_stride({h * s, s, 1, 1})
                                           .set_data_type(fe::DataType_t::FLOAT));
            auto options = fe::graph::SDPA_backward_attributes()
                               .set_name("attention_backward")
                               .set_attn_scale(0.125f)
                               .set_padding_mask(true)
                               .set_seq_len_q(lengths)
                               .set_seq_len_kv(lengths)
                               .set_deterministic_algorithm(deterministic != 0);
            auto [d_q, d_k, d_v] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
            d_q->set_output(true).set_uid(d_q_uid).set_dim({b, h, s, 64}).set_stride({s * 3 * w, 64, 3 * w, 1}).set_ragged_offset(qkv_offsets);
            d_k->set_output(true).set_uid(d_k_uid).set_dim({b, h, s, 64}).set_stride({s * 3 * w, 64, 3 * w, 1}).set_ragged_offset(qkv_offsets);
            d_v->set_output(true).set_uid(d_v_uid).set_dim({b, h, s, 64}).set_stride({s * 3 * w, 64, 3 * w, 1}).set_ragged_offset(qkv_offsets);
            fe::error_t status = build(graph, a->handle, tune != 0, &a->backward, &a->workspace_bytes);
            if (status.is_bad()) return refused("backward", status.get_message());
        }
    }
    uform_status_t status = uform_cuda_check(cudaMalloc((void **)&a->lengths, (3 * segments + 2) * sizeof(int32_t)),
                                             "cudnn_attention_create", "cudaMalloc");
    if (status == uform_ok_k && a->workspace_bytes)
        status = uform_cuda_check(cudaMalloc(&a->workspace, (size_t)a->workspace_bytes), "cudnn_attention_create",
                                  "cudaMalloc");
    if (status == uform_ok_k && fp8) {
        float const constants[2] = {1.0f / 448.0f, 448.0f};
        status = uform_cuda_check(cudaMalloc((void **)&a->fp8_scalars, 4 * sizeof(float)), "cudnn_attention_create", "cudaMalloc");
        if (status == uform_ok_k)
            status = uform_cuda_check(cudaMemcpy(a->fp8_scalars, constants, sizeof(constants), cudaMemcpyHostToDevice),
                                      "cudnn_attention_create", "cudaMemcpy");
    }
    if (status != uform_ok_k) return status;
    a->qkv_offsets = a->lengths + segments, a->row_offsets = a->qkv_offsets + segments + 1;
    return uform_ok_k;
}

extern "C" uform_status_t uform_cudnn_attention_create(uform_cudnn_attention_t **result, size_t segments,
                                                       size_t longest, size_t width, int deterministic, int tune) {
    return create(result, segments, longest, width, deterministic, tune, false);
}

extern "C" uform_status_t uform_cudnn_attention_create_inference(uform_cudnn_attention_t **result, size_t segments,
                                                                 size_t longest, size_t width) {
    return create(result, segments, longest, width, 0, 0, true);
}

extern "C" uform_status_t uform_cudnn_attention_create_fp8(uform_cudnn_attention_t **result, size_t segments, size_t longest,
                                                           size_t width) {
    return create(result, segments, longest, width, 0, 0, true, true);
}

extern "C" size_t uform_cudnn_version(void) { return cudnnGetVersion(); }

extern "C" void uform_cudnn_attention_destroy(uform_cudnn_attention_t *a) {
    if (!a) return;
    cudaFree(a->lengths);
    cudaFree(a->fp8_scalars);
    cudaFree(a->workspace);
    a->forward.graph.reset(), a->backward.graph.reset();
    cudnnDestroy(a->handle);
    delete a;
}

extern "C" size_t uform_cudnn_attention_stats_floats(uform_cudnn_attention_t const *a) {
    return a->segments * (a->width / 64) * a->longest;
}

extern "C" size_t uform_cudnn_attention_device_bytes(uform_cudnn_attention_t const *a) {
    return (size_t)a->workspace_bytes + (3 * a->segments + 2) * sizeof(int32_t);
}

extern "C" uform_status_t uform_cudnn_attention_prepare(uform_cudnn_attention_t *a, uint32_t const *spans, size_t cells,
                                                        void *stream) {
    return uform_cuda_ragged_offsets(spans, a->segments, cells, a->width, a->fp8 ? 1 : 0, a->lengths, a->qkv_offsets,
                                     a->row_offsets, stream);
}

extern "C" uform_status_t uform_cudnn_attention_forward_fp8(uform_cudnn_attention_t *a, uint8_t const *codes,
                                                            float const *scales, float const *output_scale,
                                                            uint8_t *attended, void *stream) {
    if (!a->fp8) return uform_cuda_note(uform_invalid_argument_k, "cudnn_attention_forward_fp8: a plan made without FP8");
    uint8_t *base = const_cast<uint8_t *>(codes);
    float *scale = const_cast<float *>(scales), *inverse = const_cast<float *>(output_scale);
    std::unordered_map<int64_t, void *> pack = {{q_uid, base}, {k_uid, base + a->width}, {v_uid, base + 2 * a->width},
                                                {o_uid, attended}, {lengths_uid, a->lengths},
                                                {qkv_offset_uid, a->qkv_offsets}, {rows_offset_uid, a->row_offsets},
                                                {descale_q_uid, scale}, {descale_k_uid, scale + 4},
                                                {descale_v_uid, scale + (uform_cuda_host_planted("cudnn_attention_fp8") ? 4 : 8)}, /* planted: k's scale for v's */
                                                {descale_s_uid, a->fp8_scalars}, {scale_s_uid, a->fp8_scalars + 1},
                                                {scale_o_uid, inverse}, {amax_s_uid, a->fp8_scalars + 2},
                                                {amax_o_uid, a->fp8_scalars + 3}};
    return run(a, &a->forward, pack, (cudaStream_t)stream, "cudnn_attention_forward_fp8");
}

extern "C" uform_status_t uform_cudnn_attention_forward(uform_cudnn_attention_t *a, uint16_t const *qkv,
                                                        uint16_t *attended, float *stats, void *stream) {
    if (a->fp8) return uform_cuda_note(uform_invalid_argument_k, "cudnn_attention_forward: a plan made for FP8");
    uint16_t *base = const_cast<uint16_t *>(qkv);
    std::unordered_map<int64_t, void *> pack = {{q_uid, base}, {k_uid, base + a->width}, {v_uid, base + 2 * a->width},
                                                {o_uid, attended}, {lengths_uid, a->lengths},
                                                {qkv_offset_uid, a->qkv_offsets}, {rows_offset_uid, a->row_offsets}};
    if (!a->inference) pack.emplace(stats_uid, stats);
    return run(a, &a->forward, pack, (cudaStream_t)stream, "cudnn_attention_forward");
}

extern "C" uform_status_t uform_cudnn_attention_backward(uform_cudnn_attention_t *a, uint16_t const *qkv,
                                                         uint16_t const *attended, float const *stats,
                                                         uint16_t const *d_attended, uint16_t *d_qkv, void *stream) {
    uint16_t *base = const_cast<uint16_t *>(qkv);
    std::unordered_map<int64_t, void *> pack = {
        {q_uid, base}, {k_uid, base + a->width}, {v_uid, base + 2 * a->width}, {o_uid, const_cast<uint16_t *>(attended)},
        {stats_uid, const_cast<float *>(stats)}, {d_o_uid, const_cast<uint16_t *>(d_attended)}, {d_q_uid, d_qkv},
        {d_k_uid, d_qkv + a->width}, {d_v_uid, d_qkv + 2 * a->width}, {lengths_uid, a->lengths},
        {qkv_offset_uid, a->qkv_offsets}, {rows_offset_uid, a->row_offsets}};
    return run(a, &a->backward, pack, (cudaStream_t)stream, "cudnn_attention_backward");
}

extern "C" char const *uform_cudnn_attention_plans(uform_cudnn_attention_t *a) {
    std::string names[2];
    pass_t const *passes[2] = {&a->forward, &a->backward};
    for (int i = 0; i < 2; ++i)
        if (passes[i]->graph && passes[i]->chosen >= 0 && passes[i]->graph->get_plan_name_at_index(passes[i]->chosen, names[i]).is_bad())
            names[i] = "unnamed";
    std::snprintf(a->report, sizeof(a->report),
                  "forward %s (of %lld plans, %.3f ms; the first %.3f ms), backward %s (of %lld plans, %.3f ms; the first %.3f ms)",
                  names[0].empty() ? "heuristic" : names[0].c_str(), (long long)a->forward.plans, a->forward.milliseconds,
                  a->forward.first, names[1].empty() ? "heuristic" : names[1].c_str(), (long long)a->backward.plans,
                  a->backward.milliseconds, a->backward.first);
    return a->report;
}
