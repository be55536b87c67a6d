#include "core/nvml.hpp"

#include <dlfcn.h>

namespace stepwise {
namespace {

// The NVML ABI subset we call (nvml.h is not part of the CUDA toolkit here).
using nvmlReturn = int;
using nvmlDevice = void*;
constexpr nvmlReturn nvml_success = 0;
constexpr int nvml_clock_sm = 1;
constexpr int nvml_temperature_gpu = 0;

template <typename Function>
Function symbol(void* library, const char* name)
{
    return reinterpret_cast<Function>(dlsym(library, name));
}

}  // namespace

Nvml::Nvml(const std::string& pci_bus_id)
{
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) {
        reason_ = "libnvidia-ml.so.1 not found";
        return;
    }
    auto init = symbol<nvmlReturn (*)()>(library_, "nvmlInit_v2");
    auto by_bus = symbol<nvmlReturn (*)(const char*, nvmlDevice*)>(library_, "nvmlDeviceGetHandleByPciBusId_v2");
    if (init == nullptr || by_bus == nullptr || init() != nvml_success) {
        reason_ = "NVML did not initialize";
        return;
    }
    nvmlDevice device = nullptr;
    if (by_bus(pci_bus_id.c_str(), &device) != nvml_success) {
        reason_ = "NVML does not know the GPU at PCI bus id " + pci_bus_id;
        return;
    }
    device_ = device;
}

Nvml::~Nvml()
{
    if (library_ != nullptr) {
        if (auto shutdown = symbol<nvmlReturn (*)()>(library_, "nvmlShutdown"); shutdown && device_) {
            shutdown();
        }
        dlclose(library_);
    }
}

std::optional<std::string> Nvml::driver_version() const
{
    if (!available()) {
        return std::nullopt;
    }
    auto get = symbol<nvmlReturn (*)(char*, unsigned)>(library_, "nvmlSystemGetDriverVersion");
    char text[96] = {};
    if (get == nullptr || get(text, sizeof text) != nvml_success) {
        return std::nullopt;
    }
    return std::string(text);
}

std::optional<double> Nvml::device_query(const char* function, int kind) const
{
    if (!available()) {
        return std::nullopt;
    }
    auto get = symbol<nvmlReturn (*)(nvmlDevice, int, unsigned*)>(library_, function);
    unsigned value = 0;
    if (get == nullptr || get(device_, kind, &value) != nvml_success) {
        return std::nullopt;
    }
    return static_cast<double>(value);
}

std::optional<double> Nvml::sm_clock_mhz() const { return device_query("nvmlDeviceGetClockInfo", nvml_clock_sm); }

std::optional<double> Nvml::max_sm_clock_mhz() const
{
    return device_query("nvmlDeviceGetMaxClockInfo", nvml_clock_sm);
}

std::optional<double> Nvml::temperature_c() const
{
    return device_query("nvmlDeviceGetTemperature", nvml_temperature_gpu);
}

}  // namespace stepwise
