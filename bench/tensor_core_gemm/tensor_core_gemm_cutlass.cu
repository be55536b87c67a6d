// CUTLASS's Hopper GEMM, the tensor-core GEMM chapter's second library baseline: three configurations of CUTLASS 3's
// API (CollectiveBuilder -> GemmUniversal -> GemmUniversalAdapter) on the chapter's operation. Compiled apart from the
// rest of the harness (bench/CMakeLists.txt, stepwise_cutlass): for sm_90a machine code alone, CUTLASS's headers as
// system headers, with --expt-relaxed-constexpr and NDEBUG. STEPWISE_CUTLASS says whether the build found the headers
// (conf/requirements-headers.txt puts them into .venv), STEPWISE_CUTLASS_SM90A whether this file is built for sm_90a;
// without both it provides no configurations and says why.
#include "tensor_core_gemm/tensor_core_gemm_cutlass.hpp"

#if !defined(STEPWISE_CUTLASS) || !defined(STEPWISE_CUTLASS_SM90A)
#error "bench/CMakeLists.txt defines STEPWISE_CUTLASS and STEPWISE_CUTLASS_SM90A (1 or 0) for this file"
#endif

#include <cstdint>
#include <string>
#include <vector>

#if STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/version.h>

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)
#error "CUTLASS's sm90 kernels need nvcc 12.0 or newer"
#endif
#endif

namespace stepwise::tensor_core_gemm {
namespace {

#if STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A

using namespace cute;

using ElementA = cutlass::bfloat16_t;
using ElementB = cutlass::bfloat16_t;
using ElementD = cutlass::bfloat16_t;
using ElementC = void;  // beta 0: no source matrix is read
using ElementAccumulator = float;
using ElementCompute = float;
using LayoutA = cutlass::layout::RowMajor;     // M rows of K: K-major
using LayoutB = cutlass::layout::ColumnMajor;  // N rows of K: K-major
using LayoutD = cutlass::layout::RowMajor;     // M rows of N
constexpr int alignment_a = 128 / cutlass::sizeof_bits<ElementA>::value;  // elements in 16 bytes, TMA's unit
constexpr int alignment_b = 128 / cutlass::sizeof_bits<ElementB>::value;
constexpr int alignment_d = 128 / cutlass::sizeof_bits<ElementD>::value;

//! TMA's limit on a global stride, in bytes (cuTensorMapEncodeTiled: "less than 2^40"): the stride between the
//! matrices of a batch is the whole matrix, so each of A, B and C must stay under it.
constexpr std::int64_t tma_max_stride_bytes = std::int64_t{1} << 40;

bool accepts_shape(int M, int N, int K)
{
    // K: the row pitch of A and B; N: that of C, which the epilogue stores through TMA too.
    if (M < 1 || N < 1 || K < 1 || K % alignment_a != 0 || K % alignment_b != 0 || N % alignment_d != 0) {
        return false;
    }
    const auto bytes = [](int rows, int cols) {
        return static_cast<std::int64_t>(rows) * cols * static_cast<std::int64_t>(sizeof(bf16));
    };
    return bytes(M, K) < tma_max_stride_bytes && bytes(N, K) < tma_max_stride_bytes &&
           bytes(M, N) < tma_max_stride_bytes;
}

//! The names the descriptions give CUTLASS's kernel schedules and tile schedulers.
template <class MainloopSchedule>
constexpr const char* schedule_name = nullptr;
template <>
constexpr const char* schedule_name<cutlass::gemm::KernelTmaWarpSpecializedCooperative> =
    "KernelTmaWarpSpecializedCooperative";
template <>
constexpr const char* schedule_name<cutlass::gemm::KernelTmaWarpSpecializedPingpong> =
    "KernelTmaWarpSpecializedPingpong";
template <class MainloopSchedule>
constexpr const char* schedule_id = nullptr;
template <>
constexpr const char* schedule_id<cutlass::gemm::KernelTmaWarpSpecializedCooperative> = "cooperative";
template <>
constexpr const char* schedule_id<cutlass::gemm::KernelTmaWarpSpecializedPingpong> = "pingpong";
template <class TileScheduler>
constexpr const char* scheduler_name = nullptr;
template <>
constexpr const char* scheduler_name<cutlass::gemm::PersistentScheduler> = "persistent scheduler";
template <>
constexpr const char* scheduler_name<cutlass::gemm::StreamKScheduler> =
    "stream-K scheduler (CUTLASS's heuristic picks data-parallel, split-K or stream-K)";

//! One configuration: the epilogue first (the mainloop's stages are what shared memory leaves it), then the mainloop,
//! the kernel and its host adapter.
template <class TileShape, class ClusterShape, class MainloopSchedule, class EpilogueSchedule, class TileScheduler>
struct Config {
    using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute, ElementC, LayoutD,
        alignment_d, ElementD, LayoutD, alignment_d, EpilogueSchedule>::CollectiveOp;
    using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, alignment_a, ElementB, LayoutB,
        alignment_b, ElementAccumulator, TileShape, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename CollectiveEpilogue::SharedStorage))>,
        MainloopSchedule>::CollectiveOp;
    using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                            CollectiveEpilogue, TileScheduler>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

    static constexpr int stages = CollectiveMainloop::DispatchPolicy::Stages;
};

using Cooperative128x256Cluster2x1 =
    Config<Shape<_128, _256, _64>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
           cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
// Ping-pong takes no stream-K scheduler (a static_assert of CUTLASS's).
using Pingpong128x128Cluster1x2 =
    Config<Shape<_128, _128, _64>, Shape<_1, _2, _1>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
           cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler>;
using Cooperative128x128Cluster1x1StreamK =
    Config<Shape<_128, _128, _64>, Shape<_1, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
           cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler>;

//! What CUTLASS's status means as a CUDA error (see CutlassGemm::gemm).
cudaError_t cuda_error(cutlass::Status status)
{
    switch (status) {
    case cutlass::Status::kSuccess:
        return cudaSuccess;
    case cutlass::Status::kErrorMisalignedOperand:
    case cutlass::Status::kErrorInvalidDataType:
    case cutlass::Status::kErrorInvalidLayout:
    case cutlass::Status::kErrorInvalidProblem:
    case cutlass::Status::kErrorNotSupported:  // can_implement's answer for shapes it does not take
    case cutlass::Status::kErrorWorkspaceNull:
    case cutlass::Status::kInvalid:
        return cudaErrorInvalidValue;
    case cutlass::Status::kErrorArchMismatch:
        return cudaErrorNotSupported;
    case cutlass::Status::kErrorInsufficientDriver:
        return cudaErrorInsufficientDriver;
    case cutlass::Status::kErrorMemoryAllocation:
        return cudaErrorMemoryAllocation;
    case cutlass::Status::kErrorInternal:
        break;
    }
    return cudaErrorUnknown;  // CUTLASS has read and cleared the CUDA error (cudaGetLastError)
}

//! The current device and the facts CUTLASS's arguments and the architecture check need.
struct Device {
    int id = 0;
    int sm_count = 0;
    int major = 0;
    int minor = 0;
};

cudaError_t query_device(Device& device)
{
    if (const cudaError_t e = cudaGetDevice(&device.id); e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&device.sm_count, cudaDevAttrMultiProcessorCount, device.id);
        e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&device.major, cudaDevAttrComputeCapabilityMajor, device.id);
        e != cudaSuccess) {
        return e;
    }
    return cudaDeviceGetAttribute(&device.minor, cudaDevAttrComputeCapabilityMinor, device.id);
}

//! CUTLASS's arguments for C = A B, the matrices packed (one matrix in the batch dimension L).
template <class Cfg>
typename Cfg::Gemm::Arguments arguments(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                                        const Device& device)
{
    using Kernel = typename Cfg::GemmKernel;
    typename Kernel::StrideA stride_a{};  // (M, K, L): (K, 1, M K)
    get<0>(stride_a) = static_cast<std::int64_t>(K);
    get<2>(stride_a) = static_cast<std::int64_t>(M) * K;
    typename Kernel::StrideB stride_b{};  // (N, K, L): (K, 1, N K)
    get<0>(stride_b) = static_cast<std::int64_t>(K);
    get<2>(stride_b) = static_cast<std::int64_t>(N) * K;
    typename Kernel::StrideD stride_d{};  // (M, N, L): (N, 1, M N)
    get<0>(stride_d) = static_cast<std::int64_t>(N);
    get<2>(stride_d) = static_cast<std::int64_t>(M) * N;
    typename Kernel::StrideC stride_c{};  // no C is read (ElementC void); its stride as D's
    get<0>(stride_c) = static_cast<std::int64_t>(N);
    get<2>(stride_c) = static_cast<std::int64_t>(M) * N;

    cutlass::KernelHardwareInfo hardware;
    hardware.device_id = device.id;
    hardware.sm_count = device.sm_count;

    typename Cfg::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {M, N, K, 1},
        {reinterpret_cast<const ElementA*>(d_A), stride_a, reinterpret_cast<const ElementB*>(d_B), stride_b},
        {{}, nullptr, stride_c, reinterpret_cast<ElementD*>(d_C), stride_d},
        hardware};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    return args;
}

bool aligned_16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

template <class Cfg>
std::size_t cutlass_workspace_bytes(int M, int N, int K)
{
    Device device;
    if (!accepts_shape(M, N, K) || query_device(device) != cudaSuccess) {
        return 0;
    }
    return Cfg::Gemm::get_workspace_size(arguments<Cfg>(M, N, K, nullptr, nullptr, nullptr, device));
}

template <class Cfg>
cudaError_t cutlass_gemm(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, void* d_workspace,
                         std::size_t workspace_bytes, cudaStream_t stream)
{
    // Refused before CUTLASS sees them: a TMA descriptor CUTLASS cannot encode makes it print and assert.
    if (!accepts_shape(M, N, K) || d_A == nullptr || d_B == nullptr || d_C == nullptr || !aligned_16(d_A) ||
        !aligned_16(d_B) || !aligned_16(d_C)) {
        return cudaErrorInvalidValue;
    }
    Device device;
    if (const cudaError_t e = query_device(device); e != cudaSuccess) {
        return e;
    }
    if (device.major != 9 || device.minor != 0) {
        return cudaErrorNotSupported;  // sm_90a machine code runs on compute capability 9.0 alone
    }
    const typename Cfg::Gemm::Arguments args = arguments<Cfg>(M, N, K, d_A, d_B, d_C, device);
    if (const cutlass::Status s = Cfg::Gemm::can_implement(args); s != cutlass::Status::kSuccess) {
        return cuda_error(s);
    }
    const std::size_t needed = Cfg::Gemm::get_workspace_size(args);
    if (needed > 0 && (d_workspace == nullptr || workspace_bytes < needed)) {
        return cudaErrorInvalidValue;
    }
    typename Cfg::Gemm op;
    if (const cutlass::Status s = op.initialize(args, needed > 0 ? d_workspace : nullptr, stream);
        s != cutlass::Status::kSuccess) {
        return cuda_error(s);
    }
    return cuda_error(op.run(stream));
}

//! "4x2x1" for a static shape of three modes.
template <class Shape3>
std::string shape_text()
{
    return std::to_string(size<0>(Shape3{})) + "x" + std::to_string(size<1>(Shape3{})) + "x" +
           std::to_string(size<2>(Shape3{}));
}

template <class Tile, class Cluster, class MainloopSchedule, class EpilogueSchedule, class TileScheduler>
CutlassGemm entry(Config<Tile, Cluster, MainloopSchedule, EpilogueSchedule, TileScheduler>)
{
    using Cfg = Config<Tile, Cluster, MainloopSchedule, EpilogueSchedule, TileScheduler>;
    static_assert(size<2>(Cluster{}) == 1, "the id names the cluster's first two modes");
    return {std::string(schedule_id<MainloopSchedule>) + "_" + shape_text<Tile>() + "_cluster" +
                std::to_string(size<0>(Cluster{})) + "x" + std::to_string(size<1>(Cluster{})),
            std::string(schedule_name<MainloopSchedule>) + ", tile " + shape_text<Tile>() + ", cluster " +
                shape_text<Cluster>() + ", " + scheduler_name<TileScheduler> + ", " + std::to_string(Cfg::stages) +
                " stages",
            accepts_shape, cutlass_workspace_bytes<Cfg>, cutlass_gemm<Cfg>};
}

#endif  // STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A

}  // namespace

const std::vector<CutlassGemm>& cutlass_gemms()
{
#if STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A
    static const std::vector<CutlassGemm> all = {entry(Cooperative128x256Cluster2x1{}),
                                                 entry(Pingpong128x128Cluster1x2{}),
                                                 entry(Cooperative128x128Cluster1x1StreamK{})};
#else
    static const std::vector<CutlassGemm> all;
#endif
    return all;
}

std::string cutlass_unavailable_reason()
{
#if !STEPWISE_CUTLASS
    return "the build found no CUTLASS headers (conf/requirements-headers.txt puts them into .venv; or set "
           "STEPWISE_CUTLASS_INCLUDE_DIR)";
#elif !STEPWISE_CUTLASS_SM90A
    return "the build has no sm_90a code (CUTLASS's Hopper kernels are built where CMAKE_CUDA_ARCHITECTURES has 90 "
           "or 90-real)";
#else
    return "";
#endif
}

std::string cutlass_version()
{
#if STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A
    return std::to_string(CUTLASS_MAJOR) + "." + std::to_string(CUTLASS_MINOR) + "." +
           std::to_string(CUTLASS_PATCH);
#else
    return "";
#endif
}

}  // namespace stepwise::tensor_core_gemm
